//go:build unix

package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// fluxRelease is a HelmRelease of the chart folder charts/web of a git
// repository, with comments and a layout of its own that digestpin keeps.
const fluxRelease = `# The shop's web front end: digestpin flux pin writes its digests.
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: web
  namespace: shop
spec:
  interval: 10m   # reconcile often
  chart:
    spec:
      chart: ./charts/web
      sourceRef:
        kind: GitRepository
        name: shop
        namespace: flux-system
  valuesFrom:
    - kind: ConfigMap
      name: web-values
  values:
    image:
      app: REG/app:1.0
      db: REG/db:1.0
  postRenderers:
    - kustomize:
        images:
          # a sidecar the chart does not run: kept
          - name: busybox
            newTag: "1.36"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-values
  namespace: shop
data:
  values.yaml: |
    image:
      tools: REG/tools:1.0
`

// fluxKustomization is a Flux Kustomization of deploy/shop.
const fluxKustomization = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: shop
  namespace: flux-system
spec:
  interval: 10m
  path: ./deploy/shop
  prune: true
  sourceRef:
    kind: GitRepository
    name: shop
`

// TestFluxPin: digestpin flux pin writes the digest of every image a
// HelmRelease's chart runs (its hook Job and test Pod too) into its
// post-renderer, and those of a Kustomization's build into spec.images,
// every other byte kept; a second run changes nothing; a re-pushed tag
// changes exactly its entry; and each bad input is one line with no
// file written.
func TestFluxPin(t *testing.T) {
	t.Parallel()
	bin, kust := digestpinBin(t), kustomizeBin(t)
	reg := testregistry.New(t)
	digests := map[string]string{}
	for _, img := range []string{"app:1.0", "db:1.0", "tools:1.0", "api:2"} {
		digests[img] = reg.PushImage(t, img).String()
	}
	repo := t.TempDir()
	if err := os.CopyFS(filepath.Join(repo, "charts", "web"), os.DirFS(filepath.Join(repoRoot(t), "testdata", "chart"))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(repo, "deploy", "shop", "kustomization.yaml"), "resources: [api.yaml]\n")
	writeFile(t, filepath.Join(repo, "deploy", "shop", "api.yaml"), `apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
        - {name: api, image: `+reg.Ref("api:2")+`}
