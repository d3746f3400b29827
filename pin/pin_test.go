package pin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/steady"
)

// refuse is a registry that fails the test when asked anything.
func refuse(t *testing.T) resolution.Resolver {
	return resolution.Func(func(_ context.Context, ref name.Reference) (resolution.Resolution, error) {
		t.Errorf("the registry was asked about %s", ref)
		return resolution.Resolution{}, errors.New("refused")
	})
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		o     Options
		field string
	}{
		{desc: "frozen and check", o: Options{Lock: "l", Frozen: true, Check: true}, field: "Frozen"},
		{desc: "frozen without a lock", o: Options{Frozen: true}, field: "Frozen"},
		{desc: "check without a lock", o: Options{Check: true}, field: "Check"},
		{desc: "negative TTL", o: Options{CacheTTL: -1}, field: "CacheTTL"},
		{desc: "cache folder without TTL", o: Options{CacheDir: "d"}, field: "CacheDir"},
		{desc: "platform without architecture", o: Options{Platform: &v1.Platform{OS: "linux"}}, field: "Platform"},
		{desc: "platform without OS", o: Options{Platform: &v1.Platform{Architecture: "amd64"}}, field: "Platform"},
		{desc: "previous and a store", o: Options{Previous: "p", Store: memStore{}, StateKey: "k"}, field: "Previous"},
		{desc: "store without a key", o: Options{Store: memStore{}}, field: "Store"},
		{desc: "key without a store", o: Options{StateKey: "k"}, field: "StateKey"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New(tc.o)
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Field != tc.field {
				t.Errorf("New(%+v) = %v, want an OptionError for %s", tc.o, err, tc.field)
			}
		})
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
	if !strings.Contains(string(res.Output), "registry.example/app:1@"+locked.String()) {
		t.Errorf("output does not pin the locked digest:\n%s", res.Output)
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

// nameDigests is a registry whose digest of a reference is the SHA-256 of
// its name and, for the references in moved, a salt: the registry state
// the steady package's fixtures were pinned against.
type nameDigests map[string]string

func (m nameDigests) Resolve(_ context.Context, ref name.Reference) (resolution.Resolution, error) {
	sum := sha256.Sum256([]byte(ref.Name() + m[ref.Name()]))
	return resolution.Resolution{Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, Source: resolution.Registry}, nil
}

// TestSteadyRenders runs the webhook chart's two renders and its previous
// output through a Pin: the previous output is written again when only the
// chart's randomness changed, and the person is told which fields churn.
func TestSteadyRenders(t *testing.T) {
	fixture := func(name string) string { return filepath.Join("..", "steady", "testdata", "webhook."+name+".yaml") }
	in, err := os.ReadFile(fixture("input"))
	if err != nil {
		t.Fatal(err)
	}
	previous, err := os.ReadFile(fixture("previous"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc         string
		volatileFrom string
		previous     string
		moved        nameDigests
		kept         bool
	}{
		{desc: "only the chart's randomness changed", volatileFrom: fixture("second"), previous: fixture("previous"), kept: true},
		{desc: "no second render", previous: fixture("previous")},
		{desc: "a first render", volatileFrom: fixture("second"), previous: filepath.Join(t.TempDir(), "none.yaml")},
		{desc: "an image moved", volatileFrom: fixture("second"), previous: fixture("previous"), moved: nameDigests{"registry.example/tz/tzinject:1.4": "moved"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var warnings []string
			report := filepath.Join(t.TempDir(), "report.json")
			o := Options{Registry: tc.moved, VolatileFrom: tc.volatileFrom, Previous: tc.previous, Report: report}
			if o.Registry == nil {
				o.Registry = nameDigests{}
			}
			o.Renderer.Warnf = func(f string, args ...any) { warnings = append(warnings, fmt.Sprintf(f, args...)) }
			p, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Pin(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(res.Output) == string(previous); got != tc.kept || res.KeptPrevious != tc.kept {
				t.Errorf("output is the previous one: %v (KeptPrevious %v), want %v", got, res.KeptPrevious, tc.kept)
			}
			if tc.moved != nil && !strings.Contains(string(res.Output), "@sha256:") {
				t.Errorf("the new output is not pinned:\n%s", res.Output)
			}
			wantWarning := "Deployment/tz/tzinject (tzinject/templates/deployment.yaml): pod template annotation checksum/config differs between two renders of the same input: this workload restarts on every render"
			if got := slices.Contains(warnings, wantWarning); got != (tc.volatileFrom != "") {
				t.Errorf("warnings %q: has %q: %v, want %v", warnings, wantWarning, got, tc.volatileFrom != "")
			}
			if err := res.Commit(); err != nil {
				t.Fatal(err)
			}
			r := readReport(t, report)
			restarts := slices.ContainsFunc(r.Volatile, func(v steady.Volatile) bool { return v.Object == "Deployment/tz/tzinject" && v.Restarts })
			if restarts != (tc.volatileFrom != "") {
				t.Errorf("report volatile = %+v, want the Deployment restarting: %v", r.Volatile, tc.volatileFrom != "")
			}
		})
	}
}

// memStore is a steady.Store in a map.
type memStore map[string][]byte

func (m memStore) Get(_ context.Context, key string) ([]byte, bool, error) {
	b, ok := m[key]
	return b, ok, nil
}

func (m memStore) Put(_ context.Context, key string, b []byte) error {
	m[key] = slices.Clone(b)
	return nil
}

// TestStateStore keeps the previous output in a DirStore: a first render
// stores its output only on Commit, a later render of the same input with
// new randomness writes it again byte for byte, a discarded run stores
// nothing, and a moved image replaces it.
func TestStateStore(t *testing.T) {
	fixture := func(name string) string { return filepath.Join("..", "steady", "testdata", "webhook."+name+".yaml") }
	in, err := os.ReadFile(fixture("input"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := steady.NewDirStore(filepath.Join(t.TempDir(), "state"), 0)
	if err != nil {
		t.Fatal(err)
	}
	const key = "tz/tzinject"
	pinWith := func(reg nameDigests, volatileFrom string, in []byte) *Result {
		t.Helper()
		p, err := New(Options{Registry: reg, VolatileFrom: volatileFrom, Store: store, StateKey: key})
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Pin(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	stored := func() []byte {
		t.Helper()
		b, ok, err := store.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return nil
		}
		return b
	}

	// First, a first render that is discarded stores nothing.
	pinWith(nameDigests{}, "", in).Discard()
	if b := stored(); b != nil {
		t.Fatalf("a discarded run stored %d bytes", len(b))
	}
	// Next, a first render that is written is stored as written.
	first := pinWith(nameDigests{}, "", in)
	if first.KeptPrevious {
		t.Error("a first render kept a previous output")
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := stored(); string(got) != string(first.Output) {
		t.Fatalf("stored %d bytes, want the output's %d", len(got), len(first.Output))
	}
	// The second render of the same input differs only in the chart's
	// randomness: the stored output is written again.
	second, err := os.ReadFile(fixture("second"))
	if err != nil {
		t.Fatal(err)
	}
	again := pinWith(nameDigests{}, fixture("input"), second)
	if !again.KeptPrevious || string(again.Output) != string(first.Output) {
		t.Errorf("output after new randomness: KeptPrevious %v, same bytes %v; want the first output", again.KeptPrevious, string(again.Output) == string(first.Output))
	}
	if err := again.Commit(); err != nil {
		t.Fatal(err)
	}
	// A moved image is real: the new output is written and stored.
	moved := pinWith(nameDigests{"registry.example/tz/tzinject:1.4": "moved"}, fixture("second"), in)
	if moved.KeptPrevious || string(moved.Output) == string(first.Output) {
		t.Fatalf("an image moved, and the output is the previous one")
	}
	if err := moved.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := stored(); string(got) != string(moved.Output) {
		t.Errorf("after a moved image the store holds %d bytes, want the new output's %d", len(got), len(moved.Output))
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
