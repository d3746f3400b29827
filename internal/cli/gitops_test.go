package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/renderer"
)

// runResult is what one in-process run printed.
type runResult struct {
	stdout, stderr string
	err            error
}

// runPin runs digestpin in-process on in with args.
func runPin(t *testing.T, in []byte, args ...string) runResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, bytes.NewReader(in), &stdout, &stderr)
	return runResult{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// dockerManifest is the media type of the images the test registries
// push (random.Image's).
const dockerManifest = "application/vnd.docker.distribution.manifest.v2+json"

// mustRun runs digestpin and fails the test unless it succeeds.
func mustRun(t *testing.T, in []byte, args ...string) runResult {
	t.Helper()
	r := runPin(t, in, args...)
	if r.err != nil {
		t.Fatalf("digestpin %s: %v\nstderr:\n%s", strings.Join(args, " "), r.err, r.stderr)
	}
	return r
}

func TestGitopsFlagErrors(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "digests.lock")
	testfiles.WriteLock(t, lock, nil)
	for _, tc := range []struct {
		desc string
		args []string
		env  map[string]string
		want string
		code int
	}{
		{desc: "frozen without lock", args: []string{"--frozen"}, want: "--frozen needs --lock FILE", code: 2},
		{desc: "check without lock", args: []string{"--check"}, want: "--check needs --lock FILE", code: 2},
		{desc: "frozen and check", args: []string{"--lock", lock, "--frozen", "--check"}, want: "--frozen excludes --check: the one asks no registry, the other asks it about every image", code: 2},
		{desc: "negative TTL", args: []string{"--cache-ttl", "-1m"}, want: "--cache-ttl must not be negative, got -1m0s", code: 2},
		{desc: "cache dir without TTL", args: []string{"--cache-dir", dir}, want: "--cache-dir needs --cache-ttl", code: 2},
		{desc: "frozen from the environment", env: map[string]string{"DIGESTPIN_FROZEN": "true"}, want: "DIGESTPIN_FROZEN needs --lock FILE", code: 2},
		{desc: "bad TTL from the environment", env: map[string]string{"DIGESTPIN_CACHE_TTL": "soon"}, want: `invalid DIGESTPIN_CACHE_TTL "soon"`, code: 2},
		{desc: "missing lock file", args: []string{"--lock", filepath.Join(dir, "none.lock")}, want: "reading lock file: open " + filepath.Join(dir, "none.lock"), code: 1},
		{desc: "cache dir that cannot be made", args: []string{"--cache-ttl", "1m", "--cache-dir", filepath.Join(lock, "sub")}, want: "creating cache folder", code: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			r := runPin(t, gen.Deployments("prod", "registry.example/app:1"), tc.args...)
			if r.err == nil || ExitCode(r.err) != tc.code {
				t.Fatalf("digestpin %v = %v (exit %d), want exit %d", tc.args, r.err, ExitCode(r.err), tc.code)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", r.stderr, tc.want)
			}
			if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("stderr has several lines, want one:\n%s", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing on an error", r.stdout)
			}
		})
	}
}

