package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// TestAuthCacheWarmRun runs digestpin on a registry behind a bearer
// token server that wants a user's credentials (from the docker config),
// as Docker Hub's and GHCR's private images are, with a cache folder
// whose resolutions are past the TTL by the next run: the first run
// pings, asks for a token and sends its HEADs; the second sends its
// HEADs alone; one with another user's credentials asks for a token of
// its own; and no message nor the report shows a token or the password.
func TestAuthCacheWarmRun(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	var images []string
	for i := range 5 {
		im := fmt.Sprintf("team/app%d:1", i)
		reg.PushImage(t, im)
		images = append(images, reg.Ref(im))
	}
	ts := testregistry.NewTokenServer(t, "", "")
	reg.Handle(ts.Guard())
	in := gen.Deployments("", images...)
	cache := t.TempDir()
	config := func(user, password string) string {
		dir := t.TempDir()
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
		cfg := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, reg.Host(), auth)
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	bob, carol := config("bob", "hunter22"), config("carol", "s3cret-carol")

	type counts struct{ Pings, Tokens, Heads int }
	run := func(dockerConfig string) counts {
		t.Helper()
		reg.ResetCounts()
		tokens := ts.Exchanges()
		report := filepath.Join(t.TempDir(), "report.json")
		r := runCmd(t, t.TempDir(), in, []string{"DOCKER_CONFIG=" + dockerConfig, "HOME=" + t.TempDir()},
			bin, "-v", "--cache-dir", cache, "--cache-ttl", "1ns", "--report", report)
		if r.err != nil {
			t.Fatalf("digestpin: %v\n%s", r.err, r.stderr)
		}
		if n := strings.Count(r.stdout, "@sha256:"); n != len(images) {
			t.Errorf("%d images pinned, want %d", n, len(images))
		}
		rep, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"tok-", "hunter22", "s3cret-carol"} {
			if strings.Contains(r.stderr, secret) || strings.Contains(r.stdout, secret) || strings.Contains(string(rep), secret) {
				t.Errorf("the output, the log or the report shows %q:\n%s", secret, r.stderr)
			}
		}
		return counts{reg.Count("GET ping"), ts.Exchanges() - tokens, reg.Count("HEAD manifests")}
	}
	first := run(bob)
	if first.Pings != 1 || first.Tokens < 1 || first.Heads != len(images) {
		t.Errorf("cold run: requests %+v, want a ping, a token request or more, %d HEADs", first, len(images))
	}
	if diff := cmp.Diff(counts{Heads: len(images)}, run(bob)); diff != "" {
		t.Errorf("warm run: requests (-want +got):\n%s", diff)
	}
	// Another user: the ping answer serves, bob's tokens do not.
	if got := run(carol); got.Pings != 0 || got.Tokens < 1 || got.Heads != len(images) {
		t.Errorf("another user's run: requests %+v, want no ping, a token request or more, %d HEADs", got, len(images))
	}
	if diff := cmp.Diff(counts{Heads: len(images)}, run(carol)); diff != "" {
		t.Errorf("another user's warm run: requests (-want +got):\n%s", diff)
	}
	// The cache folder is the user's alone.
	des, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range des {
		if fi, err := d.Info(); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", d.Name(), fi.Mode(), err)
		}
	}
}
