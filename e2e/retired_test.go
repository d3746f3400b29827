package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// retiredMessage is digestpin's line for a run that used the retired
// two-render mode; subject names what the person wrote, with its verb
// ("--previous was").
func retiredMessage(subject string) string {
	return "digestpin: error: " + subject + ` retired after 0.1.0: two renders cannot tell a certificate, hash or ciphertext made from new input from one made from new randomness, so it could keep a real change; render with "digestpin template NAME CHART --seed-file FILE" instead (docs/deterministic.md)` + "\n"
}

// retiredFlags are the flags of the retired two-render mode, each with a
// value as the README showed it, and the variable that sets it.
var retiredFlags = []struct{ flag, value, env string }{
	{"--volatile-from", "/tmp/second.yaml", "DIGESTPIN_VOLATILE_FROM"},
	{"--previous", "rendered/web.yaml", "DIGESTPIN_PREVIOUS"},
	{"--state-dir", "/var/cache/digestpin-state", "DIGESTPIN_STATE_DIR"},
	{"--state-key", "prod/shop/web", "DIGESTPIN_STATE_KEY"},
	{"--state-store", "redis://argocd-redis:6379/0", "DIGESTPIN_STATE_STORE"},
	{"--state-ttl", "168h", "DIGESTPIN_STATE_TTL"},
}

