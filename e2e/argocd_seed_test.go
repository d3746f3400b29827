//go:build unix

package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// generatedSource copies testdata/generated (a webhook certificate signed
// by a generated CA, passwords, htpasswd, both hashed into the pod
// template's checksum/config) into a repository, as Argo CD unpacks one
// for the plugin, and returns the source folder and the variables that
// make it the Application's source path.
func generatedSource(t *testing.T) (src string, argo []string) {
	t.Helper()
	src = filepath.Join(t.TempDir(), "repo", "generated")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(repoRoot(t), "testdata", "generated"))); err != nil {
		t.Fatal(err)
	}
	return src, []string{"ARGOCD_APP_SOURCE_PATH=generated"}
}

// generatedParams returns the plugin parameters that point the chart at
// reg's app:1.0, with more --set values and more parameters.
func generatedParams(t *testing.T, reg *testregistry.Registry, set map[string]string, more ...map[string]any) string {
	t.Helper()
	m := map[string]string{"image": reg.Ref("app:1.0")}
	maps.Copy(m, set)
	return parameters(t, append([]map[string]any{{"name": "set", "map": m}}, more...)...)
}

// generated runs the plugin on the generated chart, with the parameters
// and Argo CD variables given, and returns its objects by kind/name.
func (s *sidecar) generated(t *testing.T, src string, argo ...string) (string, map[string]*yaml.RNode) {
	t.Helper()
	r := s.generateWith(t, src, argo)
	if r.err != nil {
		t.Fatalf("generate: %v\nstderr:\n%s", r.err, r.stderr)
	}
	return r.stdout, objects(t, r.stdout)
}

// TestArgoCDGeneratedSteady is the Argo CD user's scenario: a chart that
// generates its webhook's certificate and hashes it into the pod
// template. Rendered again (the repo cache expired, another repo server
// replica, a restarted sidecar), the plugin gives the same bytes, so no
// pod restarts; a values change reaches the certificate and the hash; the
// release name and namespace are part of what every value derives from.
func TestArgoCDGeneratedSteady(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	seed := seedText(t)
	sc := newSidecar(t)
	sc.mountSeeds(t, map[string]string{"seed": seed}, 0o440)
	src, argo := generatedSource(t)
	base := append(slices.Clone(argo), generatedParams(t, reg, nil))

	first, objs := sc.generated(t, src, base...)
	tlsCrt := field(t, objs, "Secret/shop-tls", "data", "tls.crt")
	password := field(t, objs, "Secret/shop-app", "data", "password")
	checksum := field(t, objs, "Deployment/shop-webhook", "spec", "template", "metadata", "annotations", "checksum/config")
	if names := certNames(t, tlsCrt); !slices.Contains(names, "shop-webhook.prod.svc") {
		t.Errorf("certificate names %v: want the release and destination namespace's shop-webhook.prod.svc", names)
	}

	t.Run("rendered again, the same bytes", func(t *testing.T) {
		if again, _ := sc.generated(t, src, base...); again != first {
			t.Errorf("a second generation differs:\n%s", cmp.Diff(first, again))
		}
		// Another replica, or the sidecar after a restart: nothing in
		// common but the mounted Secret.
		other := newSidecar(t)
		other.mountSeeds(t, map[string]string{"seed": seed}, 0o440)
		if again, _ := other.generated(t, src, base...); again != first {
			t.Errorf("a generation in another sidecar with the same seed differs:\n%s", cmp.Diff(first, again))
		}
	})

	t.Run("a values change reaches the certificate", func(t *testing.T) {
		_, objs := sc.generated(t, src, append(slices.Clone(argo), generatedParams(t, reg, map[string]string{"clusterDomain": "example.internal"}))...)
		crt := field(t, objs, "Secret/shop-tls", "data", "tls.crt")
		if crt == tlsCrt {
			t.Fatal("a new clusterDomain kept the old certificate")
		}
		if names := certNames(t, crt); !slices.Contains(names, "shop-webhook.prod.svc.example.internal") {
			t.Errorf("certificate names %v lack the new domain", names)
		}
		if got := field(t, objs, "Deployment/shop-webhook", "spec", "template", "metadata", "annotations", "checksum/config"); got == checksum {
			t.Error("the pod template's checksum/config kept the old certificate's hash: the pods would not roll")
		}
		if field(t, objs, "Secret/shop-app", "data", "password") != password {
			t.Error("a change of the certificate's names changed an unrelated password")
		}

		_, objs = sc.generated(t, src, append(slices.Clone(argo), generatedParams(t, reg, map[string]string{"certDays": "30"}))...)
		c := parseCert(t, field(t, objs, "Secret/shop-tls", "data", "tls.crt"))
		if d := c.NotAfter.Sub(c.NotBefore); d != 30*24*time.Hour {
			t.Errorf("certDays=30: the certificate is valid for %v", d)
		}
	})

	t.Run("release name and namespace", func(t *testing.T) {
		for desc, more := range map[string][]string{
			"another destination namespace": {"ARGOCD_APP_NAMESPACE=staging"},
			"the release-name parameter":    {generatedParams(t, reg, nil, map[string]any{"name": "release-name", "string": "canary"})},
			"the namespace parameter":       {generatedParams(t, reg, nil, map[string]any{"name": "namespace", "string": "staging"})},
		} {
			args := append(slices.Clone(base), more...)
			_, objs := sc.generated(t, src, args...)
			var got string
			for key, o := range objs {
				if o.GetKind() == "Secret" && strings.HasSuffix(key, "-app") {
					got = field(t, objs, key, "data", "password")
				}
			}
			if got == "" || got == password {
				t.Errorf("%s: password %q, want another than the release shop in prod's", desc, got)
			}
		}
		// Two Applications with the same release name and namespace share
		// every generated value (SECURITY.md: The seed).
		_, objs := sc.generated(t, src, append(slices.Clone(argo), "ARGOCD_APP_NAME=other-team_billing",
			generatedParams(t, reg, nil, map[string]any{"name": "release-name", "string": "shop"}))...)
		if field(t, objs, "Secret/shop-app", "data", "password") != password {
			t.Error("another Application, releasing shop into prod with the same seed, has another password; SECURITY.md says it is the same")
		}
	})
}

