//go:build linux

package kube

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDeploy: `digestpin install|upgrade` and, through the Helm 4.3.1 CLI
// with the root plugin, `helm digestpin install|upgrade`, into the real
// control plane: testdata/generated (a generated certificate and password
// hashed into checksum/config) rolls nothing over 10 upgrades and exactly
// once on a values change or a re-pushed tag; the rollout chart rolls
// exactly the users of each re-pushed tag, once each.
func TestDeploy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		release string
		command func(t *testing.T, r *rollout) []string
	}{
		{name: "digestpin", release: "dp", command: func(t *testing.T, r *rollout) []string { return []string{r.bin} }},
		{name: "helm digestpin", release: "hdp", command: func(t *testing.T, r *rollout) []string {
			h4 := helm4(t)
			installPlugin(t, r, h4, repoRoot(t), "plugin.yaml", "scripts/install-binary.sh")
			return []string{h4, "digestpin"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRollout(t)
			cmd := tc.command(t, r)
			seed := filepath.Join(t.TempDir(), "seed")
			if err := os.WriteFile(seed, []byte(mustRun(t, nil, nil, r.bin, "seed")), 0o600); err != nil {
				t.Fatal(err)
			}
			run := func(args ...string) { mustRun(t, nil, r.helmHome, cmd[0], append(cmd[1:], args...)...) }

			// testdata/generated.
			ns := r.c.namespace(t, "deploy-"+tc.release)
			generated := filepath.Join(repoRoot(t), "testdata", "generated")
			webhook := "Deployment/" + tc.release + "-webhook"
			var extra []string
			deploy := func(verb string) {
				run(append([]string{verb, tc.release, generated, "-n", ns, "--seed-file", seed, "--set", "image=" + r.reg.Ref("app:1.0")}, extra...)...)
			}
			deploy("install")
			if n := r.c.settle(t, ns).revisions[webhook]; n != 1 {
				t.Fatalf("%s has %d ReplicaSets after install, want 1", webhook, n)
			}
			repeat(t, r, ns, 10, "10 upgrades", func() { deploy("upgrade") })
			before := r.c.settle(t, ns)
			extra = []string{"--set", "clusterDomain=x"}
			deploy("upgrade")
			after := r.c.settle(t, ns)
			checkMoves(t, "upgrade --set clusterDomain=x", before, after, webhook)
			figure(t, "upgrade --set clusterDomain=x: %s", summary(before, after))
			before = after
			d := r.push(t, "app:1.0")
			deploy("upgrade")
			after = r.c.settle(t, ns)
			checkMoves(t, "app:1.0 re-pushed", before, after, webhook)
			checkRuns(t, after, d, webhook)
			figure(t, "app:1.0 re-pushed: %s", summary(before, after))

			// The rollout chart: each image's users, and only those.
			ns = r.c.namespace(t, "deploy-"+tc.release+"-chart")
			upgrade := func(verb string) {
				run(append([]string{verb, "demo", chart(t), "-n", ns, "--seed-file", seed}, r.sets()...)...)
			}
			upgrade("install")
			checkFirst(t, r.c.settle(t, ns))
			repeat(t, r, ns, 3, "3 upgrades of the rollout chart", func() { upgrade("upgrade") })
			moveEach(t, r, ns, func() { upgrade("upgrade") })
		})
	}
}
