package pin

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/config"
	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
)

// minAgeEpoch is when the clock of the waiting-period tests starts.
var minAgeEpoch = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// clock is a settable clock for Options.now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) set(d time.Duration) { c.mu.Lock(); c.t = minAgeEpoch.Add(d); c.mu.Unlock() }

// warnings collects a Pin's warnings.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) warnf(format string, args ...any) {
	w.mu.Lock()
	w.lines = append(w.lines, fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

// take returns the warnings so far, and forgets them.
func (w *warnings) take() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := strings.Join(w.lines, "\n")
	w.lines = nil
	return s
}

func mustMinAges(t *testing.T, specs ...string) *MinAges {
	t.Helper()
	m := &MinAges{}
	for _, s := range specs {
		if err := m.Add(s); err != nil {
			t.Fatalf("MinAges.Add(%q): %v", s, err)
		}
	}
	return m
}

// digestOf returns the digest res pinned ref to, and its source.
func digestOf(t *testing.T, res *Result, ref string) (string, resolution.Source) {
	t.Helper()
	n, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range res.Images {
		if im.Reference == n.Name() {
			return im.Digest, im.Source
		}
	}
	t.Fatalf("%s is not among the images", ref)
	return "", ""
}

// TestMinAgeThroughTheCache follows one tag through a waiting period kept
// in the cache alone (as the Argo CD plugin keeps it, on Redis): seen
// first → pinned at once; moved → the old digest stays, held, until the
// new one has been seen for the period; moved again while waiting → the
// wait starts again; the period over → the new digest is pinned. An image
// whose glob exempts it moves at once, and a second Pinner on the same
// cache (another replica) agrees at every step.
func TestMinAgeThroughTheCache(t *testing.T) {
	const web, side = "registry.example/shop/web:dev", "registry.example/shop/side:1"
	f := newFake(web, side)
	in := gen.Deployments("prod", web, side)
	clk := &clock{}
	clk.set(0)
	var w warnings
	cache := dirCache(t)
	o := Options{Registry: f, Cache: cache, CacheTTL: time.Nanosecond, MinAge: mustMinAges(t, "24h", "registry.example/shop/side=0"), now: clk.now, Changes: true}
	o.Renderer.Warnf = w.warnf

	pinAt := func(at time.Duration) *Result {
		t.Helper()
		clk.set(at)
		res, err := pinOnce(t, o, in)
		if err != nil {
			t.Fatalf("Pin at +%s: %v", at, err)
		}
		return res
	}
	check := func(res *Result, want string, source resolution.Source) {
		t.Helper()
		if d, s := digestOf(t, res, web); d != want || s != source {
			t.Errorf("%s pinned to %s (%s), want %s (%s)", web, ShortDigest(d), s, ShortDigest(want), source)
		}
	}
	d1 := f.digest(web).String()
	res := pinAt(0)
	check(res, d1, resolution.Registry)
	if got := w.take(); !strings.Contains(got, "1 image seen for the first time, pinned at once: MinAge has no earlier digest of theirs to keep: registry.example/shop/web:dev") || strings.Contains(got, "side") {
		t.Errorf("first Pin warned %q, want web named as seen first, and side (exempt) not", got)
	}

	d2 := f.push(web).String()
	f.push(side)
	res = pinAt(time.Hour)
	check(res, d1, resolution.Held)
	if d, s := digestOf(t, res, side); d != f.digest(side).String() || s != resolution.Registry {
		t.Errorf("side (exempt) pinned to %s (%s), want its new digest at once", ShortDigest(d), s)
	}
	wantWarn := "1 new digest waits for MinAge: the digest pinned before stays until then: registry.example/shop/web:dev (" + ShortDigest(d2) + " until 2026-12-02 11:00 UTC)"
	if got := w.take(); got != wantWarn {
		t.Errorf("warnings = %q, want %q", got, wantWarn)
	}
	if p := res.waiting[waitKey(mustName(t, web), "")]; p.Digest != d2 || !p.Since.Equal(minAgeEpoch.Add(time.Hour)) || !p.Until.Equal(minAgeEpoch.Add(25*time.Hour)) {
		t.Errorf("waiting = %+v, want %s since +1h until +25h", p, ShortDigest(d2))
	}

	// Another replica, hours later, sees the same first sighting.
	other := o
	var w2 warnings
	other.Renderer.Warnf = w2.warnf
	clk.set(20 * time.Hour)
	res2, err := pinOnce(t, other, in)
	if err != nil {
		t.Fatal(err)
	}
	check(res2, d1, resolution.Held)
	if got := w2.take(); !strings.Contains(got, "until 2026-12-02 11:00 UTC") {
		t.Errorf("the second replica warned %q, want the first sighting's end", got)
	}

	// A newer push while the first waits starts the wait again.
	d3 := f.push(web).String()
	res = pinAt(22 * time.Hour)
	check(res, d1, resolution.Held)
	if got := w.take(); !strings.Contains(got, ShortDigest(d3)+" until 2026-12-03 08:00 UTC") {
		t.Errorf("warnings = %q, want %s waiting until +46h", got, ShortDigest(d3))
	}
	res = pinAt(45*time.Hour + 59*time.Minute)
	check(res, d1, resolution.Held)
	// Against the cache, a digest held is unchanged: the cache's
	// resolution is the registry's newer answer, not what was pinned.
	if got, want := string(res.Changes.Text()), "no image moved, 2 unchanged, 1 waiting (against the cache)\n"; !strings.HasPrefix(got, want) {
		t.Errorf("change set while waiting = %q, want %q", got, want)
	}
	w.take()
	res = pinAt(46 * time.Hour)
	check(res, d3, resolution.Registry)
	if got, want := string(res.Changes.Text()), "1 image moved, 1 unchanged (against the cache)\nregistry.example/shop/web:dev "+ShortDigest(d1)+" → "+ShortDigest(d3); !strings.HasPrefix(got, want) {
		t.Errorf("change set after the wait = %q, want %q", got, want)
	}
	if got := w.take(); got != "" {
		t.Errorf("the Pin that ends the wait warned %q, want nothing", got)
	}
	res = pinAt(47 * time.Hour)
	check(res, d3, resolution.Registry)
	if len(res.waiting) != 0 {
		t.Errorf("waiting = %v after the wait, want none", res.waiting)
	}
}