// TestArgoCDSeed: the seed is the sidecar's Secret, read as the kubelet
// mounts it. No seed, a seed readable by others, no DIGESTPIN_SEED_FILE:
// one line that names what to do, nothing rendered. An Application that
// names a seed fails. A kustomization or plain manifests need no seed.
func TestArgoCDSeed(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	pushFixed(t, reg, "shop/web:1.4", "1")
	pushFixed(t, reg, "shop/worker:2.0", "1")
	src, argo := generatedSource(t)
	argo = append(argo, generatedParams(t, reg, nil))
	other := newSeed(t) // a valid seed file of the sidecar's, another team's
	for _, tc := range []struct {
		desc   string
		seeds  map[string]string // the Secret's keys; nil for none
		mode   os.FileMode       // of the Secret's files (default 0440)
		argo   []string          // more of Argo CD's variables
		appEnv []string
		want   string // in the one line of generate's stderr (the last)
		more   bool   // Helm logs a line of its own before it
	}{
		{
			desc: "no Secret",
			want: "digestpin-cmp: no seed at SEEDS/seed: create the Secret digestpin-seed: kubectl -n argocd create secret generic digestpin-seed --from-file=seed=<(digestpin seed) (SECURITY.md: The seed); nothing rendered",
		},
		{
			desc:  "a Secret without the key seed",
			seeds: map[string]string{"project.team-a": seedText(t)},
			want:  "digestpin-cmp: no seed at SEEDS/seed: create the Secret digestpin-seed",
		},
		{
			desc:  "a seed readable by others (defaultMode 0444)",
			seeds: map[string]string{"seed": seedText(t)},
			mode:  0o444,
			want:  "digestpin: error: --seed-file: seed file SEEDS/seed may be read by others or written by its group (mode 0444): give its Kubernetes Secret volume defaultMode 0400",
		},
		{
			desc:  "not a seed",
			seeds: map[string]string{"seed": "hunter2\n"},
			want:  "digestpin: error: --seed-file: seed file SEEDS/seed: not a digestpin seed",
		},
		{
			desc: "no DIGESTPIN_SEED_FILE in the sidecar's env",
			argo: []string{"DIGESTPIN_SEED_FILE="},
			want: `digestpin-cmp: the sidecar's DIGESTPIN_SEED_FILE is "": want the absolute path of the key seed of the mounted Secret digestpin-seed (repo-server-patch.yaml)`,
		},
		{
			desc:   "the Application's DIGESTPIN_SEED_FILE",
			seeds:  map[string]string{"seed": seedText(t)},
			appEnv: []string{"DIGESTPIN_SEED_FILE=" + other},
			want:   "digestpin: error: plugin env DIGESTPIN_SEED_FILE: an Application cannot choose the seed: the plugin renders every Helm chart with the sidecar's (the Secret digestpin-seed; SECURITY.md: The seed)",
		},
		{
			desc:   "the Application's DIGESTPIN_CMP_SEED_PER_PROJECT",
			seeds:  map[string]string{"seed": seedText(t)},
			appEnv: []string{"DIGESTPIN_CMP_SEED_PER_PROJECT=false"},
			want:   "digestpin: error: plugin env DIGESTPIN_CMP_SEED_PER_PROJECT: an Application cannot choose the seed",
		},
		{
			desc:  "a seed-file parameter",
			seeds: map[string]string{"seed": seedText(t)},
			argo:  []string{generatedParams(t, reg, nil, map[string]any{"name": "seed-file", "string": other})},
			want:  `digestpin: error: plugin parameter "seed-file": an Application cannot choose the seed`,
		},
		{
			desc:  "a release name that is the seed flag",
			seeds: map[string]string{"seed": seedText(t)},
			argo:  []string{generatedParams(t, reg, nil, map[string]any{"name": "release-name", "string": "--seed-file=" + other})},
			want:  "invalid release name",
			more:  true,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			sc := newSidecar(t)
			mode := tc.mode
			if mode == 0 {
				mode = 0o440
			}
			sc.mountSeeds(t, tc.seeds, mode)
			r := sc.generateWith(t, src, append(slices.Clone(argo), tc.argo...), tc.appEnv...)
			if r.err == nil {
				t.Fatalf("generate succeeded, want a failure; stdout:\n%s", r.stdout)
			}
			if r.stdout != "" {
				t.Errorf("a failed generation printed:\n%s", r.stdout)
			}
			lines := generateLines(r.stderr)
			want := strings.ReplaceAll(tc.want, "SEEDS", sc.seeds)
			if (len(lines) != 1 && !tc.more) || !strings.Contains(lines[len(lines)-1], want) {
				t.Errorf("generate's stderr = %q, want one line containing %q", lines, want)
			}
			if b, err := os.ReadFile(other); err == nil && strings.Contains(r.stderr, strings.TrimSpace(string(b))) {
				t.Error("a message shows a seed")
			}
		})
	}

	// A kustomization and plain manifests are piped through digestpin:
	// they generate nothing, and need no seed.
	sc := newSidecarWith(t, map[string]string{"kustomize": kustomizeBin(t)})
	sc.mountSeeds(t, nil, 0)
	for _, source := range []string{"kustomize", "plain"} {
		src, argo := argoSource(t, source, reg)
		if r := sc.generateWith(t, src, argo); r.err != nil || !strings.Contains(r.stdout, "@sha256:") {
			t.Errorf("%s without a seed: %v\n%s", source, r.err, r.stderr)
		}
	}
}

