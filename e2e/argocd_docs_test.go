package e2e

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// sectionBlocks returns the fenced blocks of language lang in the
// section of the Markdown file path that begins with the heading line
// head, up to the next heading of the same level or a higher one.
func sectionBlocks(t *testing.T, path, head, lang string) []docBlock {
	t.Helper()
	level := strings.Index(head, " ")
	start, end := 0, math.MaxInt
	for _, l := range proseLines(t, path) {
		if l.text == head {
			start = l.n
			continue
		}
		if n := strings.Index(l.text, " "); start > 0 && n > 0 && n <= level && strings.Trim(l.text[:n], "#") == "" {
			end = l.n
			break
		}
	}
	if start == 0 {
		t.Fatalf("%s has no heading %q", path, head)
	}
	var out []docBlock
	for _, b := range docBlocks(t, path) {
		if b.line > start && b.line < end && b.lang == lang {
			out = append(out, b)
		}
	}
	return out
}

// TestArgoCDDocsApplications reads the three Applications of docs/argocd.md's
// Argo CD workflows, and generates each one's manifests as the sidecar does (its parameters as ARGOCD_APP_PARAMETERS, its env as ARGOCD_ENV_*), from a
// chart with the values files they name and a registry on loopback: live
// resolution pins what the registry serves, the lock workflow renders from
// the committed lock file without a registry request, the mutable tag pins
// the tag its --set names.
func TestArgoCDDocsApplications(t *testing.T) {
	t.Parallel()
	var apps []map[string]any
	blocks := sectionBlocks(t, filepath.Join(repoRoot(t), "docs", "argocd.md"), "## Argo CD: three workflows", "yaml")
	for _, b := range blocks {
		block := b.text
		if !strings.Contains(block, "kind: Application\n") {
			continue
		}
		var app map[string]any
		if err := yaml.Unmarshal([]byte(block), &app); err != nil {
			t.Fatalf("%s: Application: %v\n%s", b, err, block)
		}
		apps = append(apps, app)
	}
	if len(apps) != 3 {
		t.Fatalf("the Argo CD workflows of docs/argocd.md show %d Applications, want 3", len(apps))
	}

	// The parameters the plugin announces.
	plugin := readYAML(t, "plugin.yaml")
	var announced []string
	for _, p := range dig(t, plugin, "spec", "parameters", "static").([]any) {
		announced = append(announced, p.(map[string]any)["name"].(string))
	}

	reg := testregistry.New(t)
	digests := map[string]string{}
	for _, tag := range []string{"dev", "1.4", "staging"} {
		digests[tag] = pushFixed(t, reg, "shop/web:"+tag, "1").String()
	}
	chart := map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: shop\nversion: 1.0.0\n",
		"values.yaml":         "registry: " + reg.Host() + "\nimage:\n  tag: \"1.4\"\n",
		"values-dev.yaml":     "image:\n  tag: dev\n",
		"values-prod.yaml":    "image:\n  tag: \"1.4\"\n",
		"values-staging.yaml": "replicas: 1\n",
		"templates/web.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: "{{ .Values.registry }}/shop/web:{{ .Values.image.tag }}"
`,
		// What CI committed for the lock workflow.
		"digests.lock": "version: 1\nimages:\n  - reference: " + reg.Host() + "/shop/web:1.4\n    digest: " + digests["1.4"] + "\n",
	}
	sc := newSidecar(t)
	for _, app := range apps {
		name := dig(t, app, "metadata", "name").(string)
		t.Run(name, func(t *testing.T) {
			if dig(t, app, "kind") != "Application" || dig(t, app, "apiVersion") != "argoproj.io/v1alpha1" {
				t.Fatalf("not an Argo CD Application: %v %v", app["apiVersion"], app["kind"])
			}
			for _, f := range []string{"project", "destination"} {
				dig(t, app, "spec", f)
			}
			source := dig(t, app, "spec", "source")
			path := dig(t, source, "path").(string)
			if dig(t, source, "plugin", "name") != "digestpin" {
				t.Fatalf("the Application names plugin %v", dig(t, source, "plugin", "name"))
			}
			pl := dig(t, source, "plugin").(map[string]any)
			var params []map[string]any
			ps, _ := pl["parameters"].([]any)
			for _, p := range ps {
				pm := p.(map[string]any)
				if !slices.Contains(announced, pm["name"].(string)) {
					t.Errorf("parameter %v is not one plugin.yaml announces", pm["name"])
				}
				params = append(params, pm)
			}
			var appEnv []string
			es, _ := pl["env"].([]any)
			for _, e := range es {
				em := e.(map[string]any)
				appEnv = append(appEnv, em["name"].(string)+"="+em["value"].(string))
			}

			repo := filepath.Join(t.TempDir(), "repo")
			for f, body := range chart {
				mkfile(t, filepath.Join(repo, path, f), body)
			}
			reg.ResetCounts()
			argo := []string{
				parameters(t, params...),
				"ARGOCD_APP_NAME=" + name,
				"ARGOCD_APP_NAMESPACE=" + dig(t, app, "spec", "destination", "namespace").(string),
				"ARGOCD_APP_SOURCE_PATH=" + path,
			}
			r := sc.generateWith(t, filepath.Join(repo, path), argo, appEnv...)
			if r.err != nil {
				t.Fatalf("generate: %v\n%s", r.err, r.stderr)
			}
			tag := map[string]string{"shop-dev": "dev", "shop-prod": "1.4", "shop-staging": "staging"}[name]
			want := reg.Host() + "/shop/web:" + tag + "@" + digests[tag]
			if !strings.Contains(r.stdout, "image: \""+want+"\"\n") {
				t.Errorf("the manifests do not pin %s:\n%s", want, r.stdout)
			}
			requests := reg.Total()
			if name == "shop-prod" && requests != 0 {
				t.Errorf("the lock workflow made %d registry requests, want 0 (--lock --frozen)", requests)
			}
			if name != "shop-prod" && requests == 0 {
				t.Errorf("%s made no registry request: it did not resolve the tag", name)
			}
		})
	}
}