func TestWriteLockThenFrozen(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	app := reg.PushImage(t, "app:1.0")
	side := reg.PushImage(t, "side:2")
	pinned := reg.Ref("old@") + reg.PushImage(t, "old:1").String()
	in := gen.Deployments("prod", reg.Ref("side:2"), reg.Ref("app:1.0"), pinned, reg.Ref("app:1.0"))
	lock := filepath.Join(t.TempDir(), "digests.lock")

	// Record: every resolution, sorted, and nothing for the pinned image.
	first := mustRun(t, in, "--write-lock", lock)
	b1, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("# digestpin lock file: image references and the digests they resolve to.\n"+
		"# Written by `digestpin --write-lock FILE`; read by `digestpin --lock FILE`.\n"+
		"version: 4\nimages:\n  - reference: %s\n    digest: %s\n    mediaType: %s\n  - reference: %s\n    digest: %s\n    mediaType: %[3]s\n",
		reg.Ref("app:1.0"), app, dockerManifest, reg.Ref("side:2"), side)
	if diff := cmp.Diff(want, string(b1)); diff != "" {
		t.Errorf("lock file mismatch (-want +got):\n%s", diff)
	}

	// Replay offline: the same bytes, and not one request.
	reg.ResetCounts()
	frozen := mustRun(t, in, "--lock", lock, "--frozen", "--write-lock", lock)
	if frozen.stdout != first.stdout {
		t.Errorf("--frozen output differs from the recording run:\n%s\nvs\n%s", frozen.stdout, first.stdout)
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("--frozen made %d registry requests, want 0", n)
	}
	if b2, _ := os.ReadFile(lock); !bytes.Equal(b1, b2) {
		t.Errorf("rewriting the lock changed it:\n%s\nvs\n%s", b2, b1)
	}
}

func TestFrozenMiss(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	app := reg.PushImage(t, "app:1.0")
	reg.PushImage(t, "b:1")
	reg.PushImage(t, "c:1")
	lock := filepath.Join(t.TempDir(), "digests.lock")
	testfiles.WriteLock(t, lock, map[string]v1.Hash{reg.Ref("app:1.0"): app})
	in := gen.Deployments("prod", reg.Ref("app:1.0"), reg.Ref("b:1"), reg.Ref("c:1"))
	for _, tc := range []struct {
		desc string
		args []string
		want []string
	}{
		{
			desc: "every missing reference is named where it is used",
			args: []string{"--lock", lock, "--frozen"},
			want: []string{
				"w1.yaml", `container "app": ` + reg.Ref("b:1") + ": not in the lock file, and --frozen asks no registry",
				"w2.yaml", `container "app": ` + reg.Ref("c:1") + ": not in the lock file",
			},
		},
		{
			desc: "--on-error=keep does not soften --frozen",
			args: []string{"--lock", lock, "--frozen", "--on-error", "keep"},
			want: []string{"2 image(s) not in lock file " + lock + " (--frozen asks no registry): " + reg.Ref("b:1") + ", " + reg.Ref("c:1")},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			reg.ResetCounts()
			r := runPin(t, in, tc.args...)
			if r.err == nil || ExitCode(r.err) != 1 {
				t.Fatalf("digestpin %v = %v, want exit 1", tc.args, r.err)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, r.stderr)
				}
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
			if n := reg.Total(); n != 0 {
				t.Errorf("--frozen made %d registry requests, want 0", n)
			}
		})
	}
}

func TestLockWithoutFrozenResolvesMisses(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	side := reg.PushImage(t, "side:2")
	// The lock holds an older digest for app:1.0: the lock wins.
	locked := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("1", 64)}
	lock := filepath.Join(t.TempDir(), "digests.lock")
	testfiles.WriteLock(t, lock, map[string]v1.Hash{reg.Ref("app:1.0"): locked})
	report := filepath.Join(t.TempDir(), "report.json")

	reg.ResetCounts()
	r := mustRun(t, gen.Deployments("prod", reg.Ref("app:1.0"), reg.Ref("side:2")), "--lock", lock, "--report", report)
	for _, w := range []string{reg.Ref("app:1.0") + "@" + locked.String(), reg.Ref("side:2") + "@" + side.String()} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("output does not pin %s:\n%s", w, r.stdout)
		}
	}
	if n := reg.Count("HEAD manifests"); n != 1 {
		t.Errorf("HEAD manifests = %d, want 1 (side:2 only)", n)
	}
	if got := sources(t, report); !cmp.Equal(got, map[string]string{reg.Ref("app:1.0"): "lock", reg.Ref("side:2"): "registry"}) {
		t.Errorf("report sources = %v", got)
	}
}

// sources reads a report and returns each image's source.
func sources(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep pin.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("parsing report: %v\n%s", err, b)
	}
	m := map[string]string{}
	for _, im := range rep.Images {
		m[im.Reference] = string(im.Source)
	}
	return m
}

