package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// kustomizeBin returns the kustomize CLI of the sidecar image.
func kustomizeBin(t *testing.T) string { return tool(t, "DIGESTPIN_TEST_KUSTOMIZE") }

// argoSource copies testdata/argocd/NAME into a repository folder, as Argo
// CD unpacks a repository for the plugin, with REGISTRY replaced by reg's
// host in every file, and returns the source folder and the variables that
// make it the Application's source path.
func argoSource(t *testing.T, name string, reg *testregistry.Registry) (src string, argo []string) {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	fixture := filepath.Join(repoRoot(t), "testdata", "argocd", name)
	err := filepath.WalkDir(fixture, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(fixture, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(repo, name, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, []byte(strings.ReplaceAll(string(b), "REGISTRY", reg.Host())), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(repo, name), []string{"ARGOCD_APP_SOURCE_PATH=" + name}
}

// parameters returns ARGOCD_APP_PARAMETERS as Argo CD writes it for
// spec.source.plugin.parameters.
func parameters(t *testing.T, params ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	return "ARGOCD_APP_PARAMETERS=" + string(b)
}

// TestArgoCDHelmParameters runs the plugin as Argo CD runs it for an
// Application that moved from source.helm to source.plugin, one setting at
// a time. digestpin template renders the chart (Helm 4's engine, in
// process); the sidecar's Helm CLI only builds dependencies (init.sh).
func TestArgoCDHelmParameters(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	web := pushFixed(t, reg, "shop/web:1.4", "1")
	pinned := "image: " + reg.Ref("shop/web:1.4") + "@" + web.String()
	sc := newSidecar(t)
	for _, tc := range []struct {
		desc   string
		argo   []string // more of Argo CD's variables
		params []map[string]any
		appEnv []string
		want   []string
		absent []string
	}{
		{
			desc: "defaults: the Application's name, the destination namespace and cluster",
			want: []string{
				"name: shop-web\n  namespace: prod\n", "name: shop-config\n  namespace: prod\n",
				`kubeVersion: "v1.34.1"`, `hasExampleV1: "false"`,
				"replicas: 1\n", pinned, "kind: CustomResourceDefinition", "name: shop-test",
			},
		},
		{
			desc: "an Application outside Argo CD's namespace",
			argo: []string{"ARGOCD_APP_NAME=team-a_shop"},
			want: []string{"name: shop-web\n"},
		},
		{
			desc: "release name and namespace",
			params: []map[string]any{
				{"name": "release-name", "string": "canary"},
				{"name": "namespace", "string": "staging"},
			},
			want:   []string{"name: canary-web\n  namespace: staging\n"},
			absent: []string{"shop-web", "namespace: prod"},
		},
		{
			desc: "values files from the env and the parameter, in that order",
			params: []map[string]any{
				{"name": "values-files", "array": []string{"values-three.yaml"}},
			},
			appEnv: []string{"VALUES_FILES=values-two.yaml"},
			want:   []string{"replicas: 3\n", `{\"from\":\"values-three.yaml\"}`},
		},
		{
			desc: "inline values after the values files",
			params: []map[string]any{
				{"name": "values-files", "array": []string{"values-two.yaml"}},
				{"name": "values", "string": "replicas: 7\nconfig:\n  inline: true\n"},
			},
			want: []string{"replicas: 7\n", `{\"from\":\"values-two.yaml\",\"inline\":true}`},
		},
		{
			desc: "--set over inline values, --set-string, commas and lists as Argo CD passes them",
			params: []map[string]any{
				{"name": "values", "string": "replicas: 7\n"},
				{"name": "set", "map": map[string]string{
					"replicas": "4", "config.hosts": "a.example,b.example", "config.list": "{x,y}", "config.number": "10",
				}},
				{"name": "set-string", "map": map[string]string{"config.version": "10"}},
			},
			want: []string{
				"replicas: 4\n",
				`{\"hosts\":\"a.example,b.example\",\"list\":[\"x\",\"y\"],\"number\":10,\"version\":\"10\"}`,
			},
		},
		{
			desc:   "--set-file",
			params: []map[string]any{{"name": "set-file", "map": map[string]string{"file": "motd.txt"}}},
			want:   []string{`file: "welcome to the shop\n"`},
		},
		{
			desc: "skip-crds, skip-tests",
			params: []map[string]any{
				{"name": "skip-crds", "string": "true"},
				{"name": "skip-tests", "string": "true"},
			},
			want:   []string{"name: shop-web\n"},
			absent: []string{"CustomResourceDefinition", "shop-test"},
		},
		{
			desc: "kube-version and api-versions",
			params: []map[string]any{
				{"name": "kube-version", "string": "1.31.0"},
				{"name": "api-versions", "array": []string{"example.com/v1", "apps/v1"}},
			},
			want: []string{`kubeVersion: "v1.31.0"`, `hasExampleV1: "true"`},
		},
		{
			desc: "ignore-missing-value-files",
			params: []map[string]any{
				{"name": "values-files", "array": []string{"values-gone.yaml", "values-two.yaml"}},
				{"name": "ignore-missing-value-files", "string": "true"},
			},
			want: []string{"replicas: 2\n"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			src, argo := argoSource(t, "helm", reg)
			argo = append(argo, tc.argo...)
			if tc.params != nil {
				argo = append(argo, parameters(t, tc.params...))
			}
			r := sc.generateWith(t, src, argo, tc.appEnv...)
			if r.err != nil {
				t.Fatalf("generate: %v\nstderr:\n%s", r.err, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("output does not contain %q:\n%s", w, r.stdout)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(r.stdout, a) {
					t.Errorf("output contains %q:\n%s", a, r.stdout)
				}
			}
		})
	}
}

// TestArgoCDParameterFailures checks that a parameter the plugin cannot
// apply fails the generation with one line that names it, and prints no
// manifests.
func TestArgoCDParameterFailures(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushFixed(t, reg, "shop/web:1.4", "1")
	sc := newSidecarWith(t, map[string]string{"kustomize": kustomizeBin(t)})
	for _, tc := range []struct {
		desc   string
		source string
		params []map[string]any
		appEnv []string
		want   string
	}{
		{
			desc:   "an unknown parameter",
			source: "helm",
			params: []map[string]any{{"name": "valueFiles", "array": []string{"values-two.yaml"}}},
			want:   `digestpin: error: plugin parameter "valueFiles": unknown; the digestpin plugin takes api-versions,`,
		},
		{
			desc:   "a parameter of the wrong kind",
			source: "helm",
			params: []map[string]any{{"name": "set", "string": "replicas=2"}},
			want:   `digestpin: error: plugin parameter "set": want a map value, have string`,
		},
		{
			desc:   "a values file outside the repository",
			source: "helm",
			params: []map[string]any{{"name": "values-files", "array": []string{"../../outside.yaml"}}},
			want:   "digestpin-cmp: values file ../../outside.yaml: outside the repository",
		},
		{
			desc:   "a missing values file",
			source: "helm",
			params: []map[string]any{{"name": "values-files", "array": []string{"values-gone.yaml"}}},
			want:   "digestpin-cmp: values file values-gone.yaml: no such file in the source folder",
		},
		{
			desc:   "a --set-file outside the repository",
			source: "helm",
			params: []map[string]any{{"name": "set-file", "map": map[string]string{"file": "../../outside.yaml"}}},
			want:   "digestpin-cmp: set-file file ../../outside.yaml: outside the repository",
		},
		{
			desc:   "a bad boolean",
			source: "helm",
			params: []map[string]any{{"name": "skip-crds", "string": "yes"}},
			want:   "digestpin-cmp: skip-crds=yes: want true or false",
		},
		{
			desc:   "bad inline values",
			source: "helm",
			params: []map[string]any{{"name": "values", "string": "replicas: [\n"}},
			want:   "values-parameter.yaml", // the file that holds them, named after the parameter
		},
		{
			desc:   "a Helm parameter on a kustomization",
			source: "kustomize",
			params: []map[string]any{{"name": "release-name", "string": "canary"}},
			want:   "digestpin-cmp: parameter release-name: only for a Helm chart, and kustomize is a kustomization (no Chart.yaml)",
		},
		{
			desc:   "values files on plain manifests",
			source: "plain",
			appEnv: []string{"VALUES_FILES=values.yaml"},
			want:   "digestpin-cmp: VALUES_FILES: only for a Helm chart, and plain holds plain manifests (no Chart.yaml)",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			src, argo := argoSource(t, tc.source, reg)
			if err := os.WriteFile(filepath.Join(src, "..", "..", "outside.yaml"), []byte("replicas: 9\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.params != nil {
				argo = append(argo, parameters(t, tc.params...))
			}
			r := sc.generateWith(t, src, argo, tc.appEnv...)
			if r.err == nil {
				t.Fatalf("generate succeeded, want a failure; stdout:\n%s", r.stdout)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not contain %q:\n%s", tc.want, r.stderr)
			}
			if strings.Contains(r.stderr, "replicas: 9") {
				t.Errorf("stderr quotes the outside file:\n%s", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("a failed generation printed:\n%s", r.stdout)
			}
		})
	}
}

// TestArgoCDOtherSources runs the plugin on a kustomization and on a folder
// of plain manifests: each rendered as Argo CD would, every image pinned.
func TestArgoCDOtherSources(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	web := pushFixed(t, reg, "shop/web:1.4", "1")
	worker := pushFixed(t, reg, "shop/worker:2.0", "1")
	sc := newSidecarWith(t, map[string]string{"kustomize": kustomizeBin(t)})
	for _, tc := range []struct {
		source string
		want   []string // in this order
		absent []string
	}{
		{
			source: "kustomize",
			want:   []string{"kind: Deployment", "namespace: shop", "image: " + reg.Ref("shop/web:1.4") + "@" + web.String()},
		},
		{
			// In name order, as Argo CD reads a folder; .txt is not read.
			source: "plain",
			want: []string{
				"kind: Deployment", "image: " + reg.Ref("shop/web:1.4") + "@" + web.String(), "\n---\n",
				"kind: Service", "port: 80\n---\n",
				`"kind": "Job"`, reg.Ref("shop/worker:2.0") + "@" + worker.String(),
			},
			absent: []string{"Not a manifest"},
		},
	} {
		t.Run(tc.source, func(t *testing.T) {
			src, argo := argoSource(t, tc.source, reg)
			r := sc.generateWith(t, src, argo)
			if r.err != nil {
				t.Fatalf("generate: %v\nstderr:\n%s", r.err, r.stderr)
			}
			rest := r.stdout
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output does not contain %q after the earlier ones:\n%s", w, r.stdout)
				}
				rest = rest[i+len(w):]
			}
			for _, a := range tc.absent {
				if strings.Contains(r.stdout, a) {
					t.Errorf("output contains %q:\n%s", a, r.stdout)
				}
			}
			if !checksumLine.MatchString(r.stdout) {
				t.Errorf("output has no checksum annotation:\n%s", r.stdout)
			}
			// Argo CD re-renders every few minutes: the same bytes again.
			if again := sc.generateWith(t, src, argo); again.err != nil || again.stdout != r.stdout {
				t.Errorf("second generate differs (err %v):\n%s", again.err, again.stderr)
			}
		})
	}
}

// chartRepo serves a Helm chart repository on loopback: the chart in
// testdata/argocd-app/common, packaged and indexed by the real Helm CLI.
// With a user name, it asks for basic auth. It counts the requests.
type chartRepo struct {
	url      string
	requests atomic.Int64
}

func newChartRepo(t *testing.T, user, password string) *chartRepo {
	t.Helper()
	dir := t.TempDir()
	helm := helm4(t)
	if r := runCmd(t, dir, nil, nil, helm, "package", filepath.Join(repoRoot(t), "testdata", "argocd-app", "common"), "-d", dir); r.err != nil {
		t.Fatalf("helm package: %v\n%s", r.err, r.stderr)
	}
	cr := &chartRepo{}
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		cr.requests.Add(1)
		if u, p, ok := req.BasicAuth(); user != "" && (!ok || u != user || p != password) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		http.StripPrefix("/charts", files).ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	cr.url = srv.URL + "/charts"
	if r := runCmd(t, dir, nil, nil, helm, "repo", "index", dir, "--url", cr.url); r.err != nil {
		t.Fatalf("helm repo index: %v\n%s", r.err, r.stderr)
	}
	return cr
}

// TestArgoCDChartRepoDependency runs the plugin on a chart with a
// dependency from a chart repository: public (Helm fetches its index), and
// private, with the credentials of the repository config the operator
// mounts (HELM_REPOSITORY_CONFIG).
func TestArgoCDChartRepoDependency(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	worker := pushFixed(t, reg, "shop/worker:2.0", "1")
	pushFixed(t, reg, "shop/web:1.4", "1")
	values := parameters(t, map[string]any{"name": "values", "string": "global:\n  registry: " + reg.Host() + "\n"})
	for _, tc := range []struct {
		desc     string
		user     string
		config   bool // the operator mounts a repositories.yaml
		vendored bool // charts/ holds the dependency, unpacked
		wantFail string
	}{
		{desc: "a public repository, no repository config"},
		{desc: "vendored in charts/, as a folder", user: "argocd", vendored: true},
		{desc: "a private repository, its credentials in the repository config", user: "argocd", config: true},
		{desc: "a private repository, no repository config", user: "argocd", wantFail: "401"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cr := newChartRepo(t, tc.user, "s3cret")
			sc := newSidecar(t)
			src, argo := argoSource(t, "helm", reg)
			chart, err := os.OpenFile(filepath.Join(src, "Chart.yaml"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fmt.Fprintf(chart, "dependencies:\n  - name: common\n    version: 0.1.0\n    repository: %s\n", cr.url); err != nil {
				t.Fatal(err)
			}
			if err := chart.Close(); err != nil {
				t.Fatal(err)
			}
			argo = append(argo, values)
			if tc.vendored {
				if err := os.CopyFS(filepath.Join(src, "charts", "common"), os.DirFS(filepath.Join(repoRoot(t), "testdata", "argocd-app", "common"))); err != nil {
					t.Fatal(err)
				}
			}
			if tc.config {
				// As `helm repo add shop URL --username … --password …`
				// writes it, mounted from a Secret.
				config := filepath.Join(t.TempDir(), "repositories.yaml")
				b := fmt.Sprintf("apiVersion: \"\"\ngenerated: \"0001-01-01T00:00:00Z\"\nrepositories:\n  - name: shop\n    url: %s\n    username: %s\n    password: s3cret\n", cr.url, tc.user)
				if err := os.WriteFile(config, []byte(b), 0o600); err != nil {
					t.Fatal(err)
				}
				argo = append(argo, "HELM_REPOSITORY_CONFIG="+config)
			}
			r := sc.generateWith(t, src, argo)
			if tc.wantFail != "" {
				if r.err == nil {
					t.Fatalf("generate succeeded without the repository's credentials:\n%s", r.stdout)
				}
				if !strings.Contains(r.stderr, tc.wantFail) || r.stdout != "" {
					t.Errorf("stderr does not say %q, or stdout is not empty:\nstderr:\n%s\nstdout:\n%s", tc.wantFail, r.stderr, r.stdout)
				}
				return
			}
			if r.err != nil {
				t.Fatalf("generate: %v\nstderr:\n%s", r.err, r.stderr)
			}
			if want := "image: " + reg.Ref("shop/worker:2.0") + "@" + worker.String(); !strings.Contains(r.stdout, want) {
				t.Errorf("output does not hold the dependency's worker pinned (%s):\n%s", want, r.stdout)
			}
			if n := cr.requests.Load(); tc.vendored && n != 0 {
				t.Errorf("a vendored dependency made %d chart repository requests, want 0", n)
			} else if !tc.vendored && n == 0 {
				t.Error("the chart repository was not asked")
			}
			// The next generation of the same copy finds charts/ complete
			// and asks the repository nothing.
			cr.requests.Store(0)
			again := sc.generateWith(t, src, argo)
			if again.err != nil || again.stdout != r.stdout {
				t.Errorf("second generate differs (err %v):\n%s", again.err, again.stderr)
			}
			if n := cr.requests.Load(); n != 0 {
				t.Errorf("second generate made %d chart repository requests, want 0", n)
			}
		})
	}
}

// TestArgoCDStartupCheck runs the plugin in a sidecar whose digestpin or
// helm does not run (a broken image): init fails with one line that says
// which, before anything is rendered.
func TestArgoCDStartupCheck(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	broken := filepath.Join(t.TempDir(), "broken")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'exec format error' >&2\nexit 126\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool string
		want string
	}{
		{"digestpin", "digestpin-cmp: digestpin --version failed: exec format error\n"},
		{"helm", "digestpin-cmp: helm version failed: exec format error\n"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			sc := newSidecarWith(t, map[string]string{tc.tool: broken})
			src, argo := argoSource(t, "helm", reg)
			r := sc.generateWith(t, src, argo)
			if r.err == nil || r.stderr != tc.want || r.stdout != "" {
				t.Errorf("generate with a broken %s: err %v, stdout %q, stderr %q; want a failure with %q", tc.tool, r.err, r.stdout, r.stderr, tc.want)
			}
		})
	}
}

// TestArgoCDNothingToRender checks that a source folder with no chart, no
// kustomization and no manifest fails the generation: empty output would
// make Argo CD prune every resource of the Application.
func TestArgoCDNothingToRender(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	sc := newSidecar(t)
	src, argo := argoSource(t, "plain", reg)
	for _, f := range []string{"deployment.yaml", "service.yml", "worker.json"} {
		if err := os.Remove(filepath.Join(src, f)); err != nil {
			t.Fatal(err)
		}
	}
	r := sc.generateWith(t, src, argo)
	want := "digestpin-cmp: plain: no Chart.yaml, no kustomization and no *.yaml, *.yml or *.json file: nothing to render\n"
	if r.err == nil || !strings.HasSuffix(r.stderr, want) || r.stdout != "" {
		t.Errorf("generate on an empty folder: err %v, stdout %q, stderr %q; want a failure ending %q", r.err, r.stdout, r.stderr, want)
	}
}
