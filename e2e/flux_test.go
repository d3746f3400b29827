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
	digests := reg.PushImages(t, "app:1.0", "db:1.0", "tools:1.0", "api:2")
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
		{"hand-written entry", fluxKustomization + "  images:\n    - name: " + reg.Ref("api") + "\n      newTag: \"2\"\n",
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
	digests := reg.PushImages(t, "app:1.0", "db:1.0", "tools:1.0")
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

// TestFluxPinValuesFiles: a chart's valuesFiles render as source-controller
// merges them (a chart folder's from the repository's top level, later
// files winning; a HelmRepository chart's from inside the chart, for a
// HelmChart that spec.chartRef names); --summary and --summary-text say
// per file what moved, then that nothing did; each bad input is one line,
// with no file and no summary written.
func TestFluxPinValuesFiles(t *testing.T) {
	t.Parallel()
	bin, h4 := digestpinBin(t), helm4(t)
	reg := testregistry.New(t)
	digests := reg.PushImages(t, "app:1.0", "app:prod", "db:1.0", "tools:1.0")
	env := helmHome(t, "")
	// values-reg.yaml points every image at the registry; values-prod.yaml
	// then moves the app to its prod tag.
	regValues := "image:\n  app: " + reg.Ref("app:1.0") + "\n  db: " + reg.Ref("db:1.0") + "\n  tools: " + reg.Ref("tools:1.0") + "\n"
	repo := t.TempDir()
	chart := filepath.Join(repo, "charts", "web")
	if err := os.CopyFS(chart, os.DirFS(filepath.Join(repoRoot(t), "testdata", "chart"))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(chart, "values-reg.yaml"), regValues)
	writeFile(t, filepath.Join(chart, "values-prod.yaml"), "image:\n  app: "+reg.Ref("app:prod")+"\n")
	// The same chart, packaged with its values files, in an HTTP chart
	// repository.
	pkg := t.TempDir()
	mustRun(t, env, h4, "package", chart, "-d", pkg)
	srv := httptest.NewServer(http.FileServer(http.Dir(pkg)))
	t.Cleanup(srv.Close)
	mustRun(t, env, h4, "repo", "index", pkg, "--url", srv.URL)

	web := `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: web
  namespace: shop
spec:
  interval: 10m
  chart:
    spec:
      chart: ./charts/web
      sourceRef:
        kind: GitRepository
        name: shop
        namespace: flux-system
      ignoreMissingValuesFiles: true
      valuesFiles:
        - charts/web/values-reg.yaml
        - charts/web/values-prod.yaml
        - charts/web/values-not-yet.yaml   # may be missing
`
	api := `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: api
  namespace: shop
spec:
  interval: 10m
  chartRef:
    kind: HelmChart
    name: api-chart
`
	sources := `apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmChart
metadata:
  name: api-chart
  namespace: shop
spec:
  chart: pinchart
  version: "0.1.x"
  sourceRef:
    kind: HelmRepository
    name: charts
  valuesFiles: [values.yaml, values-reg.yaml]
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: charts
  namespace: shop
spec:
  url: ` + srv.URL + "\n"
	writeFile(t, filepath.Join(repo, "clusters", "web.yaml"), web)
	writeFile(t, filepath.Join(repo, "clusters", "api.yaml"), api)
	writeFile(t, filepath.Join(repo, "clusters", "sources.yaml"), sources)
	pinRun := func(t *testing.T, files ...string) result {
		t.Helper()
		args := append([]string{"flux", "pin", "--repo-root", repo, "--summary", "out/summary.md", "--summary-text", "out/summary.txt"}, files...)
		return runCmd(t, repo, nil, env, bin, args...)
	}
	if err := os.MkdirAll(filepath.Join(repo, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := pinRun(t, "clusters/web.yaml", "clusters/api.yaml")
	if r.err != nil || r.stdout != "clusters/web.yaml: HelmRelease shop/web: wrote 3 images\nclusters/api.yaml: HelmRelease shop/api: wrote 3 images\n" {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
	}
	entry := func(img string) string {
		name, tag, _ := strings.Cut(img, ":")
		if tag == "1.0" {
			tag = `"1.0"` // a number, quoted to stay a string
		}
		return "- name: " + reg.Ref(name) + " # digestpin\n            newTag: " + tag + "\n            digest: " + digests[img] + "\n"
	}
	webPinned, apiPinned := readFile(t, filepath.Join(repo, "clusters", "web.yaml")), readFile(t, filepath.Join(repo, "clusters", "api.yaml"))
	for _, c := range []struct{ file, img string }{{webPinned, "app:prod"}, {webPinned, "db:1.0"}, {apiPinned, "app:1.0"}, {apiPinned, "tools:1.0"}} {
		if !strings.Contains(c.file, entry(c.img)) {
			t.Errorf("no entry for %s:\n%s", c.img, c.file)
		}
	}
	if strings.Contains(webPinned, reg.Ref("app")+" # digestpin\n            newTag: \"1.0\"") || !strings.HasPrefix(webPinned, web) || !strings.HasPrefix(apiPinned, api) {
		t.Errorf("web runs the values-reg.yaml app, or a file lost its text:\n%s\n%s", webPinned, apiPinned)
	}
	text := readFile(t, filepath.Join(repo, "out", "summary.txt"))
	if !strings.Contains(text, "clusters/web.yaml: HelmRelease shop/web: no image moved, 3 added (against the digests in the file)\n") ||
		!strings.Contains(text, "clusters/api.yaml: HelmRelease shop/api: no image moved, 3 added (against the digests in the file)\n") {
		t.Errorf("the first summary:\n%s", text)
	}

	// app:prod pushed again: its digest moved, in web only.
	moved := reg.PushImage(t, "app:prod").String()
	r = pinRun(t, "clusters/web.yaml", "clusters/api.yaml")
	if r.err != nil {
		t.Fatalf("after the push: %v\n%s", r.err, r.stderr)
	}
	short := func(d string) string { return strings.TrimPrefix(d, "sha256:")[:12] }
	wantText := "clusters/web.yaml: HelmRelease shop/web: 1 image moved, 2 unchanged (against the digests in the file)\n" +
		reg.Ref("app:prod") + " " + short(digests["app:prod"]) + " → " + short(moved) + ": Deployment/web-web, Job/web-migrate\n" +
		"clusters/api.yaml: HelmRelease shop/api: no image moved, 3 unchanged (against the digests in the file)\n"
	if got := readFile(t, filepath.Join(repo, "out", "summary.txt")); got != wantText {
		t.Errorf("summary text:\n%s\nwant:\n%s", got, wantText)
	}
	md := readFile(t, filepath.Join(repo, "out", "summary.md"))
	for _, want := range []string{
		"## `clusters/web.yaml`: HelmRelease shop/web\n\n### digestpin: 1 image moved, 2 unchanged (against the digests in the file)\n",
		"| `" + reg.Ref("app:prod") + "` | `" + short(digests["app:prod"]) + "` | `" + short(moved) + "` | Deployment/web-web (web)<br>Job/web-migrate (migrate) |\n",
		"\n## `clusters/api.yaml`: HelmRelease shop/api\n\n### digestpin: no image moved, 3 unchanged (against the digests in the file)\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("summary Markdown lacks\n%s\nin\n%s", want, md)
		}
	}
	// Nothing moved: the files stay, the summaries say so.
	webPinned = readFile(t, filepath.Join(repo, "clusters", "web.yaml"))
	r = pinRun(t, "clusters/web.yaml", "clusters/api.yaml")
	if r.err != nil || readFile(t, filepath.Join(repo, "clusters", "web.yaml")) != webPinned || readFile(t, filepath.Join(repo, "clusters", "api.yaml")) != apiPinned {
		t.Errorf("a run with nothing moved: %v, or it changed a file\n%s", r.err, r.stderr)
	}
	if got := readFile(t, filepath.Join(repo, "out", "summary.txt")); got != "clusters/web.yaml: HelmRelease shop/web: no image moved, 3 unchanged (against the digests in the file)\nclusters/api.yaml: HelmRelease shop/api: no image moved, 3 unchanged (against the digests in the file)\n" {
		t.Errorf("nothing moved, summary:\n%s", got)
	}

	// Bad input: one line, no file written, no summary.
	if err := os.Symlink("/etc/hostname", filepath.Join(repo, "values-link.yaml")); err != nil {
		t.Fatal(err)
	}
	noIgnore := strings.Replace(web, "      ignoreMissingValuesFiles: true\n", "", 1)
	for _, tc := range []struct {
		name, file, content, want string
	}{
		{"a missing values file", "web.yaml", noIgnore,
			`clusters/bad/web.yaml:1: HelmRelease shop/web: spec.chart.spec.valuesFiles[2] "charts/web/values-not-yet.yaml": no such file under the repository `},
		{"a values file out of the repository", "web.yaml", strings.Replace(web, "charts/web/values-prod.yaml", "../../../etc/passwd", 1),
			`spec.chart.spec.valuesFiles[1] "../../../etc/passwd": leaves the repository `},
		{"an absolute values file", "web.yaml", strings.Replace(web, "charts/web/values-prod.yaml", "/etc/passwd", 1),
			`spec.chart.spec.valuesFiles[1] "/etc/passwd": is an absolute path`},
		{"a link out of the repository", "web.yaml", strings.Replace(noIgnore, "charts/web/values-prod.yaml", "values-link.yaml", 1),
			`spec.chart.spec.valuesFiles[1] "values-link.yaml": is a symbolic link, which source-controller leaves out of the GitRepository's artifact`},
		{"a chart's values file that leaves it", "sources.yaml", strings.Replace(sources, "values-reg.yaml]", "../x.yaml]", 1),
			`spec.chartRef: HelmChart shop/api-chart (clusters/bad/sources.yaml:1): spec.valuesFiles[1] "../x.yaml": leaves the chart: refusing to read it`},
		{"a chart's missing values file", "sources.yaml", strings.Replace(sources, "values-reg.yaml]", "values-gone.yaml]", 1),
			`spec.chartRef: HelmChart shop/api-chart (clusters/bad/sources.yaml:1): spec.valuesFiles[1] "values-gone.yaml": no such file in the chart pinchart`},
		{"no HelmChart", "sources.yaml", strings.Replace(sources, "name: api-chart", "name: other", 1),
			`clusters/bad/api.yaml:1: HelmRelease shop/api: spec.chartRef: no HelmChart api-chart in clusters/bad/api.yaml or beside it, and digestpin reads no cluster`},
		{"a HelmChart of an unknown source", "sources.yaml", strings.Replace(sources, "kind: HelmRepository\n    name: charts", "kind: S3Bucket\n    name: charts", 1),
			`clusters/bad/api.yaml:1: HelmRelease shop/api: spec.chartRef: HelmChart shop/api-chart (clusters/bad/sources.yaml:1): spec.sourceRef is a "S3Bucket": digestpin reads a chart of a GitRepository, Bucket or HelmRepository`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(repo, "clusters", "bad")
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			files := map[string]string{"web.yaml": web, "api.yaml": api, "sources.yaml": sources}
			files[tc.file] = tc.content
			for name, content := range files {
				writeFile(t, filepath.Join(dir, name), content)
			}
			if err := os.RemoveAll(filepath.Join(repo, "out")); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(repo, "out"), 0o755); err != nil {
				t.Fatal(err)
			}
			r := pinRun(t, "clusters/bad/web.yaml", "clusters/bad/api.yaml")
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.err == nil || len(lines) != 1 || !strings.Contains(lines[0], tc.want) || !strings.HasPrefix(lines[0], "digestpin: error: ") {
				t.Errorf("err %v, stderr:\n%s\nwant one line with %q", r.err, r.stderr, tc.want)
			}
			for name, content := range files {
				if readFile(t, filepath.Join(dir, name)) != content {
					t.Errorf("%s was written", name)
				}
			}
			if entries, _ := os.ReadDir(filepath.Join(repo, "out")); len(entries) != 0 || r.stdout != "" {
				t.Errorf("a summary was written (%d files), or stdout %q", len(entries), r.stdout)
			}
		})
	}
}