// TestRetiredFlags runs the binary with each retired flag and with each
// variable: exit 2, nothing on stdout, and one line on stderr that names
// the flag or the variable.
func TestRetiredFlags(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	in, err := os.ReadFile(filepath.Join(repoRoot(t), "testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range retiredFlags {
		for _, tc := range []struct {
			desc, subject string
			args, env     []string
		}{
			{desc: f.flag, subject: f.flag, args: []string{f.flag, f.value}},
			{desc: f.flag + "=", subject: f.flag, args: []string{f.flag + "=" + f.value}},
			{desc: f.env, subject: f.env, env: []string{f.env + "=" + f.value}},
		} {
			t.Run(tc.desc, func(t *testing.T) {
				r := runCmd(t, t.TempDir(), in, tc.env, bin, tc.args...)
				if got := exitStatus(r.err); got != 2 {
					t.Errorf("exit status %d, want 2", got)
				}
				if r.stdout != "" {
					t.Errorf("stdout = %q, want nothing", r.stdout)
				}
				if want := retiredMessage(tc.subject + " was"); r.stderr != want {
					t.Errorf("stderr =\n%s\nwant\n%s", r.stderr, want)
				}
			})
		}
	}
}

// TestRetiredHelmPostRenderer passes a retired flag to digestpin as Helm
// 3's post-renderer, as the README showed: helm fails, prints no
// manifest, and its error carries digestpin's line.
func TestRetiredHelmPostRenderer(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	chart := filepath.Join(repoRoot(t), "testdata", "chart")
	home := helmHome(t, t.TempDir())
	r := runHelm(t, home, helm3(t), "template", "demo", chart, "--set", "image.app="+reg.Ref("app:1.0"),
		"--post-renderer", bin, "--post-renderer-args", "--volatile-from=/tmp/second.yaml", "--post-renderer-args", "--previous=rendered/web.yaml")
	if r.err == nil || r.stdout != "" {
		t.Errorf("helm template: %v, stdout %q; want a failure and nothing on stdout", r.err, r.stdout)
	}
	if want := strings.TrimSuffix(retiredMessage("--volatile-from and --previous were"), "\n"); !strings.Contains(r.stderr, want) {
		t.Errorf("helm's stderr =\n%s\nwant it to hold\n%s", r.stderr, want)
	}
}

// TestRetiredArgoCD runs the Argo CD plugin, as the sidecar does, with
// each setting of the retired two-render mode: the Application's plugin
// env DIGESTPIN_STEADY, the sidecar's DIGESTPIN_CMP_STATE_DIR (which the
// installation manifests used to set) and a retired flag's variable on
// the sidecar. Each fails the generation with exit 2, nothing on stdout
// and one line naming it; DIGESTPIN_STEADY=false, one render, is what the
// plugin does now and gives the manifests.
func TestRetiredArgoCD(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	digests := pushShop(t, reg)
	src := argoApp(t, registryValues(reg))
	values := "VALUES_FILES=values-e2e.yaml"
	sc := newSidecar(t)
	plain := sc.generate(t, src, values)
	if plain.err != nil || !strings.Contains(plain.stdout, "@"+digests["shop/web:1.4"].String()) {
		t.Fatalf("generate: %v, stdout without the digest of shop/web:1.4\n%s", plain.err, plain.stderr)
	}
	for _, tc := range []struct {
		desc    string
		sidecar []string // the sidecar's own variables
		app     []string // the Application's plugin env
		subject string   // "" for a generation that works
	}{
		{desc: "DIGESTPIN_STEADY=true", app: []string{"DIGESTPIN_STEADY=true"}, subject: `the Argo CD plugin env DIGESTPIN_STEADY="true" was`},
		{desc: "DIGESTPIN_STEADY=false", app: []string{"DIGESTPIN_STEADY=false"}},
		{desc: "DIGESTPIN_CMP_STATE_DIR", sidecar: []string{"DIGESTPIN_CMP_STATE_DIR=/var/cache/digestpin-state"}, subject: `the Argo CD sidecar's DIGESTPIN_CMP_STATE_DIR="/var/cache/digestpin-state" was`},
		{desc: "DIGESTPIN_STATE_STORE", sidecar: []string{"DIGESTPIN_STATE_STORE=redis://argocd-redis:6379/0"}, subject: "DIGESTPIN_STATE_STORE was"},
		{desc: "DIGESTPIN_STATE_TTL", sidecar: []string{"DIGESTPIN_STATE_TTL=168h"}, subject: "DIGESTPIN_STATE_TTL was"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := newSidecar(t).generateWith(t, src, tc.sidecar, append([]string{values}, tc.app...)...)
			if tc.subject == "" {
				if r.err != nil || r.stdout != plain.stdout {
					t.Errorf("generate: %v, stdout differs from a generation without %s\n%s", r.err, tc.desc, r.stderr)
				}
				return
			}
			if got := exitStatus(r.err); got != 2 {
				t.Errorf("exit status %d, want 2", got)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if want := retiredMessage(tc.subject); r.stderr != want {
				t.Errorf("stderr =\n%s\nwant\n%s", r.stderr, want)
			}
		})
	}
}

// TestRetiredCIStep runs the CI step with a retired variable in the job's
// environment: the step fails (exit 1: digestpin failed), with
// digestpin's line, and leaves the lock and output files as they were.
func TestRetiredCIStep(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	args := []string{"--output", "manifests.yaml", ".", "--values", "values-e2e.yaml"}
	if r := runCmd(t, chart, nil, sc.env(), step, args...); r.err != nil {
		t.Fatalf("recording: %v\n%s", r.err, r.stderr)
	}
	files := map[string][]byte{}
	for _, f := range []string{"digests.lock", "manifests.yaml"} {
		b, err := os.ReadFile(filepath.Join(chart, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
	}
	r := runCmd(t, chart, nil, append(sc.env(), "DIGESTPIN_PREVIOUS=manifests.yaml"), step, args...)
	if got := exitStatus(r.err); got != 1 {
		t.Errorf("exit status %d, want 1\n%s", got, r.stderr)
	}
	if want := retiredMessage("DIGESTPIN_PREVIOUS was"); !strings.Contains(r.stderr, want) {
		t.Errorf("stderr =\n%s\nwant it to hold\n%s", r.stderr, want)
	}
	for f, want := range files {
		if b, err := os.ReadFile(filepath.Join(chart, f)); err != nil || string(b) != string(want) {
			t.Errorf("%s changed (%v)", f, err)
		}
	}
}
