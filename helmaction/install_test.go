package helmaction

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/cli"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/yaml"
)

// TestNewConfigurationMemory: HELM_DRIVER=memory starts with the releases
// of HELM_MEMORY_DRIVER_DATA's files, in the settings' namespace, and a
// Kubernetes client that changes nothing, as Helm's CLI does; a file that
// is missing or not a list of releases is an error naming it.
func TestNewConfigurationMemory(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	rel := []*release.Release{{Name: "web", Namespace: "prod", Version: 3, Info: &release.Info{Status: rcommon.StatusDeployed}, Manifest: "---\nkind: ConfigMap\n"}}
	b, err := yaml.Marshal(rel)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "releases.yaml")
	if err := os.WriteFile(data, b, 0o644); err != nil {
		t.Fatal(err)
	}
	settings := cli.New()
	settings.SetNamespace("prod")
	cfg, err := NewConfiguration(settings, "memory", ":"+data+":", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.KubeClient.(*kubefake.PrintingKubeClient); !ok {
		t.Errorf("KubeClient is a %T, want Helm's printing fake", cfg.KubeClient)
	}
	last, err := cfg.Releases.Last("web")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := last.(*release.Release); r == nil || r.Version != 3 || r.Manifest != rel[0].Manifest {
		t.Errorf("Last(web) = %+v, want the release of the file", last)
	}

	for _, tc := range []struct {
		name, driver, data, want string
	}{
		{"missing file", "memory", filepath.Join(dir, "absent.yaml"), "HELM_MEMORY_DRIVER_DATA"},
		{"not releases", "memory", writeFile(t, dir, "bad.yaml", "name: web\n"), "bad.yaml"},
		{"unknown driver", "floppy", "", `HELM_DRIVER "floppy"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewConfiguration(settings, tc.driver, tc.data, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewConfiguration() error = %v, want one with %q", err, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
