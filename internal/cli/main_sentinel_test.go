package cli

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// TestCredentialsNeverPrinted runs the whole command at its most verbose
// (-v, --log-file, --report) with a sentinel password in the docker
// config, against loopback registries that require it: one that serves
// the image, and one that echoes the Authorization header it got in an
// error answer. The sentinel and its base64 form must appear in none of
// stdout, stderr, the log file and the report.
func TestCredentialsNeverPrinted(t *testing.T) {
	const user, sentinel = "sentinel-user", "SENTINEL-pa55w0rd-PLUGH"
	ok := testregistry.New(t)
	ok.PushImage(t, "app:1")
	ok.Handle(testregistry.BasicAuth(user, sentinel))
	echo := testregistry.New(t)
	echo.PushImage(t, "app:1")
	echo.Handle(testregistry.BasicAuth(user, sentinel))
	echo.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			return false
		}
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return true
		}
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "denied: you sent %q", r.Header.Get("Authorization"))
		return true
	})

	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + sentinel))
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("DOCKER_CONFIG", dir)
	cfg := fmt.Sprintf(`{"auths": {%q: {"auth": %q}, %q: {"auth": %q}}}`, ok.Host(), auth, echo.Host(), auth)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := []string{sentinel, auth, base64.StdEncoding.EncodeToString([]byte(sentinel))}

	for _, tc := range []struct {
		desc    string
		reg     *testregistry.Registry
		wantErr bool
	}{
		{desc: "a successful run", reg: ok},
		{desc: "a registry that echoes the credentials", reg: echo, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "digestpin.log")
			report := filepath.Join(t.TempDir(), "report.json")
			in := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: app\n    image: " + tc.reg.Ref("app:1") + "\n"
			stdout, stderr, err := runIn(t, in, "-v", "--log-file", logFile, "--report", report, "--request-timeout", "10s")
			if (err != nil) != tc.wantErr {
				t.Fatalf("run() = %v, want error %v; stderr:\n%s", err, tc.wantErr, stderr)
			}
			// The test can fail: the run did authenticate, and said so.
			if !tc.wantErr && !strings.Contains(stdout, "@sha256:") {
				t.Errorf("run() did not pin the image behind basic auth:\n%s", stdout)
			}
			if tc.wantErr && !strings.Contains(stderr, "[REDACTED]") {
				t.Errorf("the echoed header did not reach stderr, so the test proves nothing:\n%s", stderr)
			}
			outputs := map[string]string{"stdout": stdout, "stderr": stderr}
			for what, f := range map[string]string{"log file": logFile, "report": report} {
				b, err := os.ReadFile(f)
				if err != nil && !(tc.wantErr && what == "report" && os.IsNotExist(err)) {
					t.Fatalf("reading the %s: %v", what, err)
				}
				outputs[what] = string(b)
			}
			if outputs["log file"] == "" || !strings.Contains(outputs["log file"], tc.reg.Host()) {
				t.Errorf("the log file does not name the registry: %q", outputs["log file"])
			}
			for what, text := range outputs {
				for _, s := range secrets {
					if strings.Contains(text, s) {
						t.Errorf("the %s holds a credential (%.10s…):\n%s", what, s, text)
					}
				}
			}
		})
	}
}
