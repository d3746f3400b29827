//go:build linux

package kube

import (
	"os"
	"path/filepath"
	"testing"
)

// The Deployment of testdata/generated: its checksum/config hashes a
// certificate and a password the chart generates.
const webhook = "Deployment/gen-webhook"

// TestTemplateApply: `digestpin template | kubectl apply --server-side`
// with testdata/generated, whose Deployment hashes a generated certificate
// and password into checksum/config (the shape of charts such as k8tz):
// with deterministic renders, 10 renders roll nothing and a values change
// or a re-pushed tag rolls it exactly once; `helm template` of the same
// chart rolls it on every render (the control).
func TestTemplateApply(t *testing.T) {
	t.Parallel()
	r := newRollout(t)
	seed := filepath.Join(t.TempDir(), "seed")
	if err := os.WriteFile(seed, []byte(mustRun(t, nil, nil, r.bin, "seed")), 0o600); err != nil {
		t.Fatal(err)
	}
	generated := filepath.Join(repoRoot(t), "testdata", "generated")
	image := "image=" + r.reg.Ref("app:1.0")

	ns := r.c.namespace(t, "template")
	var extra []string
	deploy := func() {
		args := append([]string{"template", "gen", generated, "-n", ns, "--seed-file", seed, "--set", image}, extra...)
		r.c.apply(t, ns, mustRun(t, nil, r.helmHome, r.bin, args...))
	}
	deploy()
	first := r.c.settle(t, ns)
	if n := first.revisions[webhook]; n != 1 {
		t.Fatalf("%s has %d ReplicaSets after the first apply, want 1", webhook, n)
	}
	repeat(t, r, ns, 10, "10 renders", deploy)

	before := r.c.settle(t, ns)
	extra = []string{"--set", "clusterDomain=x"}
	deploy()
	after := r.c.settle(t, ns)
	checkMoves(t, "--set clusterDomain=x", before, after, webhook)
	figure(t, "--set clusterDomain=x: %s", summary(before, after))
	repeat(t, r, ns, 3, "3 renders with clusterDomain=x", deploy)

	before = after
	d := r.push(t, "app:1.0")
	deploy()
	after = r.c.settle(t, ns)
	checkMoves(t, "app:1.0 re-pushed", before, after, webhook)
	checkRuns(t, after, d, webhook)
	figure(t, "app:1.0 re-pushed: %s", summary(before, after))

	t.Run("control helm template", func(t *testing.T) {
		ns := r.c.namespace(t, "template-control")
		deploy := func() {
			r.c.apply(t, ns, mustRun(t, nil, r.helmHome, helm4(t), "template", "plain", generated, "-n", ns, "--set", image))
		}
		deploy()
		const renders = 3
		start := r.c.settle(t, ns)
		for i := range renders {
			before := r.c.settle(t, ns)
			deploy()
			after := r.c.settle(t, ns)
			const plain = "Deployment/plain-webhook"
			if n := newRevisions(before, after)[plain]; n != 1 {
				t.Errorf("render %d of helm template: %s has %d new ReplicaSets, want 1 (a new certificate each render)", i+2, plain, n)
			}
		}
		figure(t, "%d more renders of helm template: %s", renders, summary(start, r.c.settle(t, ns)))
	})
}
