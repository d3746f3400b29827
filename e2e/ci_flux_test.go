//go:build unix

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCIStepFlux runs the CI step's mode flux (digestpin-ci.sh, as the
// Action and the GitLab template run it) on a HelmRelease of the GitOps
// repository's chart: it writes the digests into the HelmRelease's file,
// commits and pushes it; flux-check then passes, and fails (exit 3) once a
// tag moved; a pipeline whose push the branch moved past (another
// pipeline pinned a moved image first) fetches the branch, pins again and
// pushes, once, with both digests on the branch; and a run with nothing
// new commits nothing. What moved in the file goes where mode update puts
// a lock file's: the log, the job summary, DIGESTPIN_CI_SUMMARY and the
// commit's message.
func TestCIStepFlux(t *testing.T) {
	t.Parallel()
	g := newGitopsRepo(t, 2)
	var env []string
	for _, kv := range g.env {
		if !strings.HasPrefix(kv, "DIGESTPIN_SEED_FILE=") { // a Flux job has no seed
			env = append(env, kv)
		}
	}
	g.env = env
	const hr = `# The shop, from the chart of this repository.
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: shop
  namespace: shop
spec:
  interval: 10m
  chart:
    spec:
      chart: ./shop
      sourceRef:
        kind: GitRepository
        name: gitops
        namespace: flux-system
`
	seed := g.clone(t, false)
	mkfile(t, filepath.Join(seed, "clusters", "shop.yaml"), hr)
	g.git(t, seed, "add", "clusters")
	g.git(t, seed, "commit", "--quiet", "-m", "the shop's HelmRelease")
	g.git(t, seed, "push", "--quiet", "origin", "HEAD:refs/heads/main")

	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-ci.sh")
	jobSummary := filepath.Join(t.TempDir(), "step-summary.md")
	run := func(t *testing.T, dir, mode string) result {
		t.Helper()
		return runCmd(t, dir, nil, append(append([]string(nil), g.env...), "DIGESTPIN_CI_MODE="+mode, "DIGESTPIN_CI_FLUX_FILES=clusters/shop.yaml",
			"DIGESTPIN_CI_SUMMARY=digestpin-summary.md", "GITHUB_STEP_SUMMARY="+jobSummary), step)
	}
	const object = "clusters/shop.yaml: HelmRelease shop/shop: "
	onMain := func(t *testing.T) string {
		t.Helper()
		return g.git(t, "", "--git-dir", g.bare, "show", "main:clusters/shop.yaml")
	}
	has := func(t *testing.T, file, img, digest string) {
		t.Helper()
		name, _, _ := strings.Cut(img, ":")
		want := "          - name: " + g.reg.Ref(name) + " # digestpin\n            newTag: main\n            digest: " + digest + "\n"
		if !strings.Contains(file, want) {
			t.Errorf("no entry\n%s\nin\n%s", want, file)
		}
	}

	first := g.clone(t, true)
	r := run(t, first, "flux")
	if r.err != nil || !strings.Contains(r.stderr, "digestpin-lock: clusters/shop.yaml: HelmRelease shop/shop: wrote 2 images\n") || !strings.Contains(r.stderr, "digestpin-lock: pushed to branch main\n") {
		t.Fatalf("the first step: %v\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stderr, "digestpin-lock: "+object+"no image moved, 2 added (against the digests in the file)\n") {
		t.Errorf("the first step's log has no summary:\n%s", r.stderr)
	}
	if msg := g.git(t, "", "--git-dir", g.bare, "log", "-1", "--format=%B", "main"); !strings.Contains(msg, "\n"+object+"no image moved, 2 added (against the digests in the file)\n"+g.reg.Ref(serviceImage(0))+" added ") {
		t.Errorf("the commit's message has no summary:\n%s", msg)
	}
	if b, err := os.ReadFile(filepath.Join(first, "digestpin-summary.md")); err != nil || !strings.HasPrefix(string(b), "## `clusters/shop.yaml`: HelmRelease shop/shop\n\n### digestpin: no image moved, 2 added") {
		t.Errorf("DIGESTPIN_CI_SUMMARY: %v\n%s", err, b)
	}
	got := onMain(t)
	if !strings.HasPrefix(got, hr) {
		t.Errorf("the HelmRelease on main does not keep its text:\n%s", got)
	}
	for i := range 2 {
		// The same image again: the digest newGitopsRepo pushed.
		has(t, got, serviceImage(i), pushFixed(t, g.reg, serviceImage(i), "1").String())
	}
	if r := run(t, g.clone(t, true), "flux-check"); r.err != nil || !strings.Contains(r.stderr, "digestpin-lock: the Flux files match the registry\n") {
		t.Errorf("flux-check with nothing moved: %v\n%s", r.err, r.stderr)
	}

	// Two pipelines from the same commit: the other pins its moved image
	// and pushes first; the late one's push is rejected, and it pins again
	// on the branch as it is now.
	late := g.clone(t, true)
	other := g.clone(t, true)
	svc0 := pushFixed(t, g.reg, serviceImage(0), "2").String()
	if r := run(t, late, "flux-check"); exitStatus(r.err) != 3 || !strings.Contains(r.stderr, "would write 2 images") || !strings.Contains(r.stderr, "digestpin-lock: "+object+"1 image moved, 1 unchanged") {
		t.Errorf("flux-check after a move: exit %d\n%s", exitStatus(r.err), r.stderr)
	}
	if r := run(t, other, "flux"); r.err != nil {
		t.Fatalf("the other pipeline's step: %v\n%s", r.err, r.stderr)
	}
	svc1 := pushFixed(t, g.reg, serviceImage(1), "2").String()
	r = run(t, late, "flux")
	if r.err != nil {
		t.Fatalf("the late step: %v\n%s", r.err, r.stderr)
	}
	if k := retries(r.stderr); k != 1 || !strings.Contains(r.stderr, "digestpin-lock: pushed to branch main") {
		t.Errorf("the late step pinned again %d times, want 1:\n%s", k, r.stderr)
	}
	got = onMain(t)
	has(t, got, serviceImage(0), svc0)
	has(t, got, serviceImage(1), svc1)
	// The late step's summary is of its last pin, on the branch as the
	// other left it: its own image moved, the other's unchanged.
	if msg := g.git(t, "", "--git-dir", g.bare, "log", "-1", "--format=%B", "main"); !strings.Contains(msg, "\n"+object+"1 image moved, 1 unchanged (against the digests in the file)\n"+g.reg.Ref(serviceImage(1))+" ") {
		t.Errorf("the late commit's message:\n%s", msg)
	}
	if b, err := os.ReadFile(jobSummary); err != nil || strings.Count(string(b), "## `clusters/shop.yaml`: HelmRelease shop/shop\n") < 4 {
		t.Errorf("the job summary: %v\n%s", err, b)
	}

	if r := run(t, g.clone(t, true), "flux"); r.err != nil || !strings.Contains(r.stderr, "as committed, nothing to commit") {
		t.Errorf("a step with nothing new: %v\n%s", r.err, r.stderr)
	}
	// Bad usage: no file.
	r = runCmd(t, first, nil, append(append([]string(nil), g.env...), "DIGESTPIN_CI_MODE=flux"), step)
	if exitStatus(r.err) != 2 || r.stderr != "digestpin-ci: DIGESTPIN_CI_MODE=flux: DIGESTPIN_CI_FLUX_FILES (the action's flux-files input) names no file\n" {
		t.Errorf("no file: exit %d\n%s", exitStatus(r.err), r.stderr)
	}
}