// fluxBuildApp is the Deployment app of deploy/base, its image REG/app:1.0.
const fluxBuildApp = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers:
        - name: app
          image: IMAGE
`

// fluxBuildKS is a Kustomization of PATH; SPEC are more lines of its spec.
const fluxBuildKS = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: shop
  namespace: flux-system
spec:
  interval: 10m
  path: PATH
  prune: true
  sourceRef:
    kind: GitRepository
    name: shop
SPEC`

// TestFluxPinBuild: what kustomize-controller applies before the images
// are read — the Kustomization's patches (strategic merge, JSON 6902 with
// a target), components, target namespace and name prefix, hand-written
// images entries, a folder with no kustomization, and spec.postBuild's
// substitution (inline, from a ConfigMap and a Secret beside it, an
// optional one missing, a default, an object that turns it off) — and
// what helm-controller's post-renderers apply to a HelmRelease: digestpin
// pins the images that run. Each bad input is one line, nothing written.
func TestFluxPinBuild(t *testing.T) {
	t.Parallel()
	bin, kust := digestpinBin(t), kustomizeBin(t)
	reg := testregistry.New(t)
	digests := reg.PushImages(t, "app:1.0", "app:2.0", "other:1.0", "sidecar:1.0", "db:1.0", "tools:1.0")
	repo := t.TempDir()
	app := func(image string) string { return strings.ReplaceAll(fluxBuildApp, "IMAGE", image) }
	files := map[string]string{
		"deploy/base/kustomization.yaml": "resources: [app.yaml]\n",
		"deploy/base/app.yaml":           app(reg.Ref("app:1.0")),
		"deploy/components/sidecar/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
  - target: {kind: Deployment, name: app}
    patch: |
      - op: add
        path: /spec/template/spec/containers/-
        value: {name: sidecar, image: ` + reg.Ref("sidecar:1.0") + `}
`,
		"deploy/plain/app.yaml":  app(reg.Ref("app:1.0")),
		"deploy/plain/db/db.yml": strings.ReplaceAll(app(reg.Ref("db:1.0")), "name: app\n", "name: db\n"),
		"deploy/plain/notes.txt": "not a manifest\n",
		// Not in the GitRepository's artifact: source-controller leaves it out.
		"deploy/plain/.github/workflows/ci.yml": "on: push\njobs: {}\n",
		"deploy/vars/app.yaml":                  strings.Replace(app(reg.Ref("app:1.0")), "          image:", "          env: [{name: GREETING, value: \"${GREETING}\"}, {name: MODE, value: \"${MODE:=fast}\"}]\n          image:", 1),
		"deploy/tag/app.yaml":                   app(reg.Ref("app:${TAG}")),
		"deploy/registry/app.yaml":              app("${REGISTRY}/app:1.0"),
		"deploy/disabled/app.yaml":              app(reg.Ref("app:1.0")),
		"deploy/disabled/other.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: raw\n  annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata:\n  script: echo ${NOT_SET}\n",
	}
	for p, content := range files {
		writeFile(t, filepath.Join(repo, p), content)
	}
	if err := os.CopyFS(filepath.Join(repo, "charts", "web"), os.DirFS(filepath.Join(repoRoot(t), "testdata", "chart"))); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	ks := func(path, spec string) string {
		return strings.NewReplacer("PATH", path, "SPEC", spec).Replace(fluxBuildKS)
	}
	smPatch := "  patches:\n    - patch: |\n        apiVersion: apps/v1\n        kind: Deployment\n        metadata: {name: app}\n        spec:\n          template:\n            spec:\n              containers:\n                - {name: app, image: " + reg.Ref("app:2.0") + "}\n"
	configMap := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: vars\n  namespace: flux-system\ndata:\n  MODE: slow\n"
	secret := "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: secret-vars\n  namespace: flux-system\ndata:\n  GREETING: aGVsbG8=\n"
	hr := "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  chart:\n    spec:\n      chart: ./charts/web\n      sourceRef: {kind: GitRepository, name: shop}\n" +
		"  values:\n    image: {app: " + reg.Ref("app:1.0") + ", db: " + reg.Ref("db:1.0") + ", tools: " + reg.Ref("tools:1.0") + "}\n  postRenderers:\n"
	jsonPatch := func(image string) string {
		return "          - target: {kind: Deployment, name: web-web}\n            patch: |\n              - {op: replace, path: /spec/template/spec/containers/0/image, value: " + image + "}\n"
	}
	for _, tc := range []struct {
		name, file string
		want       []string // images pinned
		kept       string   // a line of stdout
		err        string
	}{
		{name: "strategic merge patch", file: ks("./deploy/base", smPatch), want: []string{"app:2.0"}},
		{name: "JSON 6902 patch with a target", file: ks("./deploy/base", "  patches:\n    - target: {kind: Deployment, name: app}\n      patch: |\n        - {op: replace, path: /spec/template/spec/containers/0/image, value: "+reg.Ref("app:2.0")+"}\n"),
			want: []string{"app:2.0"}},
		{name: "a patch that targets nothing", file: ks("./deploy/base", "  patches:\n    - target: {kind: StatefulSet}\n      patch: |\n        - {op: replace, path: /spec/template/spec/containers/0/image, value: "+reg.Ref("app:2.0")+"}\n"),
			want: []string{"app:1.0"}},
		{name: "component", file: ks("./deploy/base", "  components: [../components/sidecar, ../components/not-yet]\n  ignoreMissingComponents: true\n"),
			want: []string{"app:1.0", "sidecar:1.0"}},
		{name: "target namespace and name prefix", file: ks("./deploy/base", "  targetNamespace: shop\n  namePrefix: pre-\n  nameSuffix: -suf\n"+smPatch),
			want: []string{"app:2.0"}},
		{name: "hand-written newName", file: ks("./deploy/base", "  images:\n    - name: "+reg.Ref("app")+"\n      newName: "+reg.Ref("other")+"\n"),
			want: []string{"other:1.0"}, kept: "kept the hand-written images entry " + reg.Ref("app") + " (not digestpin's, newName " + reg.Ref("other") + ")\n"},
		{name: "hand-written digest", file: ks("./deploy/base", "  images:\n    - name: "+reg.Ref("app")+"\n      digest: "+digests["app:2.0"]+"\n")},
		{name: "folder without a kustomization", file: ks("./deploy/plain", ""), want: []string{"app:1.0", "db:1.0"}},
		{name: "inline substitute", file: ks("./deploy/vars", "  postBuild:\n    substitute:\n      GREETING: hello\n"), want: []string{"app:1.0"}},
		{name: "substituteFrom a ConfigMap and a Secret", file: ks("./deploy/vars", "  postBuild:\n    substituteFrom:\n      - {kind: ConfigMap, name: vars}\n      - {kind: Secret, name: secret-vars}\n      - {kind: ConfigMap, name: gone, optional: true}\n") + configMap + secret,
			want: []string{"app:1.0"}},
		{name: "postBuild with no variable substitutes nothing", file: ks("./deploy/vars", "  postBuild:\n    substituteFrom:\n      - {kind: ConfigMap, name: gone, optional: true}\n"),
			want: []string{"app:1.0"}},
		{name: "substitution disabled on an object", file: ks("./deploy/disabled", "  postBuild:\n    substitute: {TAG: \"2.0\"}\n"), want: []string{"app:1.0"}},
		{name: "HelmRelease post-renderer patch", file: hr + "    - kustomize:\n        patches:\n" + jsonPatch(reg.Ref("other:1.0")),
			want: []string{"app:1.0", "db:1.0", "other:1.0", "tools:1.0"}},
		{name: "HelmRelease entries handed to the last post-renderer", file: hr + "    - kustomize:\n        patches: []\n    - kustomize:\n        patches:\n" + jsonPatch(reg.Ref("other:1.0")) + "        images:\n          - name: here # digestpin\n",
			want: []string{"app:1.0", "db:1.0", "other:1.0", "tools:1.0"}},
		{name: "HelmRelease post-renderer newName", file: hr + "    - kustomize:\n        images:\n          - {name: " + reg.Ref("db") + ", newName: " + reg.Ref("other") + "}\n",
			want: []string{"app:1.0", "other:1.0", "tools:1.0"}, kept: "kept the hand-written images entry " + reg.Ref("db")},

		{name: "patch does not apply", file: ks("./deploy/base", strings.Replace(smPatch, "{name: app}", "{name: gone}", 1)),
			err: "build of spec.path ./deploy/base (with the spec's patches, components, images and names merged in, as kustomize-controller builds it): "},
		{name: "substituteFrom missing", file: ks("./deploy/vars", "  postBuild:\n    substituteFrom:\n      - {kind: ConfigMap, name: gone}\n"),
			err: "spec.postBuild.substituteFrom[0]: no ConfigMap gone in FILE or beside it"},
		{name: "variable not set", file: ks("./deploy/vars", "  postBuild:\n    substitute: {OTHER: x}\n"),
			err: `spec.postBuild: substituting into Deployment app: variable not set (strict mode): "GREETING"`},
		{name: "strategy Always, a variable not set", file: ks("./deploy/vars", "  postBuild:\n    substituteStrategy: Always\n"),
			err: `spec.postBuild: substituting into Deployment app: variable not set (strict mode): "GREETING"`},
		{name: "a tag substituted after the images apply", file: ks("./deploy/tag", "  postBuild:\n    substitute: {TAG: \"2.0\"}\n"),
			err: "Deployment app would still run " + reg.Ref("app:2.0") + " unpinned once digestpin's images entries are written, so digestpin writes none: spec.postBuild substitutes its variables after the images entries apply"},
		{name: "component leaves the repository", file: ks("./deploy/base", "  components: [../../../outside]\n"),
			err: `spec.components[0] "../../../outside" leaves the repository`},
		{name: "remote component", file: ks("./deploy/base", "  components: [https://example.com/c]\n"),
			err: `spec.components[0] "https://example.com/c" is not a local, relative path`},
		{name: "a name substituted after the images apply", file: ks("./deploy/registry", "  postBuild:\n    substitute: {REGISTRY: \""+reg.Host()+"\"}\n"),
			err: "Deployment app would still run " + reg.Ref("app:1.0") + " unpinned once digestpin's images entries are written, so digestpin writes none: spec.postBuild substitutes its variables after the images entries apply"},
		{name: "HelmRelease later post-renderer changes an image", file: hr + "    - kustomize:\n        patches: []\n    - kustomize:\n        patches:\n" + jsonPatch(reg.Ref("other:1.0")),
			err: "Deployment web-web would still run " + reg.Ref("other:1.0") + " unpinned once digestpin's images entries are written, so digestpin writes none: spec.postRenderers[1] runs after spec.postRenderers[0], which holds digestpin's entries: move its patch before them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rel := "clusters/" + strings.ReplaceAll(tc.name, " ", "-") + ".yaml"
			p := filepath.Join(repo, rel)
			writeFile(t, p, tc.file)
			r := runCmd(t, repo, nil, helmHome(t, ""), bin, "flux", "pin", "--kustomize", kust, rel)
			if tc.err != "" {
				want := strings.ReplaceAll(tc.err, "FILE", rel)
				lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
				if r.err == nil || len(lines) != 1 || !strings.Contains(lines[0], want) || r.stdout != "" {
					t.Errorf("err %v, stdout %q, stderr:\n%s\nwant one line with %q", r.err, r.stdout, r.stderr, want)
				}
				if readFile(t, p) != tc.file {
					t.Errorf("%s was written", rel)
				}
				return
			}
			if r.err != nil {
				t.Fatalf("%v\n%s%s", r.err, r.stdout, r.stderr)
			}
			got := readFile(t, p)
			if n := strings.Count(got, "# digestpin"); n != len(tc.want) {
				t.Errorf("%d entries of digestpin's, want %d:\n%s", n, len(tc.want), got)
			}
			for _, img := range tc.want {
				name, tag, _ := strings.Cut(img, ":")
				entry := "- name: " + reg.Ref(name) + " # digestpin\n"
				i := strings.Index(got, entry)
				if i < 0 || !strings.Contains(got[i:], "newTag: \""+tag+"\"\n") || !strings.Contains(got[i:], "digest: "+digests[img]+"\n") {
					t.Errorf("no entry for %s@%s:\n%s", img, digests[img], got)
				}
			}
			if !strings.Contains(r.stdout, tc.kept) {
				t.Errorf("stdout:\n%s\nwant %q", r.stdout, tc.kept)
			}
			// A second run changes nothing.
			again := runCmd(t, repo, nil, helmHome(t, ""), bin, "flux", "pin", "--kustomize", kust, rel)
			if again.err != nil || readFile(t, p) != got || !strings.Contains(again.stdout, "unchanged") {
				t.Errorf("second run: %v\n%s%s", again.err, again.stdout, again.stderr)
			}
		})
	}
}
