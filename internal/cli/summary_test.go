package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
)

// TestSummaryCheck checks that a --check that finds a moved tag exits 3
// having written the report and both summaries (and printed the change
// set with -v), but neither the output nor the lock file.
func TestSummaryCheck(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	old := reg.PushImage(t, "app:1.0")
	reg.PushImage(t, "side:2")
	dir := t.TempDir()
	lock := filepath.Join(dir, "digests.lock")
	in := gen.Deployments("prod", reg.Ref("app:1.0"), reg.Ref("side:2"))
	mustRun(t, in, "--write-lock", lock)
	locked, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}

	moved := reg.PushImage(t, "app:1.0")
	md, txt, report := filepath.Join(dir, "summary.md"), filepath.Join(dir, "summary.txt"), filepath.Join(dir, "report.json")
	r := runPin(t, in, "--lock", lock, "--check", "--summary", md, "--summary-text", txt, "--report", report, "--write-lock", lock, "-v")
	if ExitCode(r.err) != 3 {
		t.Fatalf("--check with a moved tag = %v, want exit 3", r.err)
	}
	line := reg.Ref("app:1.0") + " " + pin.ShortDigest(old.String()) + " → " + pin.ShortDigest(moved.String()) + ": Deployment/prod/w0"
	want := "1 image moved, 1 unchanged (against the lock file)\n" + line + "\n"
	if got := readString(t, txt); got != want {
		t.Errorf("--summary-text = %q, want %q", got, want)
	}
	if got := readString(t, md); !strings.Contains(got, "| `"+reg.Ref("app:1.0")+"` | `"+pin.ShortDigest(old.String())+"` | `"+pin.ShortDigest(moved.String())+"` | Deployment/prod/w0 (app) |") {
		t.Errorf("--summary has no row for the moved image:\n%s", got)
	}
	var rep pin.Report
	if err := json.Unmarshal([]byte(readString(t, report)), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Changes == nil || len(rep.Changes.Moved) != 1 || rep.Changes.Moved[0].Previous.Digest != old.String() || rep.Changes.Moved[0].Digest != moved.String() {
		t.Errorf("report changes = %+v, want app:1.0 moved from %s to %s", rep.Changes, old, moved)
	}
	if !strings.Contains(r.stderr, "digestpin: "+line+"\n") {
		t.Errorf("-v stderr does not hold %q:\n%s", line, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing", r.stdout)
	}
	if got := readString(t, lock); got != string(locked) {
		t.Errorf("the lock file changed under --check:\n%s", got)
	}
}

// TestSummaryFlags checks the flags and their variables: --diff-against
// an earlier output, DIGESTPIN_SUMMARY and DIGESTPIN_SUMMARY_TEXT; a
// summary that is another file of the run is refused; a run that fails
// writes no summary.
func TestSummaryFlags(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	dir := t.TempDir()
	in := gen.Deployments("prod", reg.Ref("app:1.0"), reg.Ref("side:2"))
	old := reg.PushImage(t, "side:2")
	earlier := filepath.Join(dir, "earlier.yaml")
	if err := os.WriteFile(earlier, []byte(mustRun(t, in).stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	moved := reg.PushImage(t, "side:2")

	md, txt := filepath.Join(dir, "summary.md"), filepath.Join(dir, "summary.txt")
	t.Setenv("DIGESTPIN_SUMMARY", md)
	t.Setenv("DIGESTPIN_SUMMARY_TEXT", txt)
	t.Setenv("DIGESTPIN_DIFF_AGAINST", earlier)
	mustRun(t, in)
	want := "1 image moved, 1 unchanged (against the earlier output)\n" +
		reg.Ref("side:2") + " " + pin.ShortDigest(old.String()) + " → " + pin.ShortDigest(moved.String()) + ": Deployment/prod/w1\n"
	if got := readString(t, txt); got != want {
		t.Errorf("DIGESTPIN_SUMMARY_TEXT = %q, want %q", got, want)
	}
	if got := readString(t, md); !strings.HasPrefix(got, "### digestpin: 1 image moved") {
		t.Errorf("DIGESTPIN_SUMMARY =\n%s", got)
	}

	for _, tc := range []struct {
		desc string
		args []string
		want string
		code int
	}{
		{desc: "summary is the report", args: []string{"--report", md}, want: "DIGESTPIN_SUMMARY " + md + " is the file of --report: give it a file of its own", code: 2},
		{desc: "summary text is the lock file", args: []string{"--write-lock", txt}, want: "DIGESTPIN_SUMMARY_TEXT " + txt + " is the file of --write-lock: give it a file of its own", code: 2},
		{desc: "diff against the output", args: []string{"--summary", earlier}, want: "--summary " + earlier + " is the file of DIGESTPIN_DIFF_AGAINST: give it a file of its own", code: 2},
		{desc: "diff against a missing file", args: []string{"--diff-against", filepath.Join("testdata", "missing.yaml")}, want: "reading earlier output testdata/missing.yaml: no such file or directory", code: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for _, f := range []string{md, txt} {
				if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
			r := runPin(t, in, tc.args...)
			if ExitCode(r.err) != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("digestpin %s = %v (exit %d), stderr:\n%s\nwant exit %d and %q", strings.Join(tc.args, " "), r.err, ExitCode(r.err), r.stderr, tc.code, tc.want)
			}
			for _, f := range []string{md, txt} {
				if _, err := os.Stat(f); err == nil {
					t.Errorf("%s written by a run that failed", f)
				}
			}
		})
	}
}

// readString returns the content of path.
func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSummaryAgainstCache checks that a run with --cache-dir and neither
// a lock file nor --diff-against says what moved against the cache, with
// the moved image's build time, on stderr with -v and in --summary-text.
func TestSummaryAgainstCache(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	old := reg.PushImage(t, "app:1.0")
	reg.PushImage(t, "side:2")
	dir := t.TempDir()
	in := gen.Deployments("prod", reg.Ref("app:1.0"), reg.Ref("side:2"))
	txt := filepath.Join(dir, "summary.txt")
	args := []string{"--cache-dir", filepath.Join(dir, "cache"), "--cache-ttl", "1ms", "--summary-text", txt, "-v"}
	mustRun(t, in, args...)
	moved := reg.PushCreated(t, "app:1.0", time.Date(2026, 12, 1, 14, 3, 0, 0, time.UTC))
	time.Sleep(2 * time.Millisecond)
	r := mustRun(t, in, args...)
	line := reg.Ref("app:1.0") + " " + pin.ShortDigest(old.String()) + " → " + pin.ShortDigest(moved.String()) + " (built 2026-12-01 14:03 UTC): Deployment/prod/w0"
	want := "1 image moved, 1 unchanged (against the cache)\n" + line + "\n"
	if got := readString(t, txt); got != want {
		t.Errorf("--summary-text = %q, want %q", got, want)
	}
	if !strings.Contains(r.stderr, "digestpin: "+line+"\n") {
		t.Errorf("-v stderr does not hold %q:\n%s", line, r.stderr)
	}
}
