package pin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
)

// refuse is a registry that fails the test when asked anything.
func refuse(t *testing.T) resolution.Resolver {
	return resolution.Func(func(_ context.Context, ref name.Reference) (resolution.Resolution, error) {
		t.Errorf("the registry was asked about %s", ref)
		return resolution.Resolution{}, errors.New("refused")
	})
}

func TestNewRejects(t *testing.T) {
	policies := &tagpolicy.TagPolicies{}
	if err := policies.Add("registry.example/app", "latest"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc        string
		o           Options
		field       string
		rule, other string // the field it needs or excludes
		reason      string // how the OptionError's Reason starts
		message     string // its Message with flags' names, "" to skip
	}{
		{desc: "frozen and check", o: Options{Lock: "l", Frozen: true, Check: true}, field: "Frozen", rule: "excludes", other: "Check", reason: ": the one asks no registry", message: "--Frozen excludes --Check: the one asks no registry, the other asks it about every image"},
		{desc: "frozen without a lock", o: Options{Frozen: true}, field: "Frozen", rule: "needs", other: "Lock", reason: "FILE", message: "--Frozen needs --Lock FILE"},
		{desc: "check without a lock", o: Options{Check: true}, field: "Check", rule: "needs", other: "Lock", reason: "FILE"},
		{desc: "negative TTL", o: Options{CacheTTL: -1}, field: "CacheTTL", reason: "must not be negative", message: "--CacheTTL must not be negative, got -1ns"},
		{desc: "cache folder without TTL", o: Options{CacheDir: "d"}, field: "CacheDir", rule: "needs", other: "CacheTTL", reason: "DURATION"},
		{desc: "platform without architecture", o: Options{Platform: &v1.Platform{OS: "linux"}}, field: "Platform"},
		{desc: "platform without OS", o: Options{Platform: &v1.Platform{Architecture: "amd64"}}, field: "Platform"},
		{desc: "cache and cache folder", o: Options{Cache: &resolve.DirCache{}, CacheDir: "d", CacheTTL: time.Hour}, field: "Cache", rule: "excludes", other: "CacheDir", reason: ": resolutions are kept in one place", message: "--Cache excludes --CacheDir: resolutions are kept in one place"},
		{desc: "cache without TTL", o: Options{Cache: &resolve.DirCache{}}, field: "Cache", rule: "needs", other: "CacheTTL", reason: "DURATION, how long a resolution stays valid", message: "--Cache needs --CacheTTL DURATION, how long a resolution stays valid"},
		{desc: "tag policies in annotate mode", o: Options{TagPolicies: policies, Renderer: renderer.Renderer{Mode: renderer.ModeAnnotate}}, field: "TagPolicies", reason: "excludes the annotate mode: the image fields would keep the tags as written"},
		{desc: "negative MaxTags", o: Options{MaxTags: -1}, field: "MaxTags", reason: "must not be negative, got -1"},
		{desc: "a resolver of the caller's", o: Options{Renderer: renderer.Renderer{Resolver: refuse(t)}}, field: "Renderer.Resolver", reason: "is set: a Pinner assembles its own chain"},
		{desc: "an unknown mode", o: Options{Renderer: renderer.Renderer{Mode: "loud"}}, field: "Renderer", message: `--Renderer: mode "loud": want pin, digest or annotate`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New(tc.o)
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Field != tc.field || oe.Rule != tc.rule || oe.Other != tc.other || !strings.HasPrefix(oe.Reason, tc.reason) {
				t.Fatalf("New(%+v) = %v, want an OptionError for %s %s %s, reason %q", tc.o, err, tc.field, tc.rule, tc.other, tc.reason)
			}
			if want := oe.Message(func(f string) string { return f }); err.Error() != want {
				t.Errorf("New() error = %q, want its Message %q", err, want)
			}
			if !strings.HasPrefix(err.Error(), tc.field+" ") && !strings.HasPrefix(err.Error(), tc.field+":") {
				t.Errorf("New() error = %q, want it to start with %s", err, tc.field)
			}
			if tc.message == "" {
				return
			}
			if got := oe.Message(func(f string) string { return "--" + f }); got != tc.message {
				t.Errorf("Message(flags) = %q, want %q", got, tc.message)
			}
		})
	}
	// A registry resolver's options are checked by New, too.
	if _, err := New(Options{ResolveOptions: []resolve.Option{resolve.WithJobs(0)}}); err == nil || !strings.Contains(err.Error(), "0") {
		t.Errorf("New(WithJobs(0)) = %v, want an error", err)
	}
	// A tag policy needs a Registry that lists tags: Pin says so.
	p, err := New(Options{Registry: refuse(t), TagPolicies: policies})
	if err != nil {
		t.Fatal(err)
	}
	var oe *OptionError
	if _, err := p.Pin(context.Background(), gen.Deployments("", "registry.example/app:1")); !errors.As(err, &oe) || oe.Field != "TagPolicies" {
		t.Errorf("Pin(tag policies, a Registry without tags) = %v, want an OptionError for TagPolicies", err)
	}
}

