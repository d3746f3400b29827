package helmcmd

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/digestpin/digestpin/helmaction"
	"github.com/digestpin/digestpin/internal/fluxpin"
)

// fluxHR is a HelmRelease of the chart folder charts/web; CHART is its
// spec.chart.spec's lines after sourceRef, VALUES its spec.values.
const fluxHR = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: web
  namespace: shop
spec:
  chart:
    spec:
      chart: ./charts/web
      sourceRef:
        kind: GitRepository
        name: shop
CHART
VALUES`

// fluxHRRef is a HelmRelease whose chart is the HelmChart web-chart.
const fluxHRRef = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: web
  namespace: shop
spec:
  chartRef:
    kind: HelmChart
    name: web-chart
VALUES`

// fluxHelmChart is the HelmChart web-chart of charts/web; CHART its
// spec's lines after sourceRef.
const fluxHelmChart = `apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmChart
metadata:
  name: web-chart
  namespace: shop
spec:
  chart: ./charts/web
  sourceRef:
    kind: GitRepository
    name: shop
CHART
`

// TestFluxValuesFiles: a chart's valuesFiles (and the older valuesFile)
// replace its default values, merged in order, under valuesFrom and
// values, as source-controller and helm-controller merge them; a HelmChart
// named by spec.chartRef renders as spec.chart.spec does; and each bad
// input is one line, nothing rendered.
func TestFluxValuesFiles(t *testing.T) {
	t.Parallel()
	const (
		prod = "image:\n  app: reg.example/app:prod\n"
		dbv  = "image:\n  db: reg.example/db:2\n  app: reg.example/app:db-file\n"
	)
	defaults := []string{"127.0.0.1:5000/app:1.0", "127.0.0.1:5000/db:1.0", "127.0.0.1:5000/tools:1.0"}
	for _, tc := range []struct {
		name string
		// release is the FILE; beside is a file beside it (a HelmChart).
		release, beside string
		// files are written into the repository, by path.
		files map[string]string
		// link makes charts/web/LINK a symbolic link to this path.
		link   string
		images []string
		err    string
	}{
		{name: "no valuesFiles", release: hr("", ""), images: defaults},
		{name: "values.yaml alone changes nothing", release: hr("      valuesFiles: [values.yaml]", ""), images: defaults},
		{name: "values.yaml, then a file of the repository",
			release: hr("      valuesFiles:\n        - charts/web/values.yaml\n        - charts/web/prod.yaml", ""),
			files:   map[string]string{"charts/web/prod.yaml": prod},
			images:  []string{"127.0.0.1:5000/db:1.0", "127.0.0.1:5000/tools:1.0", "reg.example/app:prod"}},
		{name: "the files replace the chart's defaults",
			release: hr("      valuesFiles: [charts/web/prod.yaml]", ""),
			files:   map[string]string{"charts/web/prod.yaml": prod},
			images:  []string{"", "reg.example/app:prod"}},
		{name: "later wins, valuesFile first",
			release: hr("      valuesFile: charts/web/db.yaml\n      valuesFiles: [charts/web/prod.yaml]", ""),
			files:   map[string]string{"charts/web/prod.yaml": prod, "charts/web/db.yaml": dbv},
			images:  []string{"", "reg.example/app:prod", "reg.example/db:2"}},
		{name: "values over the files",
			release: hr("      valuesFiles: [charts/web/values.yaml, charts/web/db.yaml]", "    image:\n      db: reg.example/db:values"),
			files:   map[string]string{"charts/web/db.yaml": dbv},
			images:  []string{"127.0.0.1:5000/tools:1.0", "reg.example/app:db-file", "reg.example/db:values"}},
		{name: "a missing file, ignored",
			release: hr("      ignoreMissingValuesFiles: true\n      valuesFiles: [charts/web/values.yaml, charts/web/gone.yaml]", ""),
			images:  defaults},
		{name: "HelmChart",
			release: ref(""), beside: helmChart("  valuesFiles: [charts/web/values.yaml, charts/web/prod.yaml]"),
			files:  map[string]string{"charts/web/prod.yaml": prod},
			images: []string{"127.0.0.1:5000/db:1.0", "127.0.0.1:5000/tools:1.0", "reg.example/app:prod"}},
		{name: "HelmChart, values over its files",
			release: ref("    image:\n      app: reg.example/app:values"), beside: helmChart("  valuesFiles: [charts/web/prod.yaml]"),
			files:  map[string]string{"charts/web/prod.yaml": prod},
			images: []string{"", "reg.example/app:values"}},

		{name: "a missing file",
			release: hr("      valuesFiles: [charts/web/values.yaml, charts/web/gone.yaml]", ""),
			err:     `clusters/web.yaml:1: HelmRelease shop/web: spec.chart.spec.valuesFiles[1] "charts/web/gone.yaml": no such file under the repository ROOT (paths of a GitRepository's chart are from its top level; ignoreMissingValuesFiles: true lets one be missing)`},
		{name: "a missing valuesFile",
			release: hr("      valuesFile: gone.yaml", ""),
			err:     `clusters/web.yaml:1: HelmRelease shop/web: spec.chart.spec.valuesFile "gone.yaml": no such file under the repository ROOT`},
		{name: "leaves the repository",
			release: hr("      valuesFiles: [../../etc/passwd]", ""),
			err:     `clusters/web.yaml:1: HelmRelease shop/web: spec.chart.spec.valuesFiles[0] "../../etc/passwd": leaves the repository ROOT: refusing to read it`},
		{name: "an absolute path",
			release: hr("      valuesFiles: [charts/web/values.yaml, /etc/passwd]", ""),
			err:     `clusters/web.yaml:1: HelmRelease shop/web: spec.chart.spec.valuesFiles[1] "/etc/passwd": is an absolute path: name the file relative to the repository ROOT`},
		{name: "a symbolic link out of the repository",
			release: hr("      valuesFiles: [charts/web/LINK]", ""), link: "/etc/hostname",
			err: `clusters/web.yaml:1: HelmRelease shop/web: spec.chart.spec.valuesFiles[0] "charts/web/LINK": is a symbolic link, which source-controller leaves out of the GitRepository's artifact, so Flux has no such file either: make it a file`},
		{name: "a symbolic link in the repository",
			release: hr("      valuesFiles: [charts/web/LINK]", ""), link: "values.yaml",
			err: `clusters/web.yaml:1: HelmRelease shop/web: spec.chart.spec.valuesFiles[0] "charts/web/LINK": is a symbolic link, which source-controller leaves out of the GitRepository's artifact, so Flux has no such file either: make it a file`},
		{name: "not YAML",
			release: hr("      valuesFiles: [charts/web/bad.yaml]", ""), files: map[string]string{"charts/web/bad.yaml": "image: [\n"},
			err: `clusters/web.yaml:1: HelmRelease shop/web: spec.chart.spec.valuesFiles[0] "charts/web/bad.yaml": not YAML values:`},
		{name: "HelmChart not in the files",
			release: ref(""),
			err:     `clusters/web.yaml:1: HelmRelease shop/web: spec.chartRef: no HelmChart web-chart in clusters/web.yaml or beside it, and digestpin reads no cluster: put the HelmChart beside the file, or name the chart in spec.chart`},
		{name: "HelmChart of another namespace",
			release: ref(""), beside: strings.Replace(helmChart(""), "namespace: shop", "namespace: other", 1),
			err: `spec.chartRef: no HelmChart web-chart in clusters/web.yaml or beside it`},
		{name: "HelmChart of an unknown source",
			release: ref(""), beside: strings.Replace(helmChart(""), "kind: GitRepository", "kind: S3Thing", 1),
			err: `clusters/web.yaml:1: HelmRelease shop/web: spec.chartRef: HelmChart shop/web-chart (clusters/chart.yaml:1): spec.sourceRef is a "S3Thing": digestpin reads a chart of a GitRepository, Bucket or HelmRepository`},
		{name: "HelmChart with a missing file",
			release: ref(""), beside: helmChart("  valuesFiles: [gone.yaml]"),
			err: `clusters/web.yaml:1: HelmRelease shop/web: spec.chartRef: HelmChart shop/web-chart (clusters/chart.yaml:1): spec.valuesFiles[0] "gone.yaml": no such file under the repository ROOT`},
		{name: "chartRef of an unknown kind",
			release: strings.Replace(ref(""), "kind: HelmChart", "kind: GitRepository", 1),
			err:     `clusters/web.yaml:1: HelmRelease shop/web: spec.chartRef is a GitRepository: digestpin reads the chart of an OCIRepository or a HelmChart, or of spec.chart`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if err := os.CopyFS(filepath.Join(root, "charts", "web"), os.DirFS(filepath.Join(repoRoot, "testdata", "chart"))); err != nil {
				t.Fatal(err)
			}
			for p, content := range tc.files {
				put(t, filepath.Join(root, p), content)
			}
			if tc.link != "" {
				if err := os.Symlink(tc.link, filepath.Join(root, "charts", "web", "LINK")); err != nil {
					t.Fatal(err)
				}
			}
			if tc.beside != "" {
				put(t, filepath.Join(root, "clusters", "chart.yaml"), tc.beside)
			}
			out, err := renderReleaseIn(t, root, tc.release)
			if tc.err != "" {
				want := strings.ReplaceAll(strings.ReplaceAll(tc.err, "ROOT", root), "clusters/", root+"/clusters/")
				if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
					t.Errorf("error %v\nwant one line with %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := imagesOf(out.stream); !slices.Equal(got, tc.images) {
				t.Errorf("images %q, want %q", got, tc.images)
			}
		})
	}
}

