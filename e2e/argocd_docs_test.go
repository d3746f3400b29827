package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// docsSection returns the section of docs/argocd.md that begins with the
// heading line head, up to the next heading of the same level.
func docsSection(t *testing.T, head string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "argocd.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+head+"\n")
	if i < 0 {
		t.Fatalf("docs/argocd.md has no heading %q", head)
	}
	s = s[i+len(head)+2:]
	level := head[:strings.Index(head, " ")+1]
	if j := strings.Index(s, "\n"+level); j >= 0 {
		s = s[:j]
	}
	return s
}

// yamlBlocks returns the ```yaml blocks of a Markdown text, each without
// the indentation of its fence (a block in a list item).
func yamlBlocks(text string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?ms)^( *)```yaml\n(.*?)^ *```$").FindAllStringSubmatch(text, -1) {
		var b strings.Builder
		for _, l := range strings.SplitAfter(m[2], "\n") {
			b.WriteString(strings.TrimPrefix(l, m[1]))
		}
		out = append(out, b.String())
	}
	return out
}

// TestArgoCDDocsApplications reads the three Applications of docs/argocd.md's
// Argo CD workflows and generates each one's manifests as the sidecar does
// (its parameters as ARGOCD_APP_PARAMETERS, its env as ARGOCD_ENV_*), from a
// chart with the values files they name and a registry on loopback: live
// resolution pins what the registry serves, the lock workflow renders from
// the committed lock file without a registry request, the mutable tag pins
// the tag its --set names.
func TestArgoCDDocsApplications(t *testing.T) {
	var apps []map[string]any
	for _, block := range yamlBlocks(docsSection(t, "## Argo CD: three workflows")) {
		if !strings.Contains(block, "kind: Application\n") {
			continue
		}
		var app map[string]any
		if err := yaml.Unmarshal([]byte(block), &app); err != nil {
			t.Fatalf("docs/argocd.md Application: %v\n%s", err, block)
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
