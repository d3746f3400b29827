package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cmpFixture is a repository as Argo CD unpacks it for the plugin, in a
// folder that also holds files beside it (outside.yaml, elsewhere/) that no
// Application may read, and the seed Secret's folder of the sidecar.
type cmpFixture struct {
	top   string // holds repo/, outside.yaml, elsewhere/, seeds/
	repo  string // the repository, links resolved
	seeds string // the seed Secret's folder
	env   map[string]string
	// src is the source folder Argo CD runs the plugin in, relative to
	// repo; ARGOCD_APP_SOURCE_PATH is set to it unless env sets it.
	src            string
	stdout, stderr bytes.Buffer
	// digestpin and kustomize are the tools the generation runs ("" for
	// ones no test case may run).
	digestpin, kustomize string
}

// newCmpFixture lays out files (path in the repository → content; a
// content of "DIR" makes a folder) and links (path → target), and the
// sidecar's environment of one generation of the Application shop in the
// source folder web.
func newCmpFixture(t *testing.T, files, links map[string]string) *cmpFixture {
	t.Helper()
	top, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &cmpFixture{top: top, repo: filepath.Join(top, "repo"), seeds: filepath.Join(top, "seeds"), src: "web"}
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if content == "DIR" {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(top, "outside.yaml"), "secret: outside\n")
	write(filepath.Join(top, "elsewhere", "outside.yaml"), "secret: outside\n")
	write(filepath.Join(f.seeds, "seed"), "not read by the checks\n")
	write(filepath.Join(f.repo, "web", ".keep"), "")
	for p, content := range files {
		write(filepath.Join(f.repo, p), content)
	}
	for p, target := range links {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(f.repo, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(f.expand(target), filepath.Join(f.repo, p)); err != nil {
			t.Fatal(err)
		}
	}
	f.env = map[string]string{
		"ARGOCD_APP_NAME":         "shop",
		"ARGOCD_APP_NAMESPACE":    "prod",
		"ARGOCD_APP_PROJECT_NAME": "default",
		"DIGESTPIN_SEED_FILE":     filepath.Join(f.seeds, "seed"),
	}
	return f
}

// caseFixture is newCmpFixture for a table case: the source folder src
// ("" for web), env over the defaults (REPO, SEEDS and TOP expanded), and
// params as ARGOCD_APP_PARAMETERS ("" for none).
func caseFixture(t *testing.T, files, links map[string]string, src string, env map[string]string, params string) *cmpFixture {
	t.Helper()
	f := newCmpFixture(t, files, links)
	if src != "" {
		f.src = src
	}
	for k, v := range env {
		f.env[k] = f.expand(v)
	}
	if params != "" {
		f.env[argocdParametersEnv] = params
	}
	return f
}

// generator returns the generation of f; env entries with the value
// "UNSET" are unset. Nothing runs a tool unless the caller sets one.
func (f *cmpFixture) generator(t *testing.T) *cmpGenerate {
	t.Helper()
	env := map[string]string{"ARGOCD_APP_SOURCE_PATH": f.src}
	for k, v := range f.env {
		env[k] = v
	}
	lookup := func(name string) (string, bool) {
		v, ok := env[name]
		if v == "UNSET" {
			return "", false
		}
		return v, ok
	}
	var environ []string
	for k, v := range env {
		if v != "UNSET" {
			environ = append(environ, k+"="+v)
		}
	}
	g := &cmpGenerate{
		cwd:     filepath.Join(f.repo, f.src),
		lookup:  lookup,
		environ: append(environ, "PATH="+os.Getenv("PATH")),
		// The gate is digestpin's own run (TestArgocdGenerateGate).
		gate:      func(context.Context) error { return nil },
		digestpin: "digestpin-not-run-by-this-test",
		kustomize: "kustomize-not-run-by-this-test",
		stdout:    &f.stdout,
		stderr:    &f.stderr,
		tmpDir:    t.TempDir(),
		readable:  readable,
		uid:       func() int { return 999 },
	}
	if f.digestpin != "" {
		g.digestpin, g.kustomize = f.digestpin, f.kustomize
	}
	return g
}

// expand replaces REPO, SEEDS and TOP in s with f's folders.
func (f *cmpFixture) expand(s string) string {
	return strings.NewReplacer("REPO", f.repo, "SEEDS", f.seeds, "TOP", f.top).Replace(s)
}

// chart is a source folder web/ with a Helm chart and values files.
var chart = map[string]string{
	"web/Chart.yaml":       "apiVersion: v2\nname: web\nversion: 1.0.0\n",
	"web/values.yaml":      "replicas: 1\n",
	"web/values-prod.yaml": "replicas: 3\n",
	"web/motd.txt":         "hello\n",
	"web/templates":        "DIR",
	"digests.lock":         "entries: []\n",
	"web/digests.lock":     "entries: []\n",
	"web/digestpin.yaml":   "podSpecPaths: []\n",
}

// with returns m with more entries.
func with(m map[string]string, more ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(more); i += 2 {
		out[more[i]] = more[i+1]
	}
	return out
}

// helmArgs is digestpin template's command line with the defaults of
// newCmpFixture around the arguments in between.
func helmArgs(between ...string) []string {
	return slices.Concat([]string{"template", "--seed-file=SEEDS/seed", "--namespace=prod"}, between)
}

// TestArgocdGeneratePlan checks what a generation runs: digestpin
// template's arguments for a chart (every path the absolute path of a
// file inside the repository, the release after --), digestpin's flags
// and variables for the Application's options, the plain manifests in
// order. Each case is one behaviour of the plugin (formerly generate.sh).
func TestArgocdGeneratePlan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc          string
		files, links  map[string]string
		src           string            // the source folder ("web" if empty; "." for the repository)
		env           map[string]string // over newCmpFixture's
		params        string            // ARGOCD_APP_PARAMETERS
		wantFlavour   cmpFlavour
		wantArgs      []string
		wantEnv       []string
		wantManifests []string
		wantStderr    string
	}{
		{
			desc:        "a chart with the defaults",
			files:       chart,
			wantFlavour: cmpHelm,
			wantArgs:    helmArgs("--include-crds", "--", "shop", "."),
		},
		{
			// Argo CD names Applications outside its own namespace
			// NAMESPACE_NAME; the release is NAME.
			desc:     "an Application of another namespace",
			files:    chart,
			env:      map[string]string{"ARGOCD_APP_NAME": "team-a_shop_eu", "ARGOCD_APP_NAMESPACE": "UNSET"},
			wantArgs: []string{"template", "--seed-file=SEEDS/seed", "--namespace=default", "--include-crds", "--", "shop_eu", "."},
		},
		{
			desc:     "the destination cluster's versions",
			files:    chart,
			env:      map[string]string{"KUBE_VERSION": "1.34.1", "KUBE_API_VERSIONS": "apps/v1,batch/v1/CronJob"},
			wantArgs: helmArgs("--kube-version=1.34.1", "--api-versions=apps/v1,batch/v1/CronJob", "--include-crds", "--", "shop", "."),
		},
		{
			desc:  "every parameter",
			files: with(chart, "web/sub/extra.yaml", "a: 1\n"),
			env: map[string]string{
				"KUBE_VERSION": "1.34.1", "KUBE_API_VERSIONS": "apps/v1",
				"ARGOCD_ENV_VALUES_FILES": " values.yaml ,, sub/extra.yaml,",
			},
			params: `[{"name":"release-name","string":"store"},{"name":"namespace","string":"staging"},` +
				`{"name":"values-files","array":["values-prod.yaml"]},` +
				`{"name":"set","map":{"image.tag":"1.4,1.5","list":"{a,b}","escaped":"a\\,b","lines":"a\nb"}},` +
				`{"name":"set-string","map":{"zip":"007"}},{"name":"set-file","map":{"motd":"motd.txt"}},` +
				`{"name":"skip-crds","string":"true"},{"name":"skip-tests","string":"true"},` +
				`{"name":"skip-schema-validation","string":"true"},{"name":"ignore-missing-value-files","string":"false"},` +
				`{"name":"kube-version","string":"1.30.0"},{"name":"api-versions","array":["probe.example.com/v1","v1"]}]`,
			wantArgs: []string{
				"template", "--seed-file=SEEDS/seed", "--namespace=staging",
				"--kube-version=1.30.0", "--api-versions=probe.example.com/v1,v1",
				"--values=REPO/web/values.yaml", "--values=REPO/web/sub/extra.yaml", "--values=REPO/web/values-prod.yaml",
				`--set=escaped=a\,b`, `--set=image.tag=1.4\,1.5`, "--set=lines=a\nb", "--set=list={a,b}",
				"--set-string=zip=007", "--set-file=motd=REPO/web/motd.txt",
				"--skip-tests", "--skip-schema-validation", "--", "store", ".",
			},
		},
		{
			// Every value in a --flag=VALUE word, the release after --:
			// none is read as a flag of digestpin template's.
			desc:   "option-looking values",
			files:  with(chart, "web/--post-renderer=x", "a: 1\n", "web/-f", "a: 1\n"),
			params: `[{"name":"release-name","string":"--seed-file=/etc/passwd"},{"name":"namespace","string":"-f"},{"name":"values-files","array":["--post-renderer=x","-f"]}]`,
			wantArgs: []string{
				"template", "--seed-file=SEEDS/seed", "--namespace=-f",
				"--values=REPO/web/--post-renderer=x", "--values=REPO/web/-f",
				"--include-crds", "--", "--seed-file=/etc/passwd", ".",
			},
		},
		{
			desc:       "missing values files ignored",
			files:      chart,
			env:        map[string]string{"ARGOCD_ENV_VALUES_FILES": "missing.yaml,values.yaml"},
			params:     `[{"name":"values-files","array":["gone/too.yaml"]},{"name":"ignore-missing-value-files","string":"true"}]`,
			wantArgs:   helmArgs("--values=REPO/web/values.yaml", "--include-crds", "--", "shop", "."),
			wantStderr: "digestpin-cmp: values file missing.yaml: no such file, ignored (ignore-missing-value-files)\ndigestpin-cmp: values file gone/too.yaml: no such file, ignored (ignore-missing-value-files)\n",
		},
		{
			// A path resolved, links and all, inside the repository.
			desc:     "values files through links inside the repository",
			files:    with(chart, "shared/common.yaml", "a: 1\n", "values.yaml", "a: 2\n"),
			links:    map[string]string{"web/common.yaml": "../shared/common.yaml", "web/shared": "../shared", "web/gone": "nothing-here"},
			env:      map[string]string{"ARGOCD_ENV_VALUES_FILES": "common.yaml,shared/../values.yaml,../web/values.yaml"},
			wantArgs: helmArgs("--values=REPO/shared/common.yaml", "--values=REPO/values.yaml", "--values=REPO/web/values.yaml", "--include-crds", "--", "shop", "."),
		},
		{
			desc: "the lock workflow and the options",
			// Relative to the source folder, as digestpin reads them.
			files: with(chart, "values.yaml", "a: 1\n"),
			env: map[string]string{
				"ARGOCD_ENV_DIGESTPIN_LOCK": "../digests.lock", "ARGOCD_ENV_DIGESTPIN_CONFIG": "digestpin.yaml",
				"ARGOCD_ENV_DIGESTPIN_MODE": "digest", "ARGOCD_ENV_DIGESTPIN_VERBOSE": "true",
				"ARGOCD_ENV_DIGESTPIN_CACHE_TTL": "5m", "ARGOCD_ENV_DIGESTPIN_REGISTRY_MIRROR": "docker.io=mirror.example",
				"ARGOCD_ENV_DIGESTPIN_PLATFORM": "linux/arm64", "ARGOCD_ENV_DIGESTPIN_ON_ERROR": "keep",
				// Not an option of an Application.
				"ARGOCD_ENV_DIGESTPIN_LOG_FILE": "/tmp/x", "ARGOCD_ENV_DIGESTPIN_CACHE": "redis://x",
			},
			wantArgs: helmArgs("--include-crds", "--lock=../digests.lock", "--frozen", "--", "shop", "."),
			wantEnv: []string{
				"DIGESTPIN_CONFIG=digestpin.yaml", "DIGESTPIN_CACHE_TTL=5m", "DIGESTPIN_MODE=digest",
				"DIGESTPIN_REGISTRY_MIRROR=docker.io=mirror.example", "DIGESTPIN_PLATFORM=linux/arm64",
				"DIGESTPIN_ON_ERROR=keep", "DIGESTPIN_VERBOSE=true",
			},
		},
		{
			// Argo CD Image Updater v1.3 with manifestTargets.plugin
			// {name: WEB_IMAGE_NAME, tag: WEB_IMAGE_TAG} writes the
			// image's repository and tag as entries of the Application's
			// spec.source.plugin.env (SetPluginImage in
			// argoproj-labs/argocd-image-updater pkg/argocd/argocd.go;
			// docs/configuration/images.md, "Specifying plugin
			// environment variable names"), which Argo CD passes with
			// its ARGOCD_ENV_ prefix. The tag wins over the
			// Application's own set of the key; an entry not written yet
			// leaves the chart's value.
			desc:  "tags handed over by Image Updater",
			files: chart,
			env: map[string]string{
				"ARGOCD_ENV_WEB_IMAGE_NAME": "registry.example/shop/web",
				"ARGOCD_ENV_WEB_IMAGE_TAG":  "1.4.2",
				"ARGOCD_ENV_WORKER_IMAGE":   "registry.example/shop/worker:2.0,rc",
				"ARGOCD_ENV_EMPTY":          "",
			},
			params: `[{"name":"set","map":{"image.tag":"staging"}},` +
				`{"name":"set-from-env","map":{"image.repository":"WEB_IMAGE_NAME","image.tag":"WEB_IMAGE_TAG",` +
				`"worker.image":"WORKER_IMAGE","sidecar.tag":"NOT_WRITTEN_YET","other.tag":"EMPTY"}}]`,
			wantArgs: helmArgs(
				"--set=image.tag=staging",
				"--set-string=image.repository=registry.example/shop/web", "--set-string=image.tag=1.4.2",
				`--set-string=worker.image=registry.example/shop/worker:2.0\,rc`,
				"--include-crds", "--", "shop", "."),
		},
		{
			// The digest strategy writes TAG@DIGEST (GetTagWithDigest):
			// the chart's image is then pinned already.
			desc:     "a tag with its digest handed over",
			files:    chart,
			env:      map[string]string{"ARGOCD_ENV_WEB_IMAGE_TAG": "latest@sha256:" + strings.Repeat("ab", 32)},
			params:   `[{"name":"set-from-env","map":{"image.tag":"WEB_IMAGE_TAG"}}]`,
			wantArgs: helmArgs("--set-string=image.tag=latest@sha256:"+strings.Repeat("ab", 32), "--include-crds", "--", "shop", "."),
		},
		{
			// Only ARGOCD_ENV_ names are read: the sidecar's own
			// variables (its Redis password) never reach a value.
			desc:     "the sidecar's variables are not read",
			files:    chart,
			env:      map[string]string{"REDIS_PASSWORD": "secret", "DIGESTPIN_SEED_FILE": "SEEDS/seed"},
			params:   `[{"name":"set-from-env","map":{"a":"REDIS_PASSWORD","b":"DIGESTPIN_SEED_FILE"}}]`,
			wantArgs: helmArgs("--include-crds", "--", "shop", "."),
		},
		{
			desc:     "a lock file, not frozen",
			files:    chart,
			env:      map[string]string{"ARGOCD_ENV_DIGESTPIN_LOCK": "digests.lock", "ARGOCD_ENV_DIGESTPIN_FROZEN": "false"},
			wantArgs: helmArgs("--include-crds", "--lock=digests.lock", "--", "shop", "."),
		},
		{
			desc:     "DIGESTPIN_FROZEN without a lock file",
			files:    chart,
			env:      map[string]string{"ARGOCD_ENV_DIGESTPIN_FROZEN": "maybe"},
			wantArgs: helmArgs("--include-crds", "--", "shop", "."),
		},
		{
			desc:     "per-project seeds",
			files:    with(chart, "../seeds/project.team-a", "x"),
			env:      map[string]string{"DIGESTPIN_CMP_SEED_PER_PROJECT": "true", "ARGOCD_APP_PROJECT_NAME": "team-a"},
			wantArgs: []string{"template", "--seed-file=SEEDS/project.team-a", "--namespace=prod", "--include-crds", "--", "shop", "."},
		},
		{
			desc:        "a kustomization",
			files:       map[string]string{"web/kustomization.yaml": "resources: []\n", "web/digests.lock": "x"},
			env:         map[string]string{"ARGOCD_ENV_DIGESTPIN_LOCK": "digests.lock"},
			wantFlavour: cmpKustomization,
			wantArgs:    []string{"--lock=digests.lock", "--frozen"},
		},
		{
			desc:        "a kustomization.yml",
			files:       map[string]string{"web/kustomization.yml": "resources: []\n"},
			wantFlavour: cmpKustomization,
		},
		{
			desc:        "a Kustomization",
			files:       map[string]string{"web/Kustomization": "resources: []\n"},
			wantFlavour: cmpKustomization,
		},
		{
			desc:        "a chart that is also a kustomization",
			files:       with(chart, "web/kustomization.yaml", "resources: []\n"),
			wantFlavour: cmpHelm,
			wantArgs:    helmArgs("--include-crds", "--", "shop", "."),
		},
		{
			desc:          "plain manifests",
			files:         map[string]string{"web/b.yaml": "b", "web/a.json": "{}", "web/c.yml": "c", "web/B.yaml": "B", "web/.hidden.yaml": "h", "web/notes.txt": "n", "web/sub/d.yaml": "d"},
			links:         map[string]string{"web/e.yaml": "sub/d.yaml"},
			wantFlavour:   cmpDirectory,
			wantManifests: []string{"web/B.yaml", "web/a.json", "web/b.yaml", "web/c.yml", "web/sub/d.yaml"},
		},
		{
			// A link to a chart's Chart.yaml is a chart; a folder
			// named kustomization.yaml is no kustomization.
			desc:        "a linked Chart.yaml",
			files:       map[string]string{"charts/web/Chart.yaml": "name: web\n", "web/kustomization.yaml": "DIR"},
			links:       map[string]string{"web/Chart.yaml": "../charts/web/Chart.yaml"},
			wantFlavour: cmpHelm,
			wantArgs:    helmArgs("--include-crds", "--", "shop", "."),
		},
		{
			desc:        "the repository's root",
			files:       map[string]string{"Chart.yaml": "name: x\n"},
			src:         ".",
			env:         map[string]string{"ARGOCD_APP_SOURCE_PATH": "UNSET"},
			wantFlavour: cmpHelm,
			wantArgs:    helmArgs("--include-crds", "--", "shop", "."),
		},
		{
			// As the Application wrote it; Argo CD runs the plugin in
			// the folder, cleaned.
			desc:        "a source path to clean",
			files:       map[string]string{"apps/web/Chart.yaml": "name: x\n", "apps/web/v.yaml": "a: 1\n"},
			src:         "apps/web",
			env:         map[string]string{"ARGOCD_APP_SOURCE_PATH": "./apps//web/", "ARGOCD_ENV_VALUES_FILES": "v.yaml"},
			wantFlavour: cmpHelm,
			wantArgs:    helmArgs("--values=REPO/apps/web/v.yaml", "--include-crds", "--", "shop", "."),
		},
		{
			desc:        "a source path that comes back",
			files:       map[string]string{"Chart.yaml": "name: x\n", "v.yaml": "a: 1\n"},
			src:         ".",
			env:         map[string]string{"ARGOCD_APP_SOURCE_PATH": "web/..", "ARGOCD_ENV_VALUES_FILES": "v.yaml"},
			wantFlavour: cmpHelm,
			wantArgs:    helmArgs("--values=REPO/v.yaml", "--include-crds", "--", "shop", "."),
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			f := caseFixture(t, tc.files, tc.links, tc.src, tc.env, tc.params)
			g := f.generator(t)
			repo, r, err := g.plan(context.Background())
			if err != nil {
				t.Fatalf("plan = %v; stderr:\n%s", err, f.stderr.String())
			}
			defer repo.Close()
			defer r.cleanup()
			if tc.wantFlavour != "" && r.flavour != tc.wantFlavour {
				t.Errorf("flavour = %s, want %s", r.flavour, tc.wantFlavour)
			}
			var want []string
			for _, a := range tc.wantArgs {
				want = append(want, f.expand(a))
			}
			if diff := cmp.Diff(want, r.args); diff != "" {
				t.Errorf("digestpin's arguments (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEnv, r.env); diff != "" {
				t.Errorf("digestpin's variables (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantManifests, r.manifests); diff != "" {
				t.Errorf("manifests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStderr, f.stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// TestArgocdGenerateInlineValues: the values parameter goes to a private
// file (mode 0600 in a folder of its own), after the values files, never
// to the command line; the folder is removed after the generation.
func TestArgocdGenerateInlineValues(t *testing.T) {
	t.Parallel()
	f := newCmpFixture(t, chart, nil)
	secret := "password: hunter2\n--set: x\n"
	params, err := json.Marshal([]map[string]any{{"name": "values", "string": secret}, {"name": "values-files", "array": []string{"values.yaml"}}})
	if err != nil {
		t.Fatal(err)
	}
	f.env[argocdParametersEnv] = string(params)
	g := f.generator(t)
	repo, r, err := g.plan(context.Background())
	if err != nil {
		t.Fatalf("plan = %v; stderr:\n%s", err, f.stderr.String())
	}
	defer repo.Close()
	if strings.Contains(strings.Join(r.args, " "), "hunter2") {
		t.Errorf("the values parameter is on the command line: %q", r.args)
	}
	i := slices.IndexFunc(r.args, func(a string) bool { return strings.HasPrefix(a, "--values="+g.tmpDir) })
	if i < 0 || r.args[i-1] != "--values="+f.repo+"/web/values.yaml" {
		t.Fatalf("arguments %q: want the values parameter's file in %s after the values files", r.args, g.tmpDir)
	}
	p := strings.TrimPrefix(r.args[i], "--values=")
	b, err := os.ReadFile(p)
	if err != nil || string(b) != secret {
		t.Errorf("the values parameter's file holds %q, %v; want %q", b, err, secret)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{p, 0o600}, {filepath.Dir(p), 0o700 | os.ModeDir}} {
		if fi, err := os.Stat(c.path); err != nil || fi.Mode() != c.mode {
			t.Errorf("%s: mode %v, %v; want %v", c.path, fi.Mode(), err, c.mode)
		}
	}
	r.cleanup()
	if names, _ := os.ReadDir(g.tmpDir); len(names) != 0 {
		t.Errorf("after the generation %s holds %v, want nothing", g.tmpDir, names)
	}
}

// TestArgocdGenerateRefusals checks each refusal of the plugin's own: the
// one line it prints (digestpin-cmp: …), exit status 1, nothing on
// stdout, no file outside the repository quoted. The cases are the
// boundary between an Application's repository and the sidecar: paths
// that leave the repository (.., absolute paths, links out, link loops),
// hostile parameters and options, and a sidecar without its seed.
func TestArgocdGenerateRefusals(t *testing.T) {
	t.Parallel()
	plain := map[string]string{"web/a.yaml": "kind: A\n"}
	kustomization := map[string]string{"web/kustomization.yaml": "resources: []\n"}
	for _, tc := range []struct {
		desc         string
		files, links map[string]string
		src          string
		env          map[string]string
		params       string
		want         string // the line, after REPO, SEEDS and TOP are expanded
	}{
		{desc: "not run by Argo CD", files: chart, env: map[string]string{"ARGOCD_APP_NAME": "UNSET"}, want: "ARGOCD_APP_NAME is not set: run by Argo CD"},
		{desc: "an empty Application name", files: chart, env: map[string]string{"ARGOCD_APP_NAME": ""}, want: "ARGOCD_APP_NAME is not set: run by Argo CD"},

		// Where the repository is.
		{desc: "a source path above the repository", files: chart, env: map[string]string{"ARGOCD_APP_SOURCE_PATH": "web/../.."}, want: `ARGOCD_APP_SOURCE_PATH "web/../..": leaves the repository`},
		{
			desc: "a source path through a link", files: chart, links: map[string]string{"app": "web"}, src: "app",
			want: `ARGOCD_APP_SOURCE_PATH "app": goes through a symbolic link (the folder is REPO/web); name the folder itself`,
		},
		{
			// Argo CD ran the plugin in repo/web, the path says "."
			// (the repository would be web/, and ../ its own).
			desc: "a source path that does not name the folder", files: chart, env: map[string]string{"ARGOCD_APP_SOURCE_PATH": "other"},
			want: `ARGOCD_APP_SOURCE_PATH "other": goes through a symbolic link (the folder is REPO/web); name the folder itself`,
		},

		// Links of the repository, checked before anything is read.
		{desc: "a link to a file outside", files: plain, links: map[string]string{"web/digests.lock": "../../outside.yaml"}, want: "web/digests.lock: a symbolic link to outside the repository (../../outside.yaml); Argo CD refuses those too"},
		{desc: "a link to a folder outside", files: plain, links: map[string]string{"web/elsewhere": "../../elsewhere"}, want: "web/elsewhere: a symbolic link to outside the repository (../../elsewhere); Argo CD refuses those too"},
		{desc: "an absolute link", files: plain, links: map[string]string{"docker.json": "/home/argocd/.docker/config.json"}, want: "docker.json: a symbolic link to outside the repository (/home/argocd/.docker/config.json); Argo CD refuses those too"},
		{desc: "an absolute link into the repository", files: plain, links: map[string]string{"web/b.yaml": "TOP/repo/web/a.yaml"}, want: "web/b.yaml: a symbolic link to outside the repository (TOP/repo/web/a.yaml); Argo CD refuses those too"},
		{desc: "a link out through another link", files: plain, links: map[string]string{"web/a-link": "b-link", "web/b-link": "../x/../../outside.yaml"}, want: "web/a-link: a symbolic link to outside the repository (b-link); Argo CD refuses those too"},
		{desc: "a link out and back in", files: plain, links: map[string]string{"web/back": "../../repo/web/a.yaml"}, want: "web/back: a symbolic link to outside the repository (../../repo/web/a.yaml); Argo CD refuses those too"},
		{desc: "a dangling link out", files: plain, links: map[string]string{"web/gone": "../../no-such-file"}, want: "web/gone: a symbolic link to outside the repository (../../no-such-file); Argo CD refuses those too"},
		{desc: "a link loop", files: plain, links: map[string]string{"web/ping": "pong", "web/pong": "ping"}, want: "web/ping: a symbolic link that cannot be followed"},
		{desc: "a link to itself", files: plain, links: map[string]string{"web/self": "self"}, want: "web/self: a symbolic link that cannot be followed"},
		{desc: "a deep link folder", files: plain, links: map[string]string{"web/deep/d": "../../../.."}, want: "web/deep/d: a symbolic link to outside the repository (../../../..); Argo CD refuses those too"},

		// Parameters where they do not apply, and bad ones.
		{desc: "a parameter on a kustomization", files: kustomization, params: `[{"name":"set","map":{"a":"1"}}]`, want: "parameter set: only for a Helm chart, and web is a kustomization (no Chart.yaml)"},
		{desc: "a parameter on plain manifests", files: plain, params: `[{"name":"release-name","string":"x"}]`, want: "parameter release-name: only for a Helm chart, and web is a directory (no Chart.yaml)"},
		{
			desc: "a parameter on plain manifests at the root", files: map[string]string{"a.yaml": "kind: A\n"}, src: ".", env: map[string]string{"ARGOCD_APP_SOURCE_PATH": "UNSET"},
			params: `[{"name":"skip-crds","string":"true"}]`, want: "parameter skip-crds: only for a Helm chart, and the source folder is a directory (no Chart.yaml)",
		},
		{desc: "an empty array on plain manifests", files: map[string]string{"web/a.yaml": "kind: A\n", "web/Chart.yaml": "DIR"}, params: `[{"name":"values-files","array":[]}]`, env: map[string]string{"ARGOCD_ENV_VALUES_FILES": "v.yaml"}, want: "VALUES_FILES: only for a Helm chart, and web holds plain manifests (no Chart.yaml)"},
		{desc: "VALUES_FILES on a kustomization", files: kustomization, env: map[string]string{"ARGOCD_ENV_VALUES_FILES": "values.yaml"}, want: "VALUES_FILES: only for a Helm chart, and web is a kustomization (no Chart.yaml)"},
		{desc: "not a boolean", files: chart, params: `[{"name":"skip-crds","string":"yes"}]`, want: "skip-crds=yes: want true or false"},
		{desc: "an empty boolean", files: chart, params: `[{"name":"ignore-missing-value-files","string":""}]`, want: "ignore-missing-value-files=: want true or false"},
		{desc: "a comma in a set key", files: chart, params: `[{"name":"set","map":{"a,b":"1"}}]`, want: `set key "a,b": a comma or = in the key (Helm would read another assignment)`},
		{desc: "an = in a set-string key", files: chart, params: `[{"name":"set-string","map":{"a=b":"1"}}]`, want: `set-string key "a=b": a comma or = in the key (Helm would read another assignment)`},
		{desc: "a comma in a set-from-env key", files: chart, params: `[{"name":"set-from-env","map":{"a,b":"TAG"}}]`, want: `set-from-env key "a,b": a comma or = in the key (Helm would read another assignment)`},
		{desc: "a set-from-env entry that is no name", files: chart, params: `[{"name":"set-from-env","map":{"image.tag":"ARGOCD_ENV_TAG=x"}}]`, want: `set-from-env image.tag: "ARGOCD_ENV_TAG=x" is not the name of a plugin env entry (letters, digits and _, not first a digit)`},
		{desc: "an empty set-from-env entry", files: chart, params: `[{"name":"set-from-env","map":{"image.tag":""}}]`, want: `set-from-env image.tag: "" is not the name of a plugin env entry (letters, digits and _, not first a digit)`},
		{desc: "set-from-env on a kustomization", files: kustomization, params: `[{"name":"set-from-env","map":{"image.tag":"TAG"}}]`, want: "parameter set-from-env: only for a Helm chart, and web is a kustomization (no Chart.yaml)"},
		{desc: "another file in a set-file key", files: chart, params: `[{"name":"set-file","map":{"a=/etc/passwd,b":"motd.txt"}}]`, want: `set-file key "a=/etc/passwd,b": a comma or = in the key (Helm would read another assignment)`},

		// The seed is the sidecar's.
		{desc: "no seed file set", files: chart, env: map[string]string{"DIGESTPIN_SEED_FILE": "UNSET"}, want: `the sidecar's DIGESTPIN_SEED_FILE is "": want the absolute path of the key seed of the mounted Secret digestpin-seed (repo-server-patch.yaml)`},
		{desc: "a relative seed file", files: chart, env: map[string]string{"DIGESTPIN_SEED_FILE": "seed"}, want: `the sidecar's DIGESTPIN_SEED_FILE is "seed": want the absolute path of the key seed of the mounted Secret digestpin-seed (repo-server-patch.yaml)`},
		{desc: "no seed", files: chart, env: map[string]string{"DIGESTPIN_SEED_FILE": "SEEDS/missing"}, want: "no seed at SEEDS/missing: create the Secret digestpin-seed: kubectl -n argocd create secret generic digestpin-seed --from-file=missing=<(digestpin seed) (SECURITY.md: The seed); nothing rendered"},
		{desc: "no seed for the project", files: chart, env: map[string]string{"DIGESTPIN_CMP_SEED_PER_PROJECT": "true", "ARGOCD_APP_PROJECT_NAME": "team-b"}, want: "no seed for the project team-b at SEEDS/project.team-b: add the key project.team-b to the Secret digestpin-seed (SECURITY.md: The seed); nothing rendered"},
		{desc: "a project name that is a path", files: chart, env: map[string]string{"DIGESTPIN_CMP_SEED_PER_PROJECT": "true", "ARGOCD_APP_PROJECT_NAME": "../seed"}, want: `ARGOCD_APP_PROJECT_NAME "../seed": not an Argo CD project name, and DIGESTPIN_CMP_SEED_PER_PROJECT=true picks the seed by it`},
		{desc: "a project name with a line break", files: chart, env: map[string]string{"DIGESTPIN_CMP_SEED_PER_PROJECT": "true", "ARGOCD_APP_PROJECT_NAME": "team-a\n"}, want: "ARGOCD_APP_PROJECT_NAME \"team-a\n\": not an Argo CD project name, and DIGESTPIN_CMP_SEED_PER_PROJECT=true picks the seed by it"},
		{desc: "per project, not a boolean", files: chart, env: map[string]string{"DIGESTPIN_CMP_SEED_PER_PROJECT": "yes"}, want: "the sidecar's DIGESTPIN_CMP_SEED_PER_PROJECT=yes: want true or false"},

		// Paths an Application names.
		{desc: "an absolute values file", files: chart, env: map[string]string{"ARGOCD_ENV_VALUES_FILES": "/etc/passwd"}, want: "values file /etc/passwd: want a path relative to the source folder"},
		{desc: "an absolute values file, missing ones ignored", files: chart, env: map[string]string{"ARGOCD_ENV_VALUES_FILES": "/no/such/file"}, params: `[{"name":"ignore-missing-value-files","string":"true"}]`, want: "values file /no/such/file: want a path relative to the source folder"},
		{desc: "a values file that looks like a flag", files: chart, env: map[string]string{"ARGOCD_ENV_VALUES_FILES": "-f /etc/passwd"}, want: "values file -f /etc/passwd: no such file in the source folder"},
		{desc: "a values file outside", files: chart, env: map[string]string{"ARGOCD_ENV_VALUES_FILES": "values.yaml,../../outside.yaml"}, want: "values file ../../outside.yaml: outside the repository"},
		{desc: "a missing values file outside", files: chart, env: map[string]string{"ARGOCD_ENV_VALUES_FILES": "../../../etc/no-such-file"}, params: `[{"name":"ignore-missing-value-files","string":"true"}]`, want: "values file ../../../etc/no-such-file: outside the repository"},
		{desc: "a values file out and back in", files: chart, params: `[{"name":"values-files","array":["../../repo/web/values.yaml"]}]`, want: "values file ../../repo/web/values.yaml: outside the repository"},
		{desc: "the repository as a values file", files: chart, env: map[string]string{"ARGOCD_ENV_VALUES_FILES": ".."}, want: "values file ..: outside the repository"},
		{desc: "a folder as a values file", files: chart, env: map[string]string{"ARGOCD_ENV_VALUES_FILES": "templates"}, want: "values file templates: not a regular file"},
		{desc: "a file as a folder", files: chart, env: map[string]string{"ARGOCD_ENV_VALUES_FILES": "values.yaml/"}, want: "values file values.yaml/: no such file in the source folder"},
		{desc: "a missing values file", files: chart, params: `[{"name":"values-files","array":["values-e2e.yaml"]}]`, want: "values file values-e2e.yaml: no such file in the source folder"},
		{desc: "a dangling link as a values file", files: chart, links: map[string]string{"web/gone.yaml": "missing.yaml"}, params: `[{"name":"values-files","array":["gone.yaml"]},{"name":"ignore-missing-value-files","string":"true"}]`, want: "values file gone.yaml: no such file in the source folder"},
		{desc: "a comma in a values file's path", files: with(chart, "web/a,b.yaml", "a: 1\n"), params: `[{"name":"values-files","array":["a,b.yaml"]}]`, want: "values file a,b.yaml: a comma, quote or line break in the path (Helm would read it as several files)"},
		{desc: "a comma in a linked values file's path", files: with(chart, "web/a,b.yaml", "a: 1\n"), links: map[string]string{"web/ab.yaml": "a,b.yaml"}, params: `[{"name":"values-files","array":["ab.yaml"]}]`, want: "values file ab.yaml: a comma, quote or line break in the path (Helm would read it as several files)"},
		{desc: "a quote in a values file's path", files: with(chart, `web/a"b.yaml`, "a: 1\n"), params: `[{"name":"values-files","array":["a\"b.yaml"]}]`, want: `values file a"b.yaml: a comma, quote or line break in the path (Helm would read it as several files)`},
		{desc: "a line break in a values file's path", files: with(chart, "web/a\nb.yaml", "a: 1\n"), params: `[{"name":"values-files","array":["a\nb.yaml"]}]`, want: "values file a\nb.yaml: a comma, quote or line break in the path (Helm would read it as several files)"},
		{desc: "a line break in VALUES_FILES", files: chart, env: map[string]string{"ARGOCD_ENV_VALUES_FILES": "values.yaml\n../../outside.yaml"}, want: "values file values.yaml\n../../outside.yaml: no such file in the source folder"},
		{desc: "a set-file outside", files: chart, params: `[{"name":"set-file","map":{"motd":"../../outside.yaml"}}]`, want: "set-file motd ../../outside.yaml: outside the repository"},
		{desc: "an absolute set-file", files: chart, params: `[{"name":"set-file","map":{"motd":"/etc/passwd"}}]`, want: "set-file motd /etc/passwd: want a path relative to the source folder"},
		{desc: "an empty set-file", files: chart, params: `[{"name":"set-file","map":{"motd":""}}]`, want: "set-file motd : no such file in the source folder"},
		{desc: "a comma in a set-file's path", files: with(chart, "web/a,b.txt", "x"), params: `[{"name":"set-file","map":{"motd":"a,b.txt"}}]`, want: "set-file motd a,b.txt: a comma, quote or line break in the path (Helm would read it as several files)"},
		{desc: "an absolute lock file", files: chart, env: map[string]string{"ARGOCD_ENV_DIGESTPIN_LOCK": "/etc/hostname"}, want: "lock file /etc/hostname: want a path relative to the source folder"},
		{desc: "a lock file outside", files: plain, env: map[string]string{"ARGOCD_ENV_DIGESTPIN_LOCK": "../../outside.yaml"}, want: "lock file ../../outside.yaml: outside the repository"},
		{desc: "not frozen, not thawed", files: chart, env: map[string]string{"ARGOCD_ENV_DIGESTPIN_LOCK": "digests.lock", "ARGOCD_ENV_DIGESTPIN_FROZEN": "maybe"}, want: "DIGESTPIN_FROZEN=maybe: want true or false"},
		{desc: "a configuration file outside", files: kustomization, env: map[string]string{"ARGOCD_ENV_DIGESTPIN_CONFIG": "../../elsewhere/outside.yaml"}, want: "configuration file ../../elsewhere/outside.yaml: outside the repository"},
		{desc: "a missing configuration file", files: kustomization, env: map[string]string{"ARGOCD_ENV_DIGESTPIN_CONFIG": "digestpin.yaml"}, want: "configuration file digestpin.yaml: no such file in the source folder"},

		// Plain manifests.
		{desc: "nothing to render", files: map[string]string{"web/README.md": "x", "web/.a.yaml": "x"}, want: "web: no Chart.yaml, no kustomization and no *.yaml, *.yml or *.json file: nothing to render"},
		{desc: "a folder of manifests", files: map[string]string{"web/a.yaml": "x", "web/b.yaml": "DIR"}, want: "manifest b.yaml: not a regular file"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			f := caseFixture(t, tc.files, tc.links, tc.src, tc.env, tc.params)
			err := f.generator(t).run(context.Background())
			if err == nil {
				t.Fatalf("run succeeded, want %q", tc.want)
			}
			if code := ExitCode(err); code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			if diff := cmp.Diff(cmpPrefix+f.expand(tc.want)+"\n", f.stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			if f.stdout.Len() != 0 || strings.Contains(f.stderr.String(), "secret: outside") {
				t.Errorf("stdout %q, stderr %q: want nothing on stdout, and nothing of the files outside", f.stdout.String(), f.stderr.String())
			}
		})
	}
}

// TestArgocdGenerateLimits: a file an Application names is read whole by
// Helm in the sidecar every Application shares, so it is bounded; a
// folder of the repository that cannot be read fails the check of its
// links rather than go unchecked; an unreadable seed says what to do.
func TestArgocdGenerateLimits(t *testing.T) {
	t.Parallel()
	t.Run("a huge values file", func(t *testing.T) {
		f := newCmpFixture(t, chart, nil)
		big := filepath.Join(f.repo, "web", "big.yaml")
		if err := os.WriteFile(big, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		// Sparse: no 64 MiB written.
		if err := os.Truncate(big, cmpMaxFileSize+1); err != nil {
			t.Fatal(err)
		}
		f.env["ARGOCD_ENV_VALUES_FILES"] = "big.yaml"
		if err := f.generator(t).run(context.Background()); err == nil {
			t.Fatal("run succeeded")
		}
		if want := "digestpin-cmp: values file big.yaml: 67108865 bytes, more than 67108864 (64 MiB)\n"; f.stderr.String() != want {
			t.Errorf("stderr = %q, want %q", f.stderr.String(), want)
		}
	})
	asRoot := func(t *testing.T) {
		t.Helper()
		if os.Getuid() == 0 {
			t.Skip("root reads every file: the permission case cannot fail")
		}
	}
	t.Run("an unreadable folder", func(t *testing.T) {
		asRoot(t)
		f := newCmpFixture(t, with(chart, "web/locked/x.yaml", "x"), nil)
		locked := filepath.Join(f.repo, "web", "locked")
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(locked, 0o755) })
		if err := f.generator(t).run(context.Background()); err == nil {
			t.Fatal("run succeeded")
		}
		if want := "digestpin-cmp: web/locked: cannot be read: "; !strings.HasPrefix(f.stderr.String(), want) {
			t.Errorf("stderr = %q, want it to start %q", f.stderr.String(), want)
		}
	})
	t.Run("an unreadable seed", func(t *testing.T) {
		asRoot(t)
		f := newCmpFixture(t, chart, nil)
		if err := os.Chmod(filepath.Join(f.seeds, "seed"), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.generator(t).run(context.Background()); err == nil {
			t.Fatal("run succeeded")
		}
		if want := f.expand("digestpin-cmp: seed file SEEDS/seed: the sidecar's user 999 cannot read it: give the repo server's pod securityContext.fsGroup: 999 (repo-server-patch.yaml)\n"); f.stderr.String() != want {
			t.Errorf("stderr = %q, want %q", f.stderr.String(), want)
		}
	})
}

// TestSetValue: commas in a --set value are escaped as Argo CD's Helm
// escapes them; a Helm list stays a list.
func TestSetValue(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":       "",
		"a":      "a",
		"a,b":    `a\,b`,
		`a\,b`:   `a\,b`,
		",,":     `\,\,`,
		"{a,b}":  "{a,b}",
		"{a,b":   `{a\,b`,
		"{":      "{",
		"x{a,b}": `x{a\,b}`,
		"ü,ß":    `ü\,ß`,
	} {
		if got := setValue(in); got != want {
			t.Errorf("setValue(%q) = %q, want %q", in, got, want)
		}
	}
}
