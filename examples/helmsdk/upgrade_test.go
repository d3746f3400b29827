package helmsdk_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"

	"github.com/digestpin/digestpin/examples/helmsdk"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/postrender"
)

// TestSteadyUpgrade runs what the README shows for helm upgrade, through
// Helm's own install, upgrade and get actions: the release's stored
// manifest (what `helm get manifest` prints) is --previous, a client-only
// render of the same chart and values (`helm template --no-hooks`) is
// --volatile-from. The cluster is Helm's printing fake client and the
// release storage Helm's memory driver: what is tested is what Helm
// stores and hands the post-renderer, not what a cluster does with it.
// The chart generates a certificate and hashes it into checksum/config.
func TestSteadyUpgrade(t *testing.T) {
	reg := testregistry.New(t)
	digest := reg.PushImage(t, "steady/app:1")
	chrt, err := loader.Load("../../testdata/steady/webhook")
	if err != nil {
		t.Fatal(err)
	}
	vals := func(replicas int) map[string]any {
		return map[string]any{"registry": reg.Host(), "replicas": replicas}
	}

	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	}
	dir := t.TempDir()
	second, previous := filepath.Join(dir, "second.yaml"), filepath.Join(dir, "previous.yaml")
	steady := func(t *testing.T, replicas int) *postrender.PostRenderer {
		t.Helper()
		// helm template --no-hooks with the same values.
		m, err := helmsdk.Render("../../testdata/steady/webhook", "r", vals(replicas), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(second, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		// helm get manifest r.
		rel, err := action.NewGet(cfg).Run("r")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(previous, []byte(rel.Manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		return &postrender.PostRenderer{Options: pin.Options{VolatileFrom: second, Previous: previous}}
	}
	upgrade := func(t *testing.T, replicas int) string {
		t.Helper()
		u := action.NewUpgrade(cfg)
		u.Namespace = "default"
		u.PostRenderer = steady(t, replicas).WithContext(context.Background())
		rel, err := u.Run("r", chrt, vals(replicas))
		if err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		return rel.Manifest
	}

	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = "r", "default"
	install.PostRenderer = &postrender.PostRenderer{}
	rel, err := install.Run(chrt, vals(1))
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	first := rel.Manifest
	if !strings.Contains(first, "@"+digest.String()) {
		t.Fatalf("the installed manifest is not pinned:\n%s", first)
	}

	if got := upgrade(t, 1); got != first {
		t.Errorf("an upgrade with nothing real changed stored another manifest:\n%s\nwant the installed one:\n%s", got, first)
	}
	if got := upgrade(t, 2); got == first || !strings.Contains(got, "replicas: 2") {
		t.Errorf("an upgrade to replicas 2 stored\n%s\nwant a new manifest with replicas: 2", got)
	}
	moved := reg.PushImage(t, "steady/app:1")
	if got := upgrade(t, 2); !strings.Contains(got, "@"+moved.String()) {
		t.Errorf("an upgrade after the image moved stored\n%s\nwant the new digest %s", got, moved)
	}
}
