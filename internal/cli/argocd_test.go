package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

func TestReadArgocdParameters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		env     string // ARGOCD_APP_PARAMETERS; "-" for unset
		want    []string
		wantErr string
	}{
		{desc: "unset", env: "-"},
		{desc: "empty", env: ""},
		{desc: "no parameters", env: "[]"},
		{
			// What Argo CD writes for every kind (its MarshalJSON).
			desc: "every kind",
			env: `[{"name":"release-name","string":"shop-prod"},` +
				`{"name":"values-files","array":["values-prod.yaml","values e2e.yaml"]},` +
				`{"name":"set","map":{"replicas":"3","image.tag":"1.4,1.5"}},` +
				`{"name":"values","string":"a: 1\nb:\n  - x\n"}]`,
			want: []string{
				"release-name", "", "shop-prod",
				"values-files", "0", "values-prod.yaml",
				"values-files", "1", "values e2e.yaml",
				"set", "image.tag", "1.4,1.5",
				"set", "replicas", "3",
				"values", "", "a: 1\nb:\n  - x\n",
			},
		},
		{desc: "an empty array and map", env: `[{"name":"values-files","array":[]},{"name":"set-string","map":{}}]`},
		{desc: "an empty string", env: `[{"name":"namespace","string":""}]`, want: []string{"namespace", "", ""}},
		{
			desc:    "an unknown parameter",
			env:     `[{"name":"valueFiles","array":["a.yaml"]}]`,
			wantErr: `plugin parameter "valueFiles": unknown; the digestpin plugin takes api-versions, ignore-missing-value-files, kube-version, namespace, release-name, set, set-file, set-from-env, set-string, skip-crds, skip-schema-validation, skip-tests, values, values-files`,
		},
		{
			desc:    "a seed file",
			env:     `[{"name":"seed-file","string":"/home/argocd/digestpin-seed/project.team-a"}]`,
			wantErr: `plugin parameter "seed-file": an Application cannot choose the seed: the plugin renders every Helm chart with the sidecar's`,
		},
		{
			desc:    "a seed",
			env:     `[{"name":"seed","string":"digestpin-seed-v1:AAAA"}]`,
			wantErr: `plugin parameter "seed": an Application cannot choose the seed`,
		},
		{
			desc:    "a string where an array is wanted",
			env:     `[{"name":"values-files","string":"a.yaml"}]`,
			wantErr: `plugin parameter "values-files": want an array value, have string`,
		},
		{
			desc:    "two kinds of value",
			env:     `[{"name":"set","map":{"a":"1"},"array":["a=1"]}]`,
			wantErr: `plugin parameter "set": want a map value, have array and map`,
		},
		{
			desc:    "no value",
			env:     `[{"name":"namespace"}]`,
			wantErr: `plugin parameter "namespace": want a string value, have no value`,
		},
		{
			desc:    "set twice",
			env:     `[{"name":"namespace","string":"a"},{"name":"namespace","string":"b"}]`,
			wantErr: `plugin parameter "namespace": set twice`,
		},
		{
			desc:    "a NUL character",
			env:     `[{"name":"set","map":{"a":"x\u0000y"}}]`,
			wantErr: `plugin parameter "set": holds a NUL character`,
		},
		{
			desc:    "an empty map key",
			env:     `[{"name":"set","map":{"":"1"}}]`,
			wantErr: `plugin parameter "set": has an empty key`,
		},
		{
			desc:    "not JSON",
			env:     `values-files=a.yaml`,
			wantErr: "reading ARGOCD_APP_PARAMETERS: invalid character",
		},
		{
			desc:    "an unknown field",
			env:     `[{"name":"set","map":{"a":"1"},"forceString":true}]`,
			wantErr: `reading ARGOCD_APP_PARAMETERS: json: unknown field "forceString"`,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			lookup := func(name string) (string, bool) {
				if name != argocdParametersEnv || tc.env == "-" {
					return "", false
				}
				return tc.env, true
			}
			values, err := readArgocdParameters(lookup)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("readArgocdParameters(%s) = %v, want an error starting %q", tc.env, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("readArgocdParameters(%s) = %v", tc.env, err)
			}
			var got []string
			for _, v := range values {
				got = append(got, v.Name, v.Key, v.Value)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("readArgocdParameters(%s) (-want +got):\n%s", tc.env, diff)
			}
		})
	}
}

// TestArgocdParametersAnnounced checks that the parameters the plugin
// announces to Argo CD's UI are the ones argocd generate accepts, of the
// same kinds.
func TestArgocdParametersAnnounced(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(repoRoot, "scripts", "argocd", "plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Spec struct {
			Parameters struct {
				Static []struct {
					Name           string `yaml:"name"`
					CollectionType string `yaml:"collectionType"`
				} `yaml:"static"`
			} `yaml:"parameters"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatalf("parsing plugin.yaml: %v", err)
	}
	announced := map[string]string{}
	for _, s := range p.Spec.Parameters.Static {
		kind := s.CollectionType
		if kind == "" {
			kind = paramString // Argo CD's default
		}
		announced[s.Name] = kind
	}
	if diff := cmp.Diff(argocdParameters, announced); diff != "" {
		t.Errorf("plugin.yaml announces other parameters than argocd generate takes (-takes +announced):\n%s", diff)
	}
}

// TestCheckArgocdSeedEnv: an Application's plugin env that names the seed,
// or how the sidecar picks it, is refused, even empty; the sidecar's own
// variables of those names are not the Application's and pass.
func TestCheckArgocdSeedEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		env  map[string]string
		want string // "" for no error
	}{
		{desc: "none"},
		{desc: "the sidecar's own", env: map[string]string{"DIGESTPIN_SEED_FILE": "/home/argocd/digestpin-seed/seed", "DIGESTPIN_CMP_SEED_PER_PROJECT": "true"}},
		{desc: "other plugin env", env: map[string]string{"ARGOCD_ENV_DIGESTPIN_LOCK": "digests.lock", "ARGOCD_ENV_SEED": "x"}},
		{
			desc: "a seed file of another team",
			env:  map[string]string{"ARGOCD_ENV_DIGESTPIN_SEED_FILE": "/home/argocd/digestpin-seed/project.team-a"},
			want: "plugin env DIGESTPIN_SEED_FILE: an Application cannot choose the seed: the plugin renders every Helm chart with the sidecar's (the Secret digestpin-seed; SECURITY.md: The seed)",
		},
		{
			desc: "empty, and two of them",
			env:  map[string]string{"ARGOCD_ENV_DIGESTPIN_SEED": "", "ARGOCD_ENV_DIGESTPIN_CMP_SEED_PER_PROJECT": "false"},
			want: "plugin env DIGESTPIN_SEED, DIGESTPIN_CMP_SEED_PER_PROJECT: an Application cannot choose the seed",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := checkArgocdSeedEnv(func(name string) (string, bool) {
				v, ok := tc.env[name]
				return v, ok
			})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("checkArgocdSeedEnv = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Errorf("checkArgocdSeedEnv = %v, want an error starting %q", err, tc.want)
			case tc.want != "" && ExitCode(err) != 2:
				t.Errorf("checkArgocdSeedEnv's error exits %d, want 2 (usage)", ExitCode(err))
			}
		})
	}
}
