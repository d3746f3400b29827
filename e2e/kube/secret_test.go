//go:build linux

package kube

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSecretChecksum: testdata/secret generates a password into a Secret
// (randAlphaNum) and hashes the Secret's template into checksum/secret
// (sha256sum of its include), the common way to roll pods on a new
// Secret. With deterministic renders, `digestpin template | kubectl apply
// --server-side` and `digestpin install|upgrade`, 10 renders keep the
// password and roll nothing, and a values change rolls the Deployment
// exactly once; the
// control, `helm template` applied, rolls it on every render (a new
// password each time).
func TestSecretChecksum(t *testing.T) {
	t.Parallel()
	r := newRollout(t)
	seed := filepath.Join(t.TempDir(), "seed")
	if err := os.WriteFile(seed, []byte(mustRun(t, nil, nil, r.bin, "seed")), 0o600); err != nil {
		t.Fatal(err)
	}
	chartDir := filepath.Join(repoRoot(t), "e2e", "kube", "testdata", "secret")
	image := "image=" + r.reg.Ref("app:1.0")

	for _, tc := range []struct {
		name string
		// deploy renders and applies release rel into ns, with extra flags.
		deploy func(t *testing.T, first bool, rel, ns string, extra []string)
	}{
		{name: "template", deploy: func(t *testing.T, _ bool, rel, ns string, extra []string) {
			args := append([]string{"template", rel, chartDir, "-n", ns, "--seed-file", seed, "--set", image}, extra...)
			r.c.apply(t, ns, mustRun(t, nil, r.helmHome, r.bin, args...))
		}},
		{name: "upgrade", deploy: func(t *testing.T, first bool, rel, ns string, extra []string) {
			verb := "upgrade"
			if first {
				verb = "install"
			}
			mustRun(t, nil, r.helmHome, r.bin, append([]string{verb, rel, chartDir, "-n", ns, "--seed-file", seed, "--set", image}, extra...)...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := r.c.namespace(t, "secret-"+tc.name)
			rel := "s" + tc.name[:1]
			app := "Deployment/" + rel + "-app"
			var extra []string
			deploy := func(first bool) { tc.deploy(t, first, rel, ns, extra) }
			deploy(true)
			if n := r.c.settle(t, ns).revisions[app]; n != 1 {
				t.Fatalf("%s has %d ReplicaSets after the first deploy, want 1", app, n)
			}
			password := func() string {
				return r.c.kubectlT(t, nil, "get", "secret", rel+"-db", "-n", ns, "-o", "jsonpath={.data.password}")
			}
			first := password()
			repeat(t, r, ns, 10, "10 "+tc.name+"s", func() { deploy(false) })
			if p := password(); p != first || p == "" {
				t.Errorf("the generated password went from %q to %q over 10 %ss, want it kept", first, p, tc.name)
			}
			before := r.c.settle(t, ns)
			extra = []string{"--set", "database=orders"}
			deploy(false)
			after := r.c.settle(t, ns)
			checkMoves(t, "--set database=orders", before, after, app)
			figure(t, "--set database=orders: %s", summary(before, after))
			repeat(t, r, ns, 3, "3 "+tc.name+"s with database=orders", func() { deploy(false) })
		})
	}

	t.Run("control helm template", func(t *testing.T) {
		t.Parallel()
		ns := r.c.namespace(t, "secret-control")
		deploy := func() {
			r.c.apply(t, ns, mustRun(t, nil, r.helmHome, helm4(t), "template", "plain", chartDir, "-n", ns, "--set", image))
		}
		deploy()
		const renders = 3
		start := r.c.settle(t, ns)
		for i := range renders {
			before := r.c.settle(t, ns)
			deploy()
			after := r.c.settle(t, ns)
			if n := newRevisions(before, after)["Deployment/plain-app"]; n != 1 {
				t.Errorf("render %d of helm template: Deployment/plain-app has %d new ReplicaSets, want 1 (a new password each render)", i+2, n)
			}
		}
		figure(t, "%d more renders of helm template: %s", renders, summary(start, r.c.settle(t, ns)))
	})
}
