//go:build unix

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/lockfile"
)

// gitopsRepo is a GitOps repository on loopback: a bare repository that
// pipelines clone and push to, with a chart whose services each run an
// image of the registry.
type gitopsRepo struct {
	bare string   // the bare repository
	env  []string // a CI job's environment (git identity, the seed)
	reg  *testregistry.Registry
}

// serviceImage is the repository:tag of service i.
func serviceImage(i int) string { return fmt.Sprintf("shop/svc-%02d:main", i) }

// chartFiles returns a chart with n services, service i running
// serviceImage(i) of reg.
func chartFiles(reg *testregistry.Registry, n int) map[string]string {
	var values strings.Builder
	values.WriteString("registry: " + reg.Host() + "\nservices:\n")
	for i := range n {
		fmt.Fprintf(&values, "  - name: svc-%02d\n    image: %s\n", i, serviceImage(i))
	}
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.0.0\n",
		"values.yaml": values.String(),
		"templates/services.yaml": `{{- range .Values.services }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
spec:
  selector:
    matchLabels: {app: {{ .name }}}
  template:
    metadata:
      labels: {app: {{ .name }}}
    spec:
      containers:
        - name: app
          image: {{ $.Values.registry }}/{{ .image }}
{{- end }}
`,
	}
}

// newGitopsRepo makes the bare repository with the chart of n services at
// shop/ on branch main, each service's image pushed once.
func newGitopsRepo(t *testing.T, n int) *gitopsRepo {
	t.Helper()
	reg := testregistry.New(t)
	for i := range n {
		pushFixed(t, reg, serviceImage(i), "1")
	}
	sc := newSidecar(t)
	env := append(ciEnv(t, sc),
		"GIT_AUTHOR_NAME=ci", "GIT_AUTHOR_EMAIL=ci@example.com",
		"GIT_COMMITTER_NAME=ci", "GIT_COMMITTER_EMAIL=ci@example.com",
		"GIT_CONFIG_NOSYSTEM=1", "RELEASE=shop")
	g := &gitopsRepo{bare: filepath.Join(t.TempDir(), "gitops.git"), env: env, reg: reg}
	g.git(t, "", "init", "--quiet", "--bare", "--initial-branch=main", g.bare)
	work := g.clone(t, false)
	for f, body := range chartFiles(reg, n) {
		mkfile(t, filepath.Join(work, "shop", f), body)
	}
	g.git(t, work, "add", "shop")
	g.git(t, work, "commit", "--quiet", "-m", "the shop chart")
	g.git(t, work, "push", "--quiet", "origin", "HEAD:refs/heads/main")
	return g
}

// git runs git in dir with the job's environment, failing the test when it
// fails, and returns its stdout.
func (g *gitopsRepo) git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	r := runCmd(t, dir, nil, g.env, "git", args...)
	if r.err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), r.err, r.stderr)
	}
	return r.stdout
}

// clone checks out branch main of the bare repository as a CI job does
// (shallow: one commit deep, as actions/checkout does by default).
func (g *gitopsRepo) clone(t *testing.T, shallow bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "work")
	args := []string{"clone", "--quiet"}
	if shallow {
		args = append(args, "--depth=1")
	}
	g.git(t, "", append(args, "file://"+g.bare, dir)...)
	return dir
}

// step runs the lock step with --push in a clone.
func (g *gitopsRepo) step(t *testing.T, dir string, env ...string) result {
	t.Helper()
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	return runCmd(t, dir, nil, append(append([]string(nil), g.env...), env...), step, "--push", "shop")
}

// lockAt returns the lock file of branch main's commit rev, as
// repository:tag → digest.
func (g *gitopsRepo) lockAt(t *testing.T, rev string) map[string]string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "digests.lock")
	mkfile(t, p, g.git(t, "", "--git-dir", g.bare, "show", rev+":shop/digests.lock"))
	l, err := lockfile.Read(p)
	if err != nil {
		t.Fatalf("the lock file of %s: %v", rev, err)
	}
	m := map[string]string{}
	for _, e := range l.Entries() {
		m[strings.TrimPrefix(e.Reference, g.reg.Host()+"/")] = e.Digest
	}
	return m
}

// retries counts the step's lines that say it records again.
func retries(stderr string) int {
	return strings.Count(stderr, " moved on: fetching it and recording again")
}