// TestFluxChartValues: a HelmRepository's or OCI chart's valuesFiles are
// files of the chart, values.yaml its own defaults; one that leaves the
// chart or is absolute is refused before anything is fetched, and a
// missing one is an error unless ignoreMissingValuesFiles.
func TestFluxChartValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(repoRoot, "testdata", "chart"))); err != nil {
		t.Fatal(err)
	}
	put(t, filepath.Join(dir, "env", "prod.yaml"), "image:\n  app: reg.example/app:prod\n")
	for _, tc := range []struct {
		name   string
		files  []string
		ignore bool
		app    any // image.app of the defaults after
		db     any
		err    string
	}{
		{name: "values.yaml then a file", files: []string{"values.yaml", "./env/prod.yaml"}, app: "reg.example/app:prod", db: "127.0.0.1:5000/db:1.0"},
		{name: "a file alone", files: []string{"env/prod.yaml"}, app: "reg.example/app:prod"},
		{name: "missing, ignored", files: []string{"values.yaml", "env/gone.yaml"}, ignore: true, app: "127.0.0.1:5000/app:1.0", db: "127.0.0.1:5000/db:1.0"},
		{name: "missing", files: []string{"values.yaml", "env/gone.yaml"},
			err: `spec.chart.spec.valuesFiles[1] "env/gone.yaml": no such file in the chart pinchart (ignoreMissingValuesFiles: true lets one be missing)`},
		{name: "leaves the chart", files: []string{"env/../../x.yaml"},
			err: `spec.chart.spec.valuesFiles[0] "env/../../x.yaml": leaves the chart: refusing to read it`},
		{name: "absolute", files: []string{"/values.yaml"},
			err: `spec.chart.spec.valuesFiles[0] "/values.yaml": is an absolute path: name the file relative to the chart`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cs := chartSpec{at: "spec.chart.spec", valuesFiles: tc.files, ignoreMissingFiles: tc.ignore}
			var ro helmaction.Options
			err := cs.chartValues(&ro)
			if err == nil {
				ch, lerr := loader.Load(dir)
				if lerr != nil {
					t.Fatal(lerr)
				}
				if err = ro.Loaded(ch); err == nil {
					img, _ := ch.Values["image"].(map[string]any)
					if img["app"] != tc.app || img["db"] != tc.db {
						t.Errorf("image values %v, want app %v, db %v", img, tc.app, tc.db)
					}
				}
			}
			if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
				t.Errorf("error %v\nwant %s", err, tc.err)
			}
		})
	}
}