func mustName(t *testing.T, ref string) string {
	t.Helper()
	n, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	return n.Name()
}

// TestMinAgeThroughTheLockFile keeps the waiting period in the lock file
// alone (a CI step that writes it, no cache): the file says what waits
// since when, a later run reads it back, and Check takes a digest that
// waits as no difference until its period is over.
func TestMinAgeThroughTheLockFile(t *testing.T) {
	const web = "registry.example/shop/web:dev"
	f := newFake(web)
	in := gen.Deployments("prod", web)
	clk := &clock{}
	dir := t.TempDir()
	lock := filepath.Join(dir, "digestpin.lock")
	o := Options{Registry: f, WriteLock: lock, MinAge: mustMinAges(t, "2h"), now: clk.now}
	var w warnings
	o.Renderer.Warnf = w.warnf
	pinAt := func(at time.Duration, o Options) (*Result, error) {
		t.Helper()
		clk.set(at)
		return pinOnce(t, o, in)
	}
	d1 := f.digest(web).String()
	if _, err := pinAt(0, o); err != nil {
		t.Fatal(err)
	}
	d2 := f.push(web).String()
	res, err := pinAt(30*time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	if d, s := digestOf(t, res, web); d != d1 || s != resolution.Held {
		t.Errorf("pinned %s (%s), want %s held", ShortDigest(d), s, ShortDigest(d1))
	}
	l, err := lockfile.Read(lock)
	if err != nil {
		t.Fatal(err)
	}
	ref := name.MustParseReference(web)
	if h, _ := l.Lookup(ref, ""); h.String() != d1 {
		t.Errorf("lock file locks %s, want %s", h, d1)
	}
	want := &lockfile.Pending{Digest: d2, Since: minAgeEpoch.Add(30 * time.Minute)}
	if p := l.Pending(ref, "", ""); p == nil || *p != *want {
		t.Errorf("lock file pending = %+v, want %+v", p, want)
	}
	if b := string(readFile(t, lock)); !strings.Contains(b, "version: 5\n") {
		t.Errorf("lock file:\n%s\nwant version 5", b)
	}

	// Check, before the period ends: the lock file is as it should be.
	check := Options{Registry: f, Lock: lock, Check: true, MinAge: o.MinAge, now: clk.now}
	if _, err := pinAt(2*time.Hour+29*time.Minute, check); err != nil {
		t.Errorf("Check while %s waits = %v, want no difference", ShortDigest(d2), err)
	}
	// After: the lock file should move on.
	if _, err := pinAt(2*time.Hour+30*time.Minute, check); !errors.Is(err, ErrLockDiffers) {
		t.Errorf("Check after the wait = %v, want ErrLockDiffers", err)
	}

	res, err = pinAt(2*time.Hour+30*time.Minute, o)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := digestOf(t, res, web); d != d2 {
		t.Errorf("after the wait pinned %s, want %s", ShortDigest(d), ShortDigest(d2))
	}
	if l, err = lockfile.Read(lock); err != nil {
		t.Fatal(err)
	}
	if p := l.Pending(ref, "", ""); p != nil {
		t.Errorf("lock file pending = %+v after the wait, want none", p)
	}
	if b := string(readFile(t, lock)); !strings.Contains(b, "version: 1\n") {
		t.Errorf("lock file:\n%s\nwant version 1 again once nothing waits", b)
	}
}

// TestMinAgeClockWentBack: a first sighting in the future (the clock
// went back) is not trusted: the wait starts again from now, never ends
// early; and a held record that is no record is warned about and
// ignored, never trusted.
func TestMinAgeClockWentBack(t *testing.T) {
	const web = "registry.example/shop/web:dev"
	f := newFake(web)
	in := gen.Deployments("prod", web)
	clk := &clock{}
	cache := dirCache(t)
	var w warnings
	o := Options{Registry: f, Cache: cache, CacheTTL: time.Nanosecond, MinAge: mustMinAges(t, "1h"), now: clk.now}
	o.Renderer.Warnf = w.warnf
	clk.set(10 * time.Hour)
	if _, err := pinOnce(t, o, in); err != nil {
		t.Fatal(err)
	}
	d1 := f.digest(web).String()
	f.push(web)
	clk.set(10 * time.Hour)
	if _, err := pinOnce(t, o, in); err != nil {
		t.Fatal(err)
	}
	w.take()
	// The clock goes back 5 hours, then on 1h59m: by the recorded
	// sighting the wait is over, by the clock it began at +5h.
	clk.set(5 * time.Hour)
	res, err := pinOnce(t, o, in)
	if err != nil {
		t.Fatal(err)
	}
	if d, s := digestOf(t, res, web); d != d1 || s != resolution.Held {
		t.Errorf("after the clock went back: %s (%s), want %s held", ShortDigest(d), s, ShortDigest(d1))
	}
	clk.set(5*time.Hour + 59*time.Minute)
	if res, err = pinOnce(t, o, in); err != nil {
		t.Fatal(err)
	}
	if d, _ := digestOf(t, res, web); d != d1 {
		t.Errorf("59m after the clock went back: %s, want %s still held", ShortDigest(d), ShortDigest(d1))
	}
	// An hour after the jump the new digest has been seen for an hour,
	// by any clock: the wait is over.
	clk.set(6 * time.Hour)
	if res, err = pinOnce(t, o, in); err != nil {
		t.Fatal(err)
	}
	if d, _ := digestOf(t, res, web); d != f.digest(web).String() {
		t.Errorf("1h after the clock went back: %s, want the new digest", ShortDigest(d))
	}
	w.take()

	// A record that someone who can write the cache spoilt.
	key := "held\n" + mustName(t, web) + "\n\n1h0m0s\nplatform "
	recs, err := resolve.NewRecords(cache, heldTTL)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"digest":"sha256:ab"}`, `{"digest":"` + d1 + `","mediaType":"text/html"}`, `{"digest":"` + d1 + `","pending":{"digest":"` + d1 + `","since":"2026-12-01T00:00:00Z"}}`, `[1]`} {
		if err := recs.Put(t.Context(), key, json.RawMessage(bad)); err != nil {
			t.Fatal(err)
		}
		if _, err := pinOnce(t, o, in); err != nil {
			t.Fatal(err)
		}
		if got := w.take(); !strings.Contains(got, "ignoring the cache's record of its waiting period (MinAge)") || !strings.Contains(got, "seen for the first time") {
			t.Errorf("with record %s: warnings %q, want it ignored and the image seen first", bad, got)
		}
	}
}

// TestMinAgePolicyAndCreated: under a tag policy the chosen tag waits
// with its digest, and the lock file's pending entry names it; with
// MinAgeCreated the period counts from the build time the registry
// gives.
func TestMinAgePolicyAndCreated(t *testing.T) {
	f := shopFake()
	in := gen.Deployments("prod", "registry.example/shop/web:1.4")
	clk := &clock{}
	lock := filepath.Join(t.TempDir(), "digestpin.lock")
	o := Options{Registry: f, WriteLock: lock, TagPolicies: mustPolicies(t, "registry.example/shop/web=semver:~1.4"), MinAge: mustMinAges(t, "registry.example/shop/**=6h"), now: clk.now}
	clk.set(0)
	res, err := pinOnce(t, o, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Images[0].Tag != "1.4.2" {
		t.Fatalf("chose %s, want 1.4.2", res.Images[0].Tag)
	}
	f.push("registry.example/shop/web:1.4.3")
	clk.set(time.Hour)
	res, err = pinOnce(t, o, in)
	if err != nil {
		t.Fatal(err)
	}
	if im := res.Images[0]; im.Tag != "1.4.2" || im.Source != resolution.Held || !strings.Contains(string(res.Bytes()), "registry.example/shop/web:1.4.2@") {
		t.Errorf("pinned %s@%s (%s), want 1.4.2 held:\n%s", im.Tag, ShortDigest(im.Digest), im.Source, res.Bytes())
	}
	l, err := lockfile.Read(lock)
	if err != nil {
		t.Fatal(err)
	}
	if p := l.Pending(name.MustParseReference("registry.example/shop/web:1.4"), "", "semver:~1.4"); p == nil || p.Tag != "1.4.3" {
		t.Errorf("lock file pending = %+v, want tag 1.4.3", p)
	}

	// Counted from the build time: an hour after the fake built 1.4.3
	// it still waits (the first sighting, in the clock's future, is not
	// trusted either)...
	o.MinAgeCreated = true
	built := f.built[f.digest("registry.example/shop/web:1.4.3")]
	clk.mu.Lock()
	clk.t = built.Add(time.Hour)
	clk.mu.Unlock()
	res, err = pinOnce(t, o, in)
	if err != nil {
		t.Fatal(err)
	}
	if im := res.Images[0]; im.Tag != "1.4.2" || im.Source != resolution.Held {
		t.Errorf("with MinAgeCreated, an hour after the build: pinned %s (%s), want 1.4.2 held", im.Tag, im.Source)
	}
	if p := res.waiting[waitKey(mustName(t, "registry.example/shop/web:1.4"), "semver:~1.4")]; p.Created == nil || !p.Created.Equal(built) || !p.Until.Equal(built.Add(6*time.Hour)) {
		t.Errorf("waiting = %+v, want created %s, until 6h later", p, built)
	}
	// ...and at the clock of the test, long after, it is over.
	clk.set(time.Hour)
	res, err = pinOnce(t, o, in)
	if err != nil {
		t.Fatal(err)
	}
	if im := res.Images[0]; im.Tag != "1.4.3" || im.Source == resolution.Held {
		t.Errorf("with MinAgeCreated pinned %s (%s), want 1.4.3: built long before", im.Tag, im.Source)
	}
}

// TestMinAgeOptions: what cannot work is refused in a line; the specs
// of MinAges.
func TestMinAgeOptions(t *testing.T) {
	f := newFake("registry.example/shop/web:dev")
	for _, tc := range []struct {
		desc string
		o    Options
		want string
	}{
		{"frozen", Options{Registry: f, Lock: "x.lock", Frozen: true, MinAge: mustMinAges(t, "1h")}, "MinAge excludes Frozen: a frozen run asks no registry, so no digest is new to it"},
		{"nowhere to keep it", Options{Registry: f, MinAge: mustMinAges(t, "1h")}, "MinAge needs CacheTTL or a lock file to write, to keep when each new digest was first seen"},
		{"created alone", Options{Registry: f, CacheTTL: time.Hour, MinAgeCreated: true}, "MinAgeCreated needs MinAge DURATION"},
		{"all exempt", Options{Registry: f, MinAgeCreated: true, MinAge: mustMinAges(t, "0")}, "MinAgeCreated needs MinAge"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := New(tc.o); err == nil || err.Error() != tc.want && !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("New = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := New(Options{Registry: f, MinAge: mustMinAges(t, "0")}); err != nil {
		t.Errorf("a period of 0 holds nothing back and needs nothing: %v", err)
	}

	for _, tc := range []struct {
		specs []string
		want  string
	}{
		{[]string{"-1h"}, `"-1h": a waiting period must not be negative`},
		{[]string{"1d"}, `"1d": want DURATION or IMAGE-GLOB=DURATION, e.g. 24h or ghcr.io/acme/**=0: "1d" is no duration (Go's syntax: 72h, 90m, 1h30m)`},
		{[]string{"nginx=soon"}, `"nginx=soon": want DURATION or IMAGE-GLOB=DURATION`},
		{[]string{"1h", "2h"}, `"2h": the default waiting period is 1h0m0s already`},
		{[]string{"nginx=1h", "docker.io/library/nginx=2h"}, `"docker.io/library/nginx=2h": docker.io/library/nginx has a waiting period already (nginx=1h0m0s)`},
		{[]string{"nginx:1.27=1h"}, `"nginx:1.27=1h": glob "nginx:1.27": a repository has no tag, digest or space`},
		{[]string{"=1h"}, `"=1h": empty image glob`},
	} {
		m := &MinAges{}
		var err error
		for _, s := range tc.specs {
			if err = m.Add(s); err != nil {
				break
			}
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Add(%q) = %v, want %q", tc.specs, err, tc.want)
		}
	}
	m := mustMinAges(t, "24h", "ghcr.io/acme/**=0", "ghcr.io/acme/vendored/*=1h")
	for repo, want := range map[string]time.Duration{"nginx": 24 * time.Hour, "ghcr.io/acme/web": 0, "ghcr.io/acme/vendored/redis": time.Hour, "ghcr.io/other/web": 24 * time.Hour} {
		r, _ := name.NewRepository(repo)
		if got := m.For(r); got != want {
			t.Errorf("For(%s) = %s, want %s", repo, got, want)
		}
	}
}

// TestMinAgeGolden: the summaries and the report of a run where one
// image waits, one moved (exempt), one is unchanged; pinning the output
// again changes nothing.
func TestMinAgeGolden(t *testing.T) {
	const web, tool, db = "registry.example/shop/web:dev", "registry.example/shop/tool:1", "registry.example/shop/db:16"
	f := newFake(web, tool, db)
	in := gen.Deployments("prod", web, tool, db)
	clk := &clock{}
	dir := t.TempDir()
	o := Options{Registry: f, WriteLock: filepath.Join(dir, "digestpin.lock"), MinAge: mustMinAges(t, "48h", "registry.example/shop/tool=0"), now: clk.now}
	clk.set(0)
	if _, err := pinOnce(t, o, in); err != nil {
		t.Fatal(err)
	}
	f.push(web)
	f.push(tool)
	clk.set(90 * time.Minute)
	o.Summary, o.SummaryText, o.Report = filepath.Join(dir, "summary.md"), filepath.Join(dir, "summary.txt"), filepath.Join(dir, "report.json")
	res, err := pinOnce(t, o, in)
	if err != nil {
		t.Fatal(err)
	}
	for golden, path := range map[string]string{"minage.summary.md": o.Summary, "minage.summary.txt": o.SummaryText, "minage.report.json": o.Report, "minage.lock": o.WriteLock} {
		compareGolden(t, filepath.Join("testdata", golden), readFile(t, path))
	}
	out := res.Bytes()
	o.Summary, o.SummaryText, o.Report, o.WriteLock = "", "", "", ""
	o.Lock, o.Changes, o.MinAge = filepath.Join(dir, "digestpin.lock"), true, nil
	again, err := pinOnce(t, o, out)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Bytes()) != string(out) {
		t.Errorf("Pin of its own output changed it:\n%s", again.Bytes())
	}
}

// TestMinAgeConfig: a configuration file's waiting periods, with the
// flags' over them (the default, the same glob); a bad one names its line.
func TestMinAgeConfig(t *testing.T) {
	c, err := config.Parse("digestpin.yaml", []byte("apiVersion: digestpin.dev/v1alpha1\nkind: Config\nminAge:\n  - 24h\n  - ghcr.io/acme/**=0\n  - nginx=1h\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{MinAge: mustMinAges(t, "2h", "docker.io/library/nginx=0")}
	if err := o.AddConfig(c); err != nil {
		t.Fatal(err)
	}
	for repo, want := range map[string]time.Duration{"nginx": 0, "ghcr.io/acme/web": 0, "quay.io/x/y": 2 * time.Hour} {
		r, _ := name.NewRepository(repo)
		if got := o.MinAge.For(r); got != want {
			t.Errorf("For(%s) = %s, want %s", repo, got, want)
		}
	}
	c, err = config.Parse("digestpin.yaml", []byte("apiVersion: digestpin.dev/v1alpha1\nkind: Config\nminAge:\n  - 24h\n  - soon\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := `digestpin.yaml, line 5: minAge: "soon": want DURATION or IMAGE-GLOB=DURATION`
	if err := (&Options{}).AddConfig(c); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("AddConfig = %v, want %q", err, want)
	}
}

// TestMinAgePeriodsApart: two renders on one cache under different
// periods (two Applications' configuration files, one Redis) keep states
// apart: the shorter period's end pins the new digest for it alone.
func TestMinAgePeriodsApart(t *testing.T) {
	const web = "registry.example/shop/web:dev"
	f := newFake(web)
	in := gen.Deployments("prod", web)
	clk := &clock{}
	cache := dirCache(t)
	short := Options{Registry: f, Cache: cache, CacheTTL: time.Nanosecond, MinAge: mustMinAges(t, "1h"), now: clk.now}
	long := short
	long.MinAge = mustMinAges(t, "24h")
	d1 := f.digest(web).String()
	clk.set(0)
	for _, o := range []Options{short, long} {
		if _, err := pinOnce(t, o, in); err != nil {
			t.Fatal(err)
		}
	}
	d2 := f.push(web).String()
	for _, at := range []time.Duration{time.Minute, 2 * time.Hour} {
		clk.set(at)
		for _, tc := range []struct {
			o    Options
			want string
		}{{short, map[bool]string{true: d2, false: d1}[at > time.Hour]}, {long, d1}} {
			res, err := pinOnce(t, tc.o, in)
			if err != nil {
				t.Fatal(err)
			}
			if d, _ := digestOf(t, res, web); d != tc.want {
				t.Errorf("at +%s under %v: pinned %s, want %s", at, tc.o.MinAge.def, ShortDigest(d), ShortDigest(tc.want))
			}
		}
	}
}
