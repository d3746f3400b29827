package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/lockfile"
)

// minAgePeriod is the waiting period of the end-to-end tests: long
// enough for a few runs of the binary within it on a loaded machine,
// short enough to wait out.
const minAgePeriod = 4 * time.Second

// TestMinAgeSharedThroughRedis runs the binary as the replicas of an Argo
// CD repo-server would, on one Redis, with --min-age: a tag seen first is
// pinned at once; re-pushed, its old digest stays pinned by every process
// (source held, in the report) until the new one has been seen for the
// period, then the new one is pinned by all. The waiting period costs no
// registry request: one manifest request per run, as without it.
func TestMinAgeSharedThroughRedis(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	d1 := reg.PushImage(t, "team/app:dev").String()
	in := gen.Deployments("prod", reg.Ref("team/app:dev"))
	srv := testredis.Start(t, testredis.Options{})
	// The waiting period as the Argo CD plugin's environment sets it,
	// which its messages name.
	env := []string{"DIGESTPIN_CACHE=" + srv.URL(0), "DIGESTPIN_CACHE_TTL=1ms", "DIGESTPIN_MIN_AGE=" + minAgePeriod.String()}
	dir := t.TempDir()
	report := filepath.Join(dir, "report.json")
	run := func(what string) result {
		t.Helper()
		reg.ResetCounts()
		r := runCmd(t, dir, in, env, bin, "--report", report)
		if r.err != nil {
			t.Fatalf("%s: %v\n%s", what, r.err, r.stderr)
		}
		if n := reg.Manifests(); n != 1 {
			t.Errorf("%s: %d manifest requests (HEAD %d, GET %d), want 1", what, n, reg.Count("HEAD manifests"), reg.Count("GET manifests"))
		}
		return r
	}
	pinned := func(r result) string {
		t.Helper()
		i := strings.Index(r.stdout, "@sha256:")
		if i < 0 {
			t.Fatalf("nothing pinned:\n%s", r.stdout)
		}
		return r.stdout[i+1 : i+1+71]
	}

	r := run("first run")
	if pinned(r) != d1 || !strings.Contains(r.stderr, "digestpin: warning: 1 image seen for the first time, pinned at once: DIGESTPIN_MIN_AGE has no earlier digest of theirs to keep: "+reg.Ref("team/app:dev")) {
		t.Errorf("first run pinned %s, warned:\n%s\nwant %s, said seen first", pinned(r), r.stderr, d1)
	}

	d2 := reg.PushImage(t, "team/app:dev").String()
	seen := time.Now()
	for i := range 3 {
		r = run("while the new digest waits")
		if time.Since(seen) >= minAgePeriod {
			// A machine so slow that the period is over: the new
			// digest may be pinned, and the report below says so.
			t.Logf("run %d ended %s after the push, past the period", i, time.Since(seen))
			break
		}
		if got := pinned(r); got != d1 {
			t.Fatalf("run %d while %s waits pinned %s, want %s", i, d2, got, d1)
		}
		if !strings.Contains(r.stderr, "digestpin: warning: 1 new digest waits for DIGESTPIN_MIN_AGE: the digest pinned before stays until then: "+reg.Ref("team/app:dev")+" ("+d2[7:19]+" until ") {
			t.Errorf("run %d warned:\n%s\nwant the wait named", i, r.stderr)
		}
	}
	var rep struct {
		Images []struct {
			Source  string `json:"source"`
			Digest  string `json:"digest"`
			Waiting *struct {
				Digest string    `json:"digest"`
				Since  time.Time `json:"since"`
				Until  time.Time `json:"until"`
			} `json:"waiting"`
		} `json:"images"`
	}
	if err := json.Unmarshal(readFileE2E(t, report), &rep); err != nil {
		t.Fatal(err)
	}
	if im := rep.Images[0]; time.Since(seen) < minAgePeriod && (im.Source != "held" || im.Digest != d1 || im.Waiting == nil || im.Waiting.Digest != d2 || im.Waiting.Until.Sub(im.Waiting.Since) != minAgePeriod) {
		t.Errorf("report image = %+v, want %s held, %s waiting for %s", im, d1, d2, minAgePeriod)
	}

	time.Sleep(time.Until(seen.Add(minAgePeriod + time.Second)))
	summary := filepath.Join(dir, "summary.txt")
	reg.ResetCounts()
	r = runCmd(t, dir, in, env, bin, "--summary-text", summary)
	if got := pinned(r); r.err != nil || got != d2 || strings.Contains(r.stderr, "warning") {
		t.Errorf("after the wait pinned %s (%v), warned:\n%s\nwant %s, no warning", got, r.err, r.stderr, d2)
	}
	// The move is against what was pinned, not the cache's last answer.
	if got, want := string(readFileE2E(t, summary)), "1 image moved (against the cache)\n"+reg.Ref("team/app:dev")+" "+d1[7:19]+" → "+d2[7:19]; !strings.HasPrefix(got, want) {
		t.Errorf("summary after the wait = %q, want %q", got, want)
	}
}