// TestFrozenNeverAsksTheRegistry checks that the lock layer is really in
// front: a frozen Pin asks no registry even when one is there to ask, and
// a missing reference fails it although KeepUnresolved kept the image.
func TestFrozenNeverAsksTheRegistry(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "digests.lock")
	locked := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	testfiles.WriteLock(t, lock, map[string]v1.Hash{"registry.example/app:1": locked})
	o := Options{Registry: refuse(t), Lock: lock, Frozen: true}
	o.Renderer.KeepUnresolved = true
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Pin(context.Background(), gen.Deployments("prod", "registry.example/app:1"))
	if err != nil {
		t.Fatalf("Pin(locked image) = %v", err)
	}
	if !strings.Contains(string(res.Bytes()), "registry.example/app:1@"+locked.String()) {
		t.Errorf("output does not pin the locked digest:\n%s", res.Bytes())
	}
	if got := res.Images[0].Source; got != resolution.Lock {
		t.Errorf("source = %s, want lock", got)
	}
	_, err = p.Pin(context.Background(), gen.Deployments("prod", "registry.example/other:1"))
	if err == nil || !strings.Contains(err.Error(), "not in lock file") {
		t.Errorf("Pin(image missing from the lock) = %v, want a frozen miss", err)
	}
}

// TestFilesOnlyOnCommit checks that the lock file and the report are
// prepared by Pin and put in place only by Commit, and that Discard and
// a failing Pin leave every destination as it was.
func TestFilesOnlyOnCommit(t *testing.T) {
	reg := testregistry.New(t)
	want := reg.PushImage(t, "app:1")
	in := gen.Deployments("prod", reg.Ref("app:1"))
	for _, tc := range []struct {
		desc    string
		report  string // relative to the test's folder
		commit  bool
		wantErr string
		written bool
	}{
		{desc: "commit", report: "report.json", commit: true, written: true},
		{desc: "discard", report: "report.json"},
		{desc: "report folder missing", report: "missing/report.json", wantErr: "writing report " + "DIR/missing/report.json: "},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			lock := filepath.Join(dir, "digests.lock")
			old := []byte("# the lock file before\n")
			if err := os.WriteFile(lock, old, 0o644); err != nil {
				t.Fatal(err)
			}
			report := filepath.Join(dir, tc.report)
			p, err := New(Options{WriteLock: lock, Report: report})
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Pin(context.Background(), in)
			if tc.wantErr != "" {
				want := strings.ReplaceAll(tc.wantErr, "DIR", dir)
				if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), ".tmp") {
					t.Fatalf("Pin() = %v, want an error starting %q that names no temporary file", err, want)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]string{"digests.lock"}, onlyFiles(t, dir, ".json", ".lock")); diff != "" {
					t.Errorf("before Commit (-want +got):\n%s", diff)
				}
				if tc.commit {
					if err := res.Commit(); err != nil {
						t.Fatal(err)
					}
				} else {
					res.Discard()
				}
			}
			b, err := os.ReadFile(lock)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(b), want.String()); got != tc.written {
				t.Errorf("lock file holds the digest: %v, want %v:\n%s", got, tc.written, b)
			}
			if !tc.written && string(b) != string(old) {
				t.Errorf("lock file changed:\n%s", b)
			}
			if _, err := os.Stat(report); (err == nil) != tc.written {
				t.Errorf("report exists: %v, want %v", err == nil, tc.written)
			}
			for _, n := range testfiles.Names(t, dir) {
				if strings.HasSuffix(n, ".tmp") {
					t.Errorf("temporary file %s left behind", n)
				}
			}
		})
	}
}