func TestCheck(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	reg.PushImage(t, "side:2")
	reg.PushImage(t, "new:1")
	lock := filepath.Join(t.TempDir(), "digests.lock")
	in := gen.Deployments("prod", reg.Ref("app:1.0"), reg.Ref("side:2"))
	recorded := mustRun(t, in, "--write-lock", lock)

	// Nothing moved: the manifests are written, as without --check.
	reg.ResetCounts()
	same := mustRun(t, in, "--lock", lock, "--check")
	if same.stdout != recorded.stdout {
		t.Errorf("--check output differs from the recording run")
	}
	if n := reg.Count("HEAD manifests"); n != 2 {
		t.Errorf("--check made %d HEAD manifest requests, want 2: it asks the registry about every image", n)
	}

	// app:1.0 moves, and new:1 was never locked: both are named, nothing
	// is written.
	moved := reg.PushImage(t, "app:1.0")
	r := runPin(t, gen.Deployments("prod", reg.Ref("app:1.0"), reg.Ref("side:2"), reg.Ref("new:1")), "--lock", lock, "--check", "--cache-ttl", "1h", "--cache-dir", t.TempDir())
	if r.err == nil || ExitCode(r.err) != 3 {
		t.Fatalf("--check with a moved tag = %v, want exit 3 (a difference)", r.err)
	}
	for _, w := range []string{
		"the registry differs from lock file " + lock + " for 2 image(s)\n",
		reg.Ref("app:1.0") + ": moved from sha256:",
		"to " + moved.String() + " (registry)",
		reg.Ref("new:1") + ": not in the lock file; the registry serves sha256:",
	} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not contain %q:\n%s", w, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "side:2") {
		t.Errorf("stderr names side:2, which did not move:\n%s", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q, want nothing", r.stdout)
	}
}

func TestCacheAcrossRuns(t *testing.T) {
	reg := testregistry.New(t)
	app := reg.PushImage(t, "app:1.0")
	cache := t.TempDir()
	report := filepath.Join(t.TempDir(), "report.json")
	in := gen.Deployments("prod", reg.Ref("app:1.0"))

	first := mustRun(t, in, "--cache-ttl", "1h", "--cache-dir", cache, "--report", report)
	if got := sources(t, report)[reg.Ref("app:1.0")]; got != "registry" {
		t.Errorf("first run: source %q, want registry", got)
	}
	reg.ResetCounts()
	// The second run sets the flags through the environment.
	t.Setenv("DIGESTPIN_CACHE_TTL", "1h")
	t.Setenv("DIGESTPIN_CACHE_DIR", cache)
	t.Setenv("DIGESTPIN_REPORT", report)
	second := mustRun(t, in)
	if n := reg.Total(); n != 0 {
		t.Errorf("a run within the TTL made %d registry requests, want 0", n)
	}
	if second.stdout != first.stdout || !strings.Contains(second.stdout, app.String()) {
		t.Errorf("cached output differs:\n%s\nvs\n%s", second.stdout, first.stdout)
	}
	if got := sources(t, report)[reg.Ref("app:1.0")]; got != "cache" {
		t.Errorf("second run: source %q, want cache", got)
	}
}

func TestDefaultCacheDirFromTTL(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", home)
	mustRun(t, gen.Deployments("prod", reg.Ref("app:1.0")), "--cache-ttl", "10m")
	des, err := os.ReadDir(filepath.Join(home, "digestpin"))
	// The resolution, and the registry's ping answer (the auth cache).
	if err != nil || len(des) != 2 {
		t.Errorf("default cache folder holds %d entries (%v), want 2", len(des), err)
	}
}

