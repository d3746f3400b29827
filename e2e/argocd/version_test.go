//go:build linux

package argocd

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestArgoCDVersion: tools/ requires the Argo CD that e2e/cmpserver
// pins (the Makefile names the cache folder by that one), and the binary
// the tests run is that version.
func TestArgoCDVersion(t *testing.T) {
	versions := map[string]string{}
	for _, dir := range []string{"tools", filepath.Join("..", "cmpserver")} {
		cmd := exec.Command("go", "list", "-m", "-json", "github.com/argoproj/argo-cd/v3")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -m github.com/argoproj/argo-cd/v3 in %s: %v", dir, err)
		}
		var mod struct{ Version string }
		if err := json.Unmarshal(out, &mod); err != nil || mod.Version == "" {
			t.Fatalf("go list -m in %s: no version in %s (%v)", dir, out, err)
		}
		versions[dir] = mod.Version
	}
	want := versions["tools"]
	if got := versions[filepath.Join("..", "cmpserver")]; got != want {
		t.Fatalf("e2e/argocd/tools requires Argo CD %s, e2e/cmpserver %s: want the same", want, got)
	}
	bin := tool(t, "DIGESTPIN_TEST_ARGOCD")
	res := run(nil, nil, filepath.Join(bin, "argocd"), "version", "--client", "--short")
	if res.err != nil || !strings.HasPrefix(strings.TrimSpace(res.stdout), "argocd: "+want+"+") {
		t.Errorf("argocd version --client --short = %q, %v (%s); want argocd: %s+…", res.stdout, res.err, res.stderr, want)
	}
}
