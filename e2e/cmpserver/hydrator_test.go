package cmpserver

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
)

// hydratorExample reads examples/argocd/source-hydrator.yaml: the
// ConfigMap that enables the hydrator, then the Application, each decoded
// strictly (an unknown field fails), the Application into Argo CD
// v3.3.0's own type.
func hydratorExample(t *testing.T) (data map[string]string, app v1alpha1.Application) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "argocd", "source-hydrator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("the example has %d documents, want the ConfigMap and the Application", len(docs))
	}
	var cm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &cm); err != nil {
		t.Fatalf("the example's ConfigMap: %v", err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Metadata.Name != "argocd-cmd-params-cm" || cm.Metadata.Namespace != "argocd" {
		t.Errorf("the example's first document is %s %s %s/%s, want the ConfigMap argocd/argocd-cmd-params-cm", cm.APIVersion, cm.Kind, cm.Metadata.Namespace, cm.Metadata.Name)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &app); err != nil {
		t.Fatalf("the example's Application (Argo CD v3.3.0's type): %v", err)
	}
	return cm.Data, app
}

// TestSourceHydratorExample checks the source hydrator example and runs
// its dry source through argocd-cmp-server as the hydrator asks for it:
// the plugin, the chart folder, its parameters and env as the example
// gives them, with the chart that generates a CA, a certificate and
// passwords (testdata/generated) and a committed lock file. No registry
// exists: every generation pins from the lock file alone, and gives the
// same bytes, again and on another server with the same seed (another
// repo-server replica), so that the hydrator commits nothing new for the
// same dry commit. An image missing from the lock fails the hydration
// naming it, rather than ask a registry.
func TestSourceHydratorExample(t *testing.T) {
	data, example := hydratorExample(t)
	if data["hydrator.enabled"] != "true" {
		t.Errorf("the ConfigMap sets hydrator.enabled to %q, want \"true\"", data["hydrator.enabled"])
	}
	h := example.Spec.SourceHydrator
	if h == nil || h.DrySource.Plugin == nil || h.DrySource.Plugin.Name != pluginName {
		t.Fatalf("the example's sourceHydrator %+v does not name the plugin %s in drySource", h, pluginName)
	}
	if example.Spec.Source != nil || len(example.Spec.Sources) > 0 {
		t.Error("the example has a source besides sourceHydrator")
	}
	env := map[string]string{}
	for _, e := range h.DrySource.Plugin.Env {
		env[e.Name] = e.Value
	}
	if env["DIGESTPIN_LOCK"] == "" {
		t.Error("the example's plugin env has no DIGESTPIN_LOCK: hydration would ask a registry")
	}
	for _, bad := range []string{"DIGESTPIN_CACHE_TTL", "DIGESTPIN_CHECK", "DIGESTPIN_FROZEN"} {
		if _, ok := env[bad]; ok {
			t.Errorf("the example's plugin env sets %s", bad)
		}
	}
	// The hydrated branch and folder as the guide asks, and as the CRD's
	// pattern for syncSource.path allows.
	if !strings.HasPrefix(h.SyncSource.TargetBranch, "environments/") || h.SyncSource.TargetBranch == h.DrySource.TargetRevision {
		t.Errorf("syncSource.targetBranch %q: want a branch of its own under environments/", h.SyncSource.TargetBranch)
	}
	if p := h.SyncSource.Path; !regexp.MustCompile(`^.{2,}|[^./]$`).MatchString(p) || p == h.DrySource.Path {
		t.Errorf("syncSource.path %q: want a folder of its own, not the repository's root", p)
	}

	// The dry commit: the chart, its values file, the lock file CI
	// committed (the chart's image; no registry runs anywhere).
	const image = "127.0.0.1:5000/app:1.0"
	digest := "sha256:" + strings.Repeat("5e", 32)
	repo := filepath.Join(t.TempDir(), "repo")
	chart := filepath.Join(repo, h.DrySource.Path)
	if err := os.CopyFS(chart, os.DirFS(filepath.Join(repoRoot(t), "testdata", "generated"))); err != nil {
		t.Fatal(err)
	}
	lock := func(ref string) {
		t.Helper()
		body := "version: 1\nimages:\n  - reference: " + ref + "\n    digest: " + digest + "\n"
		if err := os.WriteFile(filepath.Join(chart, env["DIGESTPIN_LOCK"]), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lock(image)
	for _, p := range h.DrySource.Plugin.Parameters {
		if p.Name != "values-files" || p.OptionalArray == nil {
			continue
		}
		for _, f := range p.Array {
			if err := os.WriteFile(filepath.Join(chart, f), []byte("title: Shop (prod)\nimage: "+image+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	app := shopApp(t)
	app.name, app.namespace = example.Name, example.Spec.Destination.Namespace
	app.repoURL, app.targetRevision, app.path = h.DrySource.RepoURL, h.DrySource.TargetRevision, h.DrySource.Path
	app.plugin = h.DrySource.Plugin

	seed := seedText(t)
	startServerWith(t, serverOptions{seeds: map[string]string{"seed": seed}})
	first, objs, err := app.generate(t, repo)
	if err != nil {
		t.Fatalf("hydrating the dry source: %v", err)
	}
	d := find(objs, "Deployment", "shop-webhook")
	if d == nil {
		t.Fatalf("no Deployment shop-webhook among %d objects", len(objs))
	}
	if got := strings.Join(first, "\n"); !strings.Contains(got, image+"@"+digest) {
		t.Errorf("the hydrated manifests do not pin %s to the lock file's %s:\n%s", image, digest, got)
	}
	again, _, err := app.generate(t, repo)
	if err != nil {
		t.Fatalf("hydrating again: %v", err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("the same dry commit hydrates to other manifests (-first +again):\n%s", diff)
	}
	startServerWith(t, serverOptions{seeds: map[string]string{"seed": seed}})
	other, _, err := app.generate(t, repo)
	if err != nil {
		t.Fatalf("hydrating on another server: %v", err)
	}
	if diff := cmp.Diff(first, other); diff != "" {
		t.Errorf("another replica with the same seed hydrates to other manifests (-first +other):\n%s", diff)
	}

	// A lock file without the chart's image: frozen, so the hydration
	// fails naming it.
	lock("127.0.0.1:5000/other:1.0")
	if _, _, err := app.generate(t, repo); err == nil || !strings.Contains(err.Error(), image) {
		t.Errorf("hydrating with the image missing from the lock file: %v; want a failure naming %s", err, image)
	}
}