func TestReportContent(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	_, children := reg.PushIndex(t, "multi:1", "linux/amd64", "linux/arm64")
	oldDigest := reg.PushImage(t, "old:1")
	pinned := reg.Ref("old@") + oldDigest.String()
	in := []byte(string(gen.Deployments("prod", reg.Ref("multi:1"), pinned)) + "---\napiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: nightly\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          initContainers:\n          - name: init\n            image: " + reg.Ref("multi:1") + "\n          containers:\n          - name: run\n            image: " + reg.Ref("gone:1") + "\n")
	reportPath := filepath.Join(t.TempDir(), "report.json")
	mustRun(t, in, "--platform", "linux/arm64", "--on-error", "keep", "--report", reportPath)
	b, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	var got pin.Report
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("parsing report: %v\n%s", err, b)
	}
	// The error text is the registry's; check it exists, then compare the rest.
	if len(got.Images) == 3 && got.Images[0].Error == "" {
		t.Errorf("unresolved image has no error in the report:\n%s", b)
	}
	for i := range got.Images {
		got.Images[i].Error = ""
	}
	want := pin.Report{Version: 1, Images: []pin.ReportImage{
		{Reference: reg.Ref("gone:1"), Name: reg.Ref("gone:1"), Source: "unresolved",
			Workloads: []renderer.Workload{{Kind: "CronJob", Name: "nightly", Container: "run"}}},
		{Reference: reg.Ref("multi:1"), Name: reg.Ref("multi:1"), Platform: "linux/arm64", Digest: children["linux/arm64"].String(), MediaType: dockerManifest, Source: "registry",
			Workloads: []renderer.Workload{{Kind: "Deployment", Namespace: "prod", Name: "w0", Container: "app"}, {Kind: "CronJob", Name: "nightly", Container: "init"}}},
		{Reference: pinned, Name: pinned, Digest: oldDigest.String(), Source: "pinned",
			Workloads: []renderer.Workload{{Kind: "Deployment", Namespace: "prod", Name: "w1", Container: "app"}}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report mismatch (-want +got):\n%s", diff)
	}
}

// TestStaleIfError is a registry that fails (501, which is not retried)
// past the cache's TTL: the cache's last digest is pinned with a warning
// and source stale; with --stale-if-error 0 the run fails.
func TestStaleIfError(t *testing.T) {
	reg := testregistry.New(t)
	app := reg.PushImage(t, "app:1.0")
	cache := t.TempDir()
	report := filepath.Join(t.TempDir(), "report.json")
	in := gen.Deployments("prod", reg.Ref("app:1.0"))
	first := mustRun(t, in, "--cache-ttl", "1ms", "--cache-dir", cache)
	time.Sleep(5 * time.Millisecond)
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			return false
		}
		w.WriteHeader(http.StatusNotImplemented)
		return true
	})
	second := mustRun(t, in, "--cache-ttl", "1ms", "--cache-dir", cache, "--report", report)
	if second.stdout != first.stdout || !strings.Contains(second.stdout, app.String()) {
		t.Errorf("stale output differs:\n%s\nvs\n%s", second.stdout, first.stdout)
	}
	if got := sources(t, report)[reg.Ref("app:1.0")]; got != "stale" {
		t.Errorf("source %q, want stale", got)
	}
	warning := "digestpin: warning: " + reg.Ref("app:1.0") + ": using " + app.String() + ", resolved "
	if strings.Count(second.stderr, warning) != 1 || !strings.Contains(second.stderr, " ago (--stale-if-error 24h past --cache-ttl 1ms), since the registry did not answer: ") || !strings.Contains(second.stderr, "501 Not Implemented") {
		t.Errorf("stderr:\n%s\nwant one warning %q… with the flags and the registry's answer", second.stderr, warning)
	}
	r := runPin(t, in, "--cache-ttl", "1ms", "--cache-dir", cache, "--stale-if-error", "0")
	if r.err == nil || !strings.Contains(r.stderr, "501 Not Implemented") || r.stdout != "" {
		t.Errorf("--stale-if-error 0: %v, stdout %q, stderr:\n%s\nwant the registry's failure", r.err, r.stdout, r.stderr)
	}
}