// onlyFiles lists the names in dir with one of the suffixes, temporary
// files included.
func onlyFiles(t *testing.T, dir string, suffixes ...string) []string {
	t.Helper()
	var out []string
	for _, n := range testfiles.Names(t, dir) {
		for _, s := range suffixes {
			if strings.HasSuffix(n, s) {
				out = append(out, n)
			}
		}
	}
	return out
}

// TestWriteLockThroughSymlink checks that a lock file reached through a
// symbolic link is written through it, keeping the link and the file's
// mode.
func TestWriteLockThroughSymlink(t *testing.T) {
	reg := testregistry.New(t)
	want := reg.PushImage(t, "app:1")
	dir := t.TempDir()
	target := filepath.Join(dir, "real", "digests.lock")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "digests.lock")
	if err := os.Symlink("real/digests.lock", link); err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{WriteLock: link})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Pin(context.Background(), gen.Deployments("prod", reg.Ref("app:1")))
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Commit(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("Lstat(link) = %v, %v; want the symbolic link kept", fi, err)
	}
	fi, err := os.Stat(target)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("target mode = %v, %v; want 0600 kept", fi, err)
	}
	b, _ := os.ReadFile(target)
	if !strings.Contains(string(b), want.String()) {
		t.Errorf("target does not hold the digest:\n%s", b)
	}
}

// TestCheckFindsEveryMove checks the check layer: the registry's answer
// is used, and every difference from the lock file fails the Pin.
func TestCheckFindsEveryMove(t *testing.T) {
	reg := testregistry.New(t)
	now := reg.PushImage(t, "app:1")
	reg.PushImage(t, "new:1")
	lock := filepath.Join(t.TempDir(), "digests.lock")
	testfiles.WriteLock(t, lock, map[string]v1.Hash{reg.Ref("app:1"): {Algorithm: "sha256", Hex: strings.Repeat("0", 64)}})
	p, err := New(Options{Lock: lock, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Pin(context.Background(), gen.Deployments("prod", reg.Ref("app:1"), reg.Ref("new:1")))
	for _, want := range []string{
		reg.Ref("app:1") + ": moved from sha256:000",
		"(lock file) to " + now.String(),
		reg.Ref("new:1") + ": not in the lock file",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Pin() = %v, want it to say %q", err, want)
		}
	}
}

// TestReportSources checks the sources in the report of a lock run that
// resolves what the lock file lacks.
func TestReportSources(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "side:2")
	dir := t.TempDir()
	lock, report := filepath.Join(dir, "digests.lock"), filepath.Join(dir, "report.json")
	testfiles.WriteLock(t, lock, map[string]v1.Hash{reg.Ref("app:1"): {Algorithm: "sha256", Hex: strings.Repeat("1", 64)}})
	p, err := New(Options{Lock: lock, Report: report})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Pin(context.Background(), gen.Deployments("prod", reg.Ref("app:1"), reg.Ref("side:2")))
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Commit(); err != nil {
		t.Fatal(err)
	}
	r := readReport(t, report)
	got := map[string]resolution.Source{}
	for _, im := range r.Images {
		got[im.Reference] = im.Source
	}
	if diff := cmp.Diff(map[string]resolution.Source{reg.Ref("app:1"): resolution.Lock, reg.Ref("side:2"): resolution.Registry}, got); diff != "" {
		t.Errorf("report sources (-want +got):\n%s", diff)
	}
}

// readReport reads and parses a report file.
func readReport(t *testing.T, path string) Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("parsing report %s: %v", path, err)
	}
	return r
}