// generateLines returns the lines of a generation's stderr without the
// line init.sh logs (digestpin's and helm's versions), which Argo CD does
// not show with generate's error.
func generateLines(stderr string) []string {
	var out []string
	for l := range strings.SplitSeq(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(l, "digestpin-cmp: digestpin ") || !strings.Contains(l, ", helm ") {
			out = append(out, l)
		}
	}
	return out
}

// TestArgoCDSeedPerProject: with DIGESTPIN_CMP_SEED_PER_PROJECT=true the
// sidecar renders each Argo CD project's Applications with the project's
// own key of the Secret, so that an Application of one project cannot
// compute another project's generated values by naming the same release
// and namespace; a project without a key fails naming the key to add.
func TestArgoCDSeedPerProject(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	teamA, teamB := seedText(t), seedText(t)
	src, argo := generatedSource(t)
	argo = append(argo, generatedParams(t, reg, nil))
	perProject := newSidecar(t)
	perProject.mountSeeds(t, map[string]string{"seed": seedText(t), "project.team-a": teamA, "project.team-b": teamB}, 0o440)
	render := func(sc *sidecar, more ...string) map[string]*yaml.RNode {
		t.Helper()
		_, objs := sc.generated(t, src, append(slices.Clone(argo), more...)...)
		return objs
	}
	password := func(objs map[string]*yaml.RNode) string { return field(t, objs, "Secret/shop-app", "data", "password") }
	on := "DIGESTPIN_CMP_SEED_PER_PROJECT=true"

	a := password(render(perProject, on, "ARGOCD_APP_PROJECT_NAME=team-a"))
	b := password(render(perProject, on, "ARGOCD_APP_PROJECT_NAME=team-b"))
	if a == b {
		t.Error("two projects, the same release and namespace: the same password")
	}
	// The project's key is the seed: a sidecar whose only seed it is
	// renders the same.
	shared := newSidecar(t)
	shared.mountSeeds(t, map[string]string{"seed": teamA}, 0o440)
	if got := password(render(shared)); got != a {
		t.Error("team-a's render is not the one of its key project.team-a")
	}
	if got := password(render(perProject)); got == a || got == b {
		t.Error("without DIGESTPIN_CMP_SEED_PER_PROJECT the key seed is not the one used")
	}

	for _, tc := range []struct {
		desc string
		argo []string
		want string
	}{
		{
			desc: "a project without a key",
			argo: []string{on, "ARGOCD_APP_PROJECT_NAME=team-c"},
			want: "digestpin-cmp: no seed for the project team-c at SEEDS/project.team-c: add the key project.team-c to the Secret digestpin-seed (SECURITY.md: The seed); nothing rendered",
		},
		{
			desc: "a project name that is a path",
			argo: []string{on, "ARGOCD_APP_PROJECT_NAME=../team-a"},
			want: `digestpin-cmp: ARGOCD_APP_PROJECT_NAME "../team-a": not an Argo CD project name, and DIGESTPIN_CMP_SEED_PER_PROJECT=true picks the seed by it`,
		},
		{
			desc: "no project",
			argo: []string{on, "ARGOCD_APP_PROJECT_NAME="},
			want: `digestpin-cmp: ARGOCD_APP_PROJECT_NAME "": not an Argo CD project name, and DIGESTPIN_CMP_SEED_PER_PROJECT=true picks the seed by it`,
		},
		{
			desc: "a bad setting",
			argo: []string{"DIGESTPIN_CMP_SEED_PER_PROJECT=yes"},
			want: "digestpin-cmp: the sidecar's DIGESTPIN_CMP_SEED_PER_PROJECT=yes: want true or false",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := perProject.generateWith(t, src, append(slices.Clone(argo), tc.argo...))
			lines := generateLines(r.stderr)
			want := strings.ReplaceAll(tc.want, "SEEDS", perProject.seeds)
			if r.err == nil || r.stdout != "" || len(lines) != 1 || lines[0] != want {
				t.Errorf("generate: err %v, stdout %d bytes, stderr %q; want a failure with the one line %q", r.err, len(r.stdout), lines, want)
			}
		})
	}
}