`)
	release := strings.ReplaceAll(fluxRelease, "REG", reg.Host())
	hr, ks := filepath.Join(repo, "clusters", "web.yaml"), filepath.Join(repo, "clusters", "shop.yaml")
	writeFile(t, hr, release)
	writeFile(t, ks, fluxKustomization)
	if out, err := exec.Command("git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	env := helmHome(t, "")
	pinRun := func(t *testing.T, files ...string) result {
		t.Helper()
		return runCmd(t, repo, nil, env, bin, append([]string{"flux", "pin", "--kustomize", kust}, files...)...)
	}

	r := pinRun(t, "clusters/web.yaml", "clusters/shop.yaml")
	if r.err != nil {
		t.Fatalf("digestpin flux pin: %v\n%s", r.err, r.stderr)
	}
	wantOut := "clusters/web.yaml: HelmRelease shop/web: kept the hand-written images entry busybox:1.36 (not digestpin's)\n" +
		"clusters/web.yaml: HelmRelease shop/web: wrote 3 images\n" +
		"clusters/shop.yaml: Kustomization flux-system/shop: wrote 1 images\n"
	if r.stdout != wantOut {
		t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, wantOut)
	}
	entry := func(indent int, img string) string {
		name, tag, _ := strings.Cut(img, ":")
		p := strings.Repeat(" ", indent)
		return p + "- name: " + reg.Ref(name) + " # digestpin\n" + p + "  newTag: \"" + tag + "\"\n" + p + "  digest: " + digests[img] + "\n"
	}
	wantHR := strings.Replace(release, "            newTag: \"1.36\"\n",
		"            newTag: \"1.36\"\n"+entry(10, "app:1.0")+entry(10, "db:1.0")+entry(10, "tools:1.0"), 1)
	if got := readFile(t, hr); got != wantHR {
		t.Errorf("%s:\n%s\nwant:\n%s", hr, got, wantHR)
	}
	wantKS := fluxKustomization + "  images:\n" + entry(4, "api:2")
	if got := readFile(t, ks); got != wantKS {
		t.Errorf("%s:\n%s\nwant:\n%s", ks, got, wantKS)
	}

	// Nothing moved: nothing written.
	r = pinRun(t, "clusters/web.yaml", "clusters/shop.yaml")
	if r.err != nil || !strings.Contains(r.stdout, "web: 3 images pinned, unchanged\n") || !strings.Contains(r.stdout, "shop: 1 images pinned, unchanged\n") {
		t.Errorf("second run: %v\n%s%s", r.err, r.stdout, r.stderr)
	}
	if readFile(t, hr) != wantHR || readFile(t, ks) != wantKS {
		t.Errorf("a second run changed a file")
	}

	// A re-pushed tag: exactly its digest changes.
	moved := reg.PushImage(t, "db:1.0").String()
	r = pinRun(t, "clusters/web.yaml")
	if r.err != nil {
		t.Fatalf("after the push: %v\n%s", r.err, r.stderr)
	}
	if got, want := readFile(t, hr), strings.Replace(wantHR, digests["db:1.0"], moved, 1); got != want {
		t.Errorf("after the push of db:1.0:\n%s\nwant:\n%s", got, want)
	}

	// Bad input: one line, no file written.
	for _, tc := range []struct {
		name, content, want string
	}{
		{"chart missing", strings.Replace(release, "./charts/web", "./charts/gone", 1),
			"HelmRelease shop/web: the chart ./charts/gone of GitRepository shop is no folder under"},
		{"chart does not render", strings.Replace(release, "    image:\n      app: "+reg.Ref("app:1.0")+"\n", "    image: broken\n    other:\n", 1),
			"HelmRelease shop/web: rendering chart"},
		{"path missing", strings.Replace(fluxKustomization, "./deploy/shop", "./deploy/gone", 1),
			`Kustomization flux-system/shop: spec.path "./deploy/gone" is no folder under`},
		{"path outside the repository", strings.Replace(fluxKustomization, "./deploy/shop", "../../etc", 1),
			`Kustomization flux-system/shop: spec.path "../../etc" leaves the repository`},
		{"two releases", fluxKustomization + "---\n" + fluxKustomization,
			"FILE: 2 objects to pin"},
		{"hand-written entry", fluxKustomization + "  images:\n    - name: " + reg.Ref("api") + "\n      newTag: \"1\"\n",
			"the images entry for " + reg.Ref("api") + " is written by hand"},
		{"values from the cluster", strings.Replace(release, "name: web-values\n  namespace", "name: other\n  namespace", 1),
			"spec.valuesFrom[0]: no ConfigMap web-values in FILE or beside it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel := "bad-" + strings.ReplaceAll(tc.name, " ", "-") + "/bad.yaml"
			p := filepath.Join(repo, rel)
			writeFile(t, p, tc.content)
			before := readFile(t, hr)
			want := strings.ReplaceAll(tc.want, "FILE", rel)
			r := runCmd(t, repo, nil, env, bin, "flux", "pin", "--kustomize", kust, "clusters/web.yaml", rel)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.err == nil || len(lines) != 1 || !strings.Contains(lines[0], want) || !strings.HasPrefix(lines[0], "digestpin: error: ") {
				t.Errorf("err %v, stderr:\n%s\nwant one line with %q", r.err, r.stderr, want)
			}
			if readFile(t, p) != tc.content || readFile(t, hr) != before {
				t.Errorf("a file was written")
			}
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
		})
	}
}

// writeFile writes content to path, making its folder.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readFile is the content of path.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFluxPinChartSources: a HelmRelease's chart from a HelmRepository
// (HTTP, and OCI), and from an OCIRepository (spec.chartRef), each object
// in a file beside the release's, all on loopback; a repository that does
// not answer is one line, and no file is written.
func TestFluxPinChartSources(t *testing.T) {
	t.Parallel()
	bin, h4 := digestpinBin(t), helm4(t)
	reg := testregistry.New(t)
	digests := map[string]string{}
	for _, img := range []string{"app:1.0", "db:1.0", "tools:1.0"} {
		digests[img] = reg.PushImage(t, img).String()
	}
	env := helmHome(t, "")
	// The chart, packaged, served by an HTTP chart repository and pushed
	// to the registry, by the Helm CLI.
	pkg := t.TempDir()
	mustRun(t, env, h4, "package", filepath.Join(repoRoot(t), "testdata", "chart"), "-d", pkg)
	srv := httptest.NewServer(http.FileServer(http.Dir(pkg)))
	t.Cleanup(srv.Close)
	mustRun(t, env, h4, "repo", "index", pkg, "--url", srv.URL)
	mustRun(t, env, h4, "push", filepath.Join(pkg, "pinchart-0.1.0.tgz"), "oci://"+reg.Host()+"/charts", "--plain-http")

	values := "  values:\n    image:\n      app: " + reg.Ref("app:1.0") + "\n      db: " + reg.Ref("db:1.0") + "\n      tools: " + reg.Ref("tools:1.0") + "\n"
	fromRepo := "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\nspec:\n  chart:\n    spec:\n      chart: pinchart\n      version: \"0.1.x\"\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n" + values
	fromOCI := "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\nspec:\n  chartRef:\n    kind: OCIRepository\n    name: pinchart\n" + values
	for _, tc := range []struct {
		name, release, sources, err string
	}{
		{name: "HelmRepository", release: fromRepo,
			sources: "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\nspec:\n  url: " + srv.URL + "\n"},
		{name: "HelmRepository of type oci", release: fromRepo,
			sources: "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\nspec:\n  type: oci\n  insecure: true\n  url: oci://" + reg.Host() + "/charts\n"},
		{name: "OCIRepository", release: fromOCI,
			sources: "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: pinchart\nspec:\n  insecure: true\n  url: oci://" + reg.Host() + "/charts/pinchart\n  ref:\n    tag: 0.1.0\n"},
		{name: "repository down", release: fromRepo,
			sources: "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\nspec:\n  url: http://127.0.0.1:1/charts\n",
			err:     "digestpin: error: clusters/web.yaml:1: HelmRelease web: rendering chart pinchart: "},
		{name: "no source", release: fromRepo,
			err: "digestpin: error: clusters/web.yaml:1: HelmRelease web: the chart pinchart: no HelmRepository charts in clusters/web.yaml or beside it: give its URL with --chart-repo\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := t.TempDir()
			hr := filepath.Join(repo, "clusters", "web.yaml")
			writeFile(t, hr, tc.release)
			if tc.sources != "" {
				writeFile(t, filepath.Join(repo, "clusters", "sources.yaml"), tc.sources)
			}
			r := runCmd(t, repo, nil, helmHome(t, ""), bin, "flux", "pin", "--repo-root", repo, "clusters/web.yaml")
			if tc.err != "" {
				if r.err == nil || !strings.HasPrefix(r.stderr, tc.err) || strings.Count(r.stderr, "\n") != 1 || readFile(t, hr) != tc.release {
					t.Errorf("err %v, stderr:\n%s\nwant one line starting %q, the file unchanged", r.err, r.stderr, tc.err)
				}
				return
			}
			if r.err != nil || r.stdout != "clusters/web.yaml: HelmRelease web: wrote 3 images\n" {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
			}
			got := readFile(t, hr)
			for img, d := range digests {
				name, _, _ := strings.Cut(img, ":")
				if !strings.Contains(got, "- name: "+reg.Ref(name)+" # digestpin\n") || !strings.Contains(got, "digest: "+d+"\n") {
					t.Errorf("no entry for %s@%s:\n%s", img, d, got)
				}
			}
		})
	}
}