// TestMinAgeLockFile is the CI step's side: --write-lock with --min-age
// records the new digest as pending, with when it was first seen; a
// --check of that lock file passes while it waits; once the period is
// over, --check says the lock file differs (exit 3) and the next
// --write-lock pins the new digest, with no pending entry left.
func TestMinAgeLockFile(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	reg := testregistry.New(t)
	d1 := reg.PushImage(t, "team/app:dev").String()
	in := gen.Deployments("prod", reg.Ref("team/app:dev"))
	dir := t.TempDir()
	lock := filepath.Join(dir, "digestpin.lock")
	period := "--min-age=" + minAgePeriod.String()
	if r := runCmd(t, dir, in, nil, bin, "--write-lock", lock, period); r.err != nil {
		t.Fatalf("first lock: %v\n%s", r.err, r.stderr)
	}
	d2 := reg.PushImage(t, "team/app:dev").String()
	seen := time.Now()
	r := runCmd(t, dir, in, nil, bin, "--write-lock", lock, period)
	if r.err != nil || !strings.Contains(r.stdout, "@"+d1) {
		t.Fatalf("lock while waiting: %v\n%s\nwant %s pinned", r.err, r.stderr, d1)
	}
	l, err := lockfile.Read(lock)
	if err != nil {
		t.Fatal(err)
	}
	entry := l.Entries()[0]
	if entry.Digest != d1 || entry.Pending == nil || entry.Pending.Digest != d2 {
		t.Fatalf("lock entry = %+v, want %s with %s pending", entry, d1, d2)
	}
	if c := runCmd(t, dir, in, nil, bin, "--lock", lock, "--check", period); c.err != nil && time.Since(seen) < minAgePeriod {
		t.Errorf("--check while %s waits: %v\n%s", d2, c.err, c.stderr)
	}
	time.Sleep(time.Until(seen.Add(minAgePeriod + time.Second)))
	c := runCmd(t, dir, in, nil, bin, "--lock", lock, "--check", period)
	if code := exitCode(c.err); code != 3 || !strings.Contains(c.stderr, "moved from "+d1+" (lock file) to "+d2+" (registry)") {
		t.Errorf("--check after the wait: exit %d\n%s\nwant 3, naming the move", code, c.stderr)
	}
	if r := runCmd(t, dir, in, nil, bin, "--write-lock", lock, period); r.err != nil || !strings.Contains(r.stdout, "@"+d2) {
		t.Fatalf("lock after the wait: %v\n%s\nwant %s pinned", r.err, r.stderr, d2)
	}
	if b := string(readFileE2E(t, lock)); strings.Contains(b, "pending") || !strings.Contains(b, d2) {
		t.Errorf("lock file after the wait:\n%s\nwant %s, nothing pending", b, d2)
	}
}

// readFileE2E reads path or fails the test.
func readFileE2E(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