// TestCIStepConcurrentPushes runs 20 pipelines at once against one GitOps
// repository on loopback, as dozens of pipelines do with one repository:
// each pushes a new image of its own service under the same tag, then runs
// the lock step, which records the lock file of the whole chart and pushes
// it. Every step succeeds, and the branch's lock file holds all 20 new
// digests: none was lost to another pipeline's push. Half the clones are
// shallow, as CI checkouts are. Three runs on a loaded 2-core machine
// logged 14 to 33 s, 2 or 3 commits, 37 to 47 retries in all, at most 3 in
// one pipeline.
func TestCIStepConcurrentPushes(t *testing.T) {
	t.Parallel()
	const n = 20
	g := newGitopsRepo(t, n)
	work := g.clone(t, false)
	if r := g.step(t, work); r.err != nil {
		t.Fatalf("the first lock step: %v\n%s", r.err, r.stderr)
	}
	before := strings.TrimSpace(g.git(t, "", "--git-dir", g.bare, "rev-parse", "main"))

	clones := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { clones[i] = g.clone(t, i%2 == 0) })
	}
	wg.Wait()
	// The pipelines' builds end 150 ms apart, so that some render before
	// others pushed their image, and their pushes overlap.
	results := make([]result, n)
	digests := make([]string, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			time.Sleep(time.Duration(i) * 150 * time.Millisecond)
			digests[i] = pushFixed(t, g.reg, serviceImage(i), "2").String()
			results[i] = g.step(t, clones[i], fmt.Sprintf("COMMIT_MESSAGE=pipeline %d", i))
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)

	total, most := 0, 0
	for i, r := range results {
		if r.err != nil {
			t.Errorf("pipeline %d: %v\n%s", i, r.err, r.stderr)
		}
		k := retries(r.stderr)
		total += k
		most = max(most, k)
	}
	got := g.lockAt(t, "main")
	if len(got) != n {
		t.Errorf("the lock file has %d entries, want %d", len(got), n)
	}
	for i := range n {
		if got[serviceImage(i)] != digests[i] {
			t.Errorf("the lock file has %s for %s, want the pushed %s: a pipeline's record was lost", got[serviceImage(i)], serviceImage(i), digests[i])
		}
	}
	// Every commit on the branch holds a whole lock file (no merge
	// conflict markers, no half of one).
	revs := strings.Fields(g.git(t, "", "--git-dir", g.bare, "rev-list", before+"..main"))
	for _, rev := range revs {
		if l := g.lockAt(t, rev); len(l) != n {
			t.Errorf("commit %s: the lock file has %d entries, want %d", rev, len(l), n)
		}
	}
	if len(revs) == 0 || len(revs) > n {
		t.Errorf("%d commits after the first lock file, want 1 to %d", len(revs), n)
	}
	t.Logf("%d pipelines: %s, %d commits, %d retries in all (at most %d in one pipeline)", n, elapsed.Round(time.Millisecond), len(revs), total, most)
	if total == 0 {
		t.Log("no pipeline had to retry: the run had no contention (TestCIStepBranchMovedOn covers the retry)")
	}
}

// TestCIStepBranchMovedOn runs the lock step in a clone whose branch
// another pipeline moved on, with a changed chart: the step records again
// on the branch as it is (the chart's new service included) and pushes;
// with PUSH_ATTEMPTS=1 it fails with one line instead, and pushes nothing.
func TestCIStepBranchMovedOn(t *testing.T) {
	t.Parallel()
	g := newGitopsRepo(t, 3)
	first := g.clone(t, true)
	if r := g.step(t, first); r.err != nil {
		t.Fatalf("the first lock step: %v\n%s", r.err, r.stderr)
	}
	late := g.clone(t, true)
	bounded := g.clone(t, true)

	// Another pipeline adds a service and records its lock file.
	other := g.clone(t, false)
	pushFixed(t, g.reg, serviceImage(3), "1")
	mkfile(t, filepath.Join(other, "shop", "values.yaml"), chartFiles(g.reg, 4)["values.yaml"])
	g.git(t, other, "commit", "--quiet", "-am", "a fourth service")
	web := pushFixed(t, g.reg, serviceImage(0), "2").String()
	if r := g.step(t, other); r.err != nil {
		t.Fatalf("the other pipeline's step: %v\n%s", r.err, r.stderr)
	}
	moved := strings.TrimSpace(g.git(t, "", "--git-dir", g.bare, "rev-parse", "main"))

	// The late clones still have the old chart and lock file; a new image
	// makes their record differ from the branch's.
	svc1 := pushFixed(t, g.reg, serviceImage(1), "2").String()
	r := g.step(t, bounded, "PUSH_ATTEMPTS=1")
	want := "digestpin-lock: git push to branch main was rejected 1 times (the branch kept moving; PUSH_ATTEMPTS=1): the commit is only local; run the job again\n"
	if exitStatus(r.err) != 1 || !strings.HasSuffix(r.stderr, want) {
		t.Errorf("PUSH_ATTEMPTS=1: exit %d, stderr\n%s\nwant it to end with %q", exitStatus(r.err), r.stderr, want)
	}
	if now := strings.TrimSpace(g.git(t, "", "--git-dir", g.bare, "rev-parse", "main")); now != moved {
		t.Errorf("a failed step moved the branch to %s", now)
	}

	r = g.step(t, late)
	if r.err != nil {
		t.Fatalf("the late step: %v\n%s", r.err, r.stderr)
	}
	if k := retries(r.stderr); k != 1 || !strings.Contains(r.stderr, "digestpin-lock: pushed to branch main") {
		t.Errorf("the late step recorded again %d times, want 1:\n%s", k, r.stderr)
	}
	got := g.lockAt(t, "main")
	for im, d := range map[string]string{serviceImage(0): web, serviceImage(1): svc1} {
		if got[im] != d {
			t.Errorf("the lock file has %s for %s, want %s", got[im], im, d)
		}
	}
	if got[serviceImage(3)] == "" || len(got) != 4 {
		t.Errorf("the lock file %v does not record the chart as it is on the branch (4 services)", got)
	}
	if parent := strings.TrimSpace(g.git(t, "", "--git-dir", g.bare, "rev-parse", "main^")); parent != moved {
		t.Errorf("the late commit's parent is %s, want the branch it fetched, %s", parent, moved)
	}

	// Once more, with nothing new: the branch already holds it.
	again := g.clone(t, true)
	if r := g.step(t, again); r.err != nil || !strings.Contains(r.stderr, "as committed, nothing to commit") {
		t.Errorf("a step with nothing new: %v\n%s", r.err, r.stderr)
	}
}

