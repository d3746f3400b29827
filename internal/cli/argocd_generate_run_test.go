package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// deployment is a Deployment of image IMAGE.
const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - name: web
        image: IMAGE`

// renderFixture is newCmpFixture with what a render needs: digestpin and
// kustomize as the Makefile builds them, a seed, a registry with one image,
// and a sidecar's HOME.
func renderFixture(t *testing.T, files map[string]string) (*cmpFixture, string) {
	t.Helper()
	bin := testfiles.Tool(t, "DIGESTPIN_TEST_BIN", "DIGESTPIN_TEST_BIN does not name a digestpin binary; run the tests with `make test`, which builds it")
	kustomize := testfiles.Tool(t, "DIGESTPIN_TEST_KUSTOMIZE", "DIGESTPIN_TEST_KUSTOMIZE does not name kustomize; run the tests with `make test`, which builds it")
	reg := testregistry.New(t)
	d := reg.PushImage(t, "shop/web:1.4")
	image := reg.Ref("shop/web:1.4")
	for p, content := range files {
		files[p] = strings.ReplaceAll(content, "IMAGE", image)
	}
	f := newCmpFixture(t, files, nil)
	if err := os.Remove(filepath.Join(f.seeds, "seed")); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runIn(t, "", "seed", filepath.Join(f.seeds, "seed")); err != nil {
		t.Fatalf("digestpin seed: %v\n%s", err, stderr)
	}
	home := t.TempDir()
	for k, v := range map[string]string{"HOME": home, "DOCKER_CONFIG": home, "XDG_CACHE_HOME": home} {
		f.env[k] = v
	}
	f.digestpin, f.kustomize = bin, kustomize
	return f, image + "@" + d.String()
}

// TestArgocdGenerateRender renders each flavour with the real tools: the
// pinned manifests on stdout and nothing on stderr.
func TestArgocdGenerateRender(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		files  map[string]string
		params string
		want   []string // in stdout
	}{
		{
			desc: "a chart",
			files: map[string]string{
				"web/Chart.yaml":          "apiVersion: v2\nname: web\nversion: 1.0.0\n",
				"web/templates/web.yaml":  strings.Replace(deployment, "spec:\n  template", "spec:\n  replicas: {{ .Values.replicas }}\n  template", 1),
				"web/templates/name.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Release.Namespace }}\n",
				"web/values.yaml":         "replicas: 1\n",
			},
			params: `[{"name":"values","string":"replicas: 2\n"},{"name":"release-name","string":"store"}]`,
			want:   []string{"replicas: 2", "name: store-prod", "checksum/images: "},
		},
		{
			desc: "a kustomization",
			files: map[string]string{
				"web/kustomization.yaml": "resources: [web.yaml]\nnamePrefix: k-\n",
				"web/web.yaml":           deployment + "\n",
			},
			want: []string{"name: k-web", "checksum/images: "},
		},
		{
			// A file without a final newline does not run into the
			// next one.
			desc:  "plain manifests",
			files: map[string]string{"web/a.yaml": deployment, "web/b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"},
			want:  []string{"name: web", "name: b", "checksum/images: "},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f, pinned := renderFixture(t, tc.files)
			if tc.params != "" {
				f.env[argocdParametersEnv] = tc.params
			}
			g := f.generator(t)
			if err := g.run(context.Background()); err != nil {
				t.Fatalf("run = %v; stderr:\n%s", err, f.stderr.String())
			}
			out := f.stdout.String()
			for _, w := range append(tc.want, "image: "+pinned) {
				if !strings.Contains(out, w) {
					t.Errorf("stdout does not hold %q:\n%s", w, out)
				}
			}
			if f.stderr.Len() != 0 {
				t.Errorf("stderr = %q, want nothing", f.stderr.String())
			}
			if names, _ := os.ReadDir(g.tmpDir); len(names) != 0 {
				t.Errorf("after the generation %s holds %v, want nothing", g.tmpDir, names)
			}
		})
	}
}

// TestArgocdGenerateToolFailures: a command that fails has said why on
// stderr; the generation exits with its status and writes nothing on
// stdout, and a kustomize that fails stops the generation before
// digestpin runs.
func TestArgocdGenerateToolFailures(t *testing.T) {
	t.Parallel()
	chartFiles := func() map[string]string {
		return map[string]string{
			"web/Chart.yaml":         "apiVersion: v2\nname: web\nversion: 1.0.0\n",
			"web/templates/web.yaml": deployment + "\n",
		}
	}
	for _, tc := range []struct {
		desc      string
		files     map[string]string
		env       map[string]string
		params    string
		kustomize string // instead of the real one
		status    int
		want      string // in stderr
		notWant   string // not in stderr
	}{
		{
			desc:   "a bad option of the Application",
			files:  map[string]string{"web/a.yaml": deployment},
			env:    map[string]string{"ARGOCD_ENV_DIGESTPIN_MODE": "sideways"},
			status: 2,
			want:   `digestpin: error: invalid DIGESTPIN_MODE "sideways": want pin, digest or annotate`,
		},
		{
			desc:   "an image the registry does not have",
			files:  map[string]string{"web/a.yaml": strings.ReplaceAll(deployment, "IMAGE", "IMAGE-missing")},
			status: 1,
			want:   "digestpin: error: ",
		},
		{
			desc:   "a chart that does not render",
			files:  map[string]string{"web/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n", "web/templates/bad.yaml": "{{ fail \"no\" }}\n"},
			status: 1,
			want:   "no",
		},
		{
			// After --: a release name, never digestpin template's
			// --log-file.
			desc:   "a release name that looks like a flag",
			files:  chartFiles(),
			params: `[{"name":"release-name","string":"--log-file=LOG"}]`,
			status: 1,
			want:   "--log-file=",
		},
		{
			desc:    "kustomize fails",
			files:   map[string]string{"web/kustomization.yaml": "resources: [missing.yaml]\n"},
			status:  1,
			want:    "missing.yaml",
			notWant: "digestpin: error",
		},
		{
			desc:      "no kustomize",
			files:     map[string]string{"web/kustomization.yaml": "resources: []\n"},
			kustomize: "digestpin-test-no-such-kustomize",
			status:    1,
			want:      "digestpin-cmp: digestpin-test-no-such-kustomize is not on the sidecar's PATH (",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f, _ := renderFixture(t, tc.files)
			log := filepath.Join(t.TempDir(), "log")
			for k, v := range tc.env {
				f.env[k] = v
			}
			if tc.params != "" {
				f.env[argocdParametersEnv] = strings.ReplaceAll(tc.params, "LOG", log)
			}
			g := f.generator(t)
			if tc.kustomize != "" {
				g.kustomize = tc.kustomize
			}
			err := g.run(context.Background())
			if code := ExitCode(err); err == nil || code != tc.status {
				t.Errorf("run = %v (exit status %d), want exit status %d", err, code, tc.status)
			}
			stderr := f.stderr.String()
			if !strings.Contains(stderr, tc.want) || (tc.notWant != "" && strings.Contains(stderr, tc.notWant)) {
				t.Errorf("stderr:\n%s\nwant it to hold %q (and not %q)", stderr, tc.want, tc.notWant)
			}
			if f.stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", f.stdout.String())
			}
			if _, err := os.Stat(log); err == nil {
				t.Errorf("the generation wrote %s", log)
			}
		})
	}
}

// TestArgocdGenerateGate: before anything is rendered, the sidecar's
// DIGESTPIN_* variables, the Application's retired settings, its choice
// of the seed and its parameters are checked as every digestpin run
// checks them (argocdGate), with the same line and exit
// status. Through runArgocdGenerate, in the process's own environment and
// folder.
func TestArgocdGenerateGate(t *testing.T) {
	nul, err := json.Marshal([]map[string]any{{"name": "set", "map": map[string]string{"a": "x\x00y"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Were the gate to let one through, the render would fail to start
	// rather than run the test binary.
	self := cmpSelf
	cmpSelf = func() (string, error) { return filepath.Join(t.TempDir(), "no-digestpin"), nil }
	t.Cleanup(func() { cmpSelf = self })
	for _, tc := range []struct {
		desc   string
		env    map[string]string
		status int
		want   string // the stderr line, without its line break
	}{
		{
			desc:   "the Application's seed file",
			env:    map[string]string{"ARGOCD_ENV_DIGESTPIN_SEED_FILE": "/home/argocd/digestpin-seed/project.team-a"},
			status: 2,
			want:   "digestpin: error: plugin env DIGESTPIN_SEED_FILE: an Application cannot choose the seed: the plugin renders every Helm chart with the sidecar's (the Secret digestpin-seed; SECURITY.md: The seed)",
		},
		{
			desc:   "a seed parameter",
			env:    map[string]string{argocdParametersEnv: `[{"name":"seed-file","string":"/etc/passwd"}]`},
			status: 1,
			want:   `digestpin: error: plugin parameter "seed-file": an Application cannot choose the seed: the plugin renders every Helm chart with the sidecar's (the Secret digestpin-seed; SECURITY.md: The seed)`,
		},
		{
			desc:   "an unknown parameter",
			env:    map[string]string{argocdParametersEnv: `[{"name":"post-renderer","string":"/bin/sh"}]`},
			status: 1,
			want:   `digestpin: error: plugin parameter "post-renderer": unknown; the digestpin plugin takes api-versions, ignore-missing-value-files, kube-version, namespace, release-name, set, set-file, set-from-env, set-string, skip-crds, skip-schema-validation, skip-tests, values, values-files`,
		},
		{
			desc:   "a NUL in a parameter",
			env:    map[string]string{argocdParametersEnv: string(nul)},
			status: 1,
			want:   `digestpin: error: plugin parameter "set": holds a NUL character`,
		},
		{
			desc:   "a retired variable of the sidecar",
			env:    map[string]string{"DIGESTPIN_STATE_STORE": "redis://argocd-redis:6379/0"},
			status: 2,
			want:   "digestpin: error: DIGESTPIN_STATE_STORE was retired after 0.1.0",
		},
		{
			desc:   "a retired setting of the Application",
			env:    map[string]string{"ARGOCD_ENV_DIGESTPIN_STEADY": "true"},
			status: 2,
			want:   `digestpin: error: the Argo CD plugin env DIGESTPIN_STEADY="true" was retired after 0.1.0`,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newCmpFixture(t, chart, nil)
			for k, v := range f.env {
				t.Setenv(k, v)
			}
			t.Setenv("ARGOCD_APP_SOURCE_PATH", "web")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			t.Chdir(filepath.Join(f.repo, "web"))
			var stdout, stderr bytes.Buffer
			err := runArgocdGenerate(context.Background(), nil, &stdout, &stderr)
			if code := ExitCode(err); err == nil || code != tc.status {
				t.Errorf("runArgocdGenerate = %v (exit status %d), want exit status %d", err, code, tc.status)
			}
			if got := stderr.String(); !strings.HasPrefix(got, tc.want) || strings.Count(got, "\n") != 1 {
				t.Errorf("stderr = %q, want one line starting %q", got, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

// TestArgocdGenerateUsage: the command takes no arguments.
func TestArgocdGenerateUsage(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"argocd", "generate", "--help"}, nil, &stdout, &stderr); !errors.Is(err, pflag.ErrHelp) || !strings.HasPrefix(stderr.String(), "Usage: digestpin argocd generate\n") {
		t.Errorf("argocd generate --help = %v, stderr %q; want the usage", err, stderr.String())
	}
	for _, args := range [][]string{{"web"}, {"--values=/etc/passwd"}} {
		stderr.Reset()
		err := run(context.Background(), append([]string{"argocd", "generate"}, args...), nil, &stdout, &stderr)
		if ExitCode(err) != 2 || !strings.HasPrefix(stderr.String(), "digestpin: error: ") || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("argocd generate %q = %v, stderr %q; want one usage error line, exit status 2", args, err, stderr.String())
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}
