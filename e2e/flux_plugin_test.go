package e2e

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// fluxPluginManifest is the Flux CLI plugin manifest make release writes.
const fluxPluginManifest = "digestpin.flux-plugin.yaml"

// fluxPlugin is the part of Flux's plugin manifest (cli.fluxcd.io/v1beta1
// Plugin, flux2's pkg/plugin) that flux plugin install reads.
type fluxPlugin struct {
	APIVersion, Kind, Name, Bin string
	Versions                    []struct {
		Version   string
		Platforms []struct {
			OS, Arch, URL, Checksum string
			ExtractPath             string `json:"extractPath"`
		}
	}
}

// TestFluxPluginManifest: the manifest of make release names this
// machine's binary archive by its release URL, with the checksum
// SHA256SUMS gives it, and an extractPath the archive holds; the binary
// extracted as flux plugin install does (renamed to the bin) runs
// digestpin flux's commands.
func TestFluxPluginManifest(t *testing.T) {
	t.Parallel()
	dir, version := releaseFiles(t)
	binArchive, _, _ := releaseNames(version)
	b, err := os.ReadFile(filepath.Join(dir, fluxPluginManifest))
	if err != nil {
		t.Fatal(err)
	}
	var m fluxPlugin
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		// Strict against the fields flux reads; the others are text.
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
	}
	if m.APIVersion != "cli.fluxcd.io/v1beta1" || m.Kind != "Plugin" || m.Name != "digestpin" || m.Bin != "flux-digestpin" {
		t.Errorf("manifest head %+v", m)
	}
	if len(m.Versions) != 1 || m.Versions[0].Version != version || len(m.Versions[0].Platforms) != 1 {
		t.Fatalf("manifest versions %+v, want %s with this machine's one platform", m.Versions, version)
	}
	p := m.Versions[0].Platforms[0]
	sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
	if p.OS != runtime.GOOS || p.Arch != runtime.GOARCH ||
		p.URL != "https://github.com/digestpin/digestpin/releases/download/v"+version+"/"+binArchive ||
		p.Checksum != "sha256:"+sums[binArchive] || p.Checksum != "sha256:"+sha256File(t, filepath.Join(dir, binArchive)) {
		t.Errorf("platform %+v, want %s with checksum sha256:%s", p, binArchive, sums[binArchive])
	}
	tmp := t.TempDir()
	files := untar(t, filepath.Join(dir, binArchive), tmp)
	found := false
	for _, f := range files {
		found = found || f == p.ExtractPath
	}
	if !found {
		t.Fatalf("extractPath %q is not in %s: %q", p.ExtractPath, binArchive, files)
	}
	plugins := t.TempDir()
	plugin := filepath.Join(plugins, m.Bin)
	if err := os.Rename(filepath.Join(tmp, p.ExtractPath), plugin); err != nil {
		t.Fatal(err)
	}
	if r := runCmd(t, plugins, nil, nil, plugin, "pin", "--help"); !strings.Contains(r.stderr, "Usage: digestpin flux pin") {
		t.Errorf("flux-digestpin pin --help = %v:\n%s", r.err, r.stderr)
	}
}

// TestFluxPluginName: the full build run as flux-digestpin, the name
// flux plugin install gives it, takes its arguments as digestpin flux's,
// as flux runs `flux digestpin ARGS` (flux-digestpin ARGS).
func TestFluxPluginName(t *testing.T) {
	t.Parallel()
	full := filepath.Join(filepath.Dir(digestpinBin(t)), "digestpin-helm")
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plugin := filepath.Join(dir, "flux-digestpin")
	if err := os.WriteFile(plugin, b, 0o755); err != nil { //nolint:gosec // an executable of the test
		t.Fatal(err)
	}
	for _, tc := range []struct{ args, want string }{
		{"pin --help", "Usage: digestpin flux pin"},
		{"push --help", "Usage: digestpin flux push"},
		{"--help", "digestpin flux push oci://"},
	} {
		if r := runCmd(t, dir, nil, nil, plugin, strings.Fields(tc.args)...); !strings.Contains(r.stderr, tc.want) {
			t.Errorf("flux-digestpin %s = %v, stderr:\n%s", tc.args, r.err, r.stderr)
		}
	}
	if r := runCmd(t, dir, nil, nil, plugin, "--version"); !strings.HasPrefix(r.stdout, "digestpin ") {
		t.Errorf("flux-digestpin --version = %q, %v", r.stdout, r.err)
	}
	reg := testregistry.New(t)
	r := runCmd(t, dir, []byte("kind: ConfigMap\n"), nil, plugin, "push", "oci://"+reg.Ref("shop/manifests:1"), "--path", "-")
	if r.err != nil || !strings.Contains(r.stdout, ": pushed sha256:") {
		t.Errorf("flux-digestpin push = %v\n%s%s", r.err, r.stdout, r.stderr)
	}
}