func hr(chart, values string) string {
	return fillIn(fluxHR, chart, values)
}

func ref(values string) string { return fillIn(fluxHRRef, "", values) }

func helmChart(chart string) string { return fillIn(fluxHelmChart, chart, "") }

// fillIn puts the chart lines and the values into a template.
func fillIn(tpl, chart, values string) string {
	if chart != "" {
		chart += "\n"
	}
	if values != "" {
		values = "  values:\n" + values + "\n"
	}
	return strings.NewReplacer("CHART\n", chart, "VALUES", values).Replace(tpl)
}

// imagesOf are the images a stream runs, each once, sorted.
func imagesOf(stream []byte) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\s*image: "?([^"\n]*)"?$`).FindAllSubmatch(stream, -1) {
		if s := string(m[1]); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// put writes content to path, making its folder.
func put(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFluxChartLinksLeftOut: a chart of a GitRepository is rendered from
// the repository as source-controller archives it, without its symbolic
// links: a template that is a link (here to a file of the repository)
// is not rendered, as helm-controller does not render it, so its image
// is not pinned.
func TestFluxChartLinksLeftOut(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "charts", "web"), os.DirFS(filepath.Join(repoRoot, "testdata", "chart"))); err != nil {
		t.Fatal(err)
	}
	put(t, filepath.Join(root, "extra.yaml"), "apiVersion: v1\nkind: Pod\nmetadata:\n  name: extra\nspec:\n  containers:\n    - name: extra\n      image: registry.example/shop/extra:1\n")
	if err := os.Symlink(filepath.Join("..", "..", "..", "extra.yaml"), filepath.Join(root, "charts", "web", "templates", "extra.yaml")); err != nil {
		t.Fatal(err)
	}
	out, err := renderReleaseIn(t, root, hr("", ""))
	if err != nil {
		t.Fatal(err)
	}
	got := imagesOf(out.stream)
	if len(got) == 0 || slices.ContainsFunc(got, func(img string) bool { return strings.Contains(img, "extra") }) {
		t.Errorf("images %q: want the chart's, without the linked template's shop/extra:1", got)
	}
}

// renderReleaseIn writes release as root/clusters/web.yaml and renders
// it as flux pin does, with root as the repository.
func renderReleaseIn(t *testing.T, root, release string) (*built, error) {
	t.Helper()
	put(t, filepath.Join(root, "clusters", "web.yaml"), release)
	f, err := fluxpin.Parse(filepath.Join(root, "clusters", "web.yaml"), []byte(release))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetTarget(); err != nil {
		t.Fatal(err)
	}
	var o fluxOptions
	return o.renderRelease(context.Background(), f, root)
}