// TestCIStepImageMissing is a pipeline whose image build failed: the tag
// it would record does not exist. The step fails naming the image, and
// neither records nor commits nor pushes anything, so that Argo CD never
// gets a lock file with a tag that does not exist.
func TestCIStepImageMissing(t *testing.T) {
	t.Parallel()
	g := newGitopsRepo(t, 2)
	work := g.clone(t, true)
	if r := g.step(t, work); r.err != nil {
		t.Fatalf("the first lock step: %v\n%s", r.err, r.stderr)
	}
	before := strings.TrimSpace(g.git(t, "", "--git-dir", g.bare, "rev-parse", "main"))
	lockBefore, err := os.ReadFile(filepath.Join(work, "shop", "digests.lock"))
	if err != nil {
		t.Fatal(err)
	}
	// The pipeline moved the chart to a tag whose build failed.
	values := strings.Replace(chartFiles(g.reg, 2)["values.yaml"], serviceImage(1), "shop/svc-01:1.5", 1)
	mkfile(t, filepath.Join(work, "shop", "values.yaml"), values)
	r := g.step(t, work)
	if exitStatus(r.err) != 1 {
		t.Fatalf("the step with a missing image: exit %d, want 1\n%s", exitStatus(r.err), r.stderr)
	}
	ref := g.reg.Host() + "/shop/svc-01:1.5"
	if !strings.Contains(r.stderr, ref) || !strings.Contains(r.stderr, "digestpin-lock: digestpin failed (its error is above), shop/digests.lock was left as it was") {
		t.Errorf("the step's error does not name %s:\n%s", ref, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "shop", "digests.lock")); string(b) != string(lockBefore) {
		t.Errorf("the lock file changed:\n%s", b)
	}
	if head := strings.TrimSpace(g.git(t, work, "rev-parse", "HEAD")); head != before {
		t.Errorf("the step committed %s", head)
	}
	if now := strings.TrimSpace(g.git(t, "", "--git-dir", g.bare, "rev-parse", "main")); now != before {
		t.Errorf("the step pushed %s", now)
	}
}

// TestCIStepPushDeclined is a push that the server declines (a hook, a
// protected branch): not a branch that moved on, so the step fails at
// once with git's reason, and records nothing again.
func TestCIStepPushDeclined(t *testing.T) {
	t.Parallel()
	g := newGitopsRepo(t, 1)
	mkfile(t, filepath.Join(g.bare, "hooks", "pre-receive"), "#!/bin/sh\necho 'main is protected' >&2\nexit 1\n")
	if err := os.Chmod(filepath.Join(g.bare, "hooks", "pre-receive"), 0o755); err != nil {
		t.Fatal(err)
	}
	work := g.clone(t, true)
	r := g.step(t, work)
	if exitStatus(r.err) != 1 || !strings.Contains(r.stderr, "main is protected") ||
		!strings.HasSuffix(r.stderr, "digestpin-lock: git push to branch main failed (its error is above): the commit is only local; run the job again\n") {
		t.Errorf("a declined push: exit %d, stderr\n%s", exitStatus(r.err), r.stderr)
	}
	if k := retries(r.stderr); k != 0 {
		t.Errorf("a declined push was retried %d times", k)
	}
}
