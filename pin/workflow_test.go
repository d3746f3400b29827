package pin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
)

// webTags are the tags of registry.example/shop/web in a fakeRegistry,
// pushed in this order.
var webTags = []string{"1.4.1", "1.4.2", "1.5.0", "2.0.0-rc.1", "2.0.0"}

// shopFake is a fakeRegistry with shop/web's webTags, shop/web:1.4 and
// shop/side:1.
func shopFake() *fakeRegistry {
	f := newFake()
	for _, tag := range webTags {
		f.push("registry.example/shop/web:" + tag)
	}
	f.push("registry.example/shop/web:1.4")
	f.push("registry.example/shop/side:1")
	return f
}

// pinOnce makes a Pinner of o and pins in, committing its files.
func pinOnce(t *testing.T, o Options, in []byte) (*Result, error) {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	res, err := p.Pin(context.Background(), in)
	if err != nil {
		return nil, err
	}
	if err := res.Commit(); err != nil {
		t.Fatal(err)
	}
	return res, nil
}

// sourcesOf returns each image's source, by reference.
func sourcesOf(res *Result) map[string]resolution.Source {
	out := map[string]resolution.Source{}
	for _, im := range res.Images {
		out[im.Reference] = im.Source
	}
	return out
}

// TestLockWorkflows records a lock file with WriteLock, changes the
// registry, then pins with the lock file: Frozen replays it without a
// request, a Lock alone takes its digests and resolves what it lacks,
// and Check compares every image with the registry, failing with
// ErrLockDiffers and a line per difference.
func TestLockWorkflows(t *testing.T) {
	in := gen.Deployments("shop", "registry.example/shop/web:1.4", "registry.example/shop/side:1")
	semver := "registry.example/shop/web=semver:~1.4"
	for _, tc := range []struct {
		desc     string
		record   []string // the tag policies of the recording Pin
		policies []string // those of the second Pin; nil: record's
		change   func(f *fakeRegistry)
		in       []byte // the second Pin's input; nil: in
		opts     Options
		same     bool // the second output is the recording's
		sources  map[string]resolution.Source
		asked    int
		listings int
		wantErr  []string
		differs  bool // the error is ErrLockDiffers
	}{
		{
			desc: "frozen replays the lock file offline", opts: Options{Frozen: true},
			change: func(f *fakeRegistry) { f.push("registry.example/shop/web:1.4") },
			same:   true, sources: map[string]resolution.Source{"registry.example/shop/web:1.4": resolution.Lock, "registry.example/shop/side:1": resolution.Lock},
		},
		{
			desc: "frozen fails on every missing reference", opts: Options{Frozen: true},
			in: gen.Deployments("shop", "registry.example/shop/web:1.4", "registry.example/shop/b:1", "registry.example/shop/c:1"),
			wantErr: []string{
				`w1.yaml`, `container "app": registry.example/shop/b:1: not in the lock file, and Frozen asks no registry`,
				`w2.yaml`, `container "app": registry.example/shop/c:1: not in the lock file`,
			},
		},
		{
			desc: "frozen fails although unresolved images are kept", opts: Options{Frozen: true, Renderer: keepUnresolved()},
			in:      gen.Deployments("shop", "registry.example/shop/web:1.4", "registry.example/shop/b:1", "registry.example/shop/c:1"),
			wantErr: []string{"2 image(s) not in lock file LOCK (Frozen asks no registry): registry.example/shop/b:1, registry.example/shop/c:1"},
		},
		{
			desc:    "a lock file's digest wins, and what it lacks is resolved",
			change:  func(f *fakeRegistry) { f.push("registry.example/shop/web:1.4"); f.push("registry.example/shop/new:1") },
			in:      gen.Deployments("shop", "registry.example/shop/web:1.4", "registry.example/shop/new:1"),
			sources: map[string]resolution.Source{"registry.example/shop/web:1.4": resolution.Lock, "registry.example/shop/new:1": resolution.Registry},
			asked:   1,
		},
		{
			desc: "check passes when nothing moved, asking about every image", opts: Options{Check: true},
			same: true, asked: 2,
			sources: map[string]resolution.Source{"registry.example/shop/web:1.4": resolution.Registry, "registry.example/shop/side:1": resolution.Registry},
		},
		{
			desc: "check names every difference", opts: Options{Check: true},
			change: func(f *fakeRegistry) { f.push("registry.example/shop/web:1.4"); f.push("registry.example/shop/new:1") },
			in:     gen.Deployments("shop", "registry.example/shop/web:1.4", "registry.example/shop/side:1", "registry.example/shop/new:1"),
			asked:  3, differs: true,
			wantErr: []string{
				"the registry differs from lock file LOCK for 2 image(s)\n",
				"  registry.example/shop/new:1: not in the lock file; the registry serves sha256:",
				"  registry.example/shop/web:1.4: moved from sha256:",
			},
		},
		{
			desc: "check asks no cache", opts: Options{Check: true, CacheTTL: time.Hour},
			change: func(f *fakeRegistry) { f.push("registry.example/shop/side:1") },
			asked:  2, differs: true,
			wantErr: []string{"registry.example/shop/side:1: moved from sha256:"},
		},
		// With a tag policy, the lock file holds the choice.
		{
			desc: "frozen replays a policy's choice", record: []string{semver}, opts: Options{Frozen: true},
			change: func(f *fakeRegistry) { f.push("registry.example/shop/web:1.4.8") },
			same:   true,
		},
		{
			desc: "frozen refuses another policy", record: []string{semver}, opts: Options{Frozen: true},
			policies: []string{"registry.example/shop/web=semver:^1"},
			wantErr:  []string{"registry.example/shop/web:1.4: not in the lock file, and Frozen asks no registry"},
		},
		{
			desc: "a lock file's choice holds without a listing", record: []string{semver},
			change: func(f *fakeRegistry) { f.push("registry.example/shop/web:1.4.8") },
			same:   true, sources: map[string]resolution.Source{"registry.example/shop/web:1.4": resolution.Lock, "registry.example/shop/side:1": resolution.Lock},
		},
		{
			desc: "check passes while the policy's choice stands", record: []string{semver}, opts: Options{Check: true},
			same: true, asked: 2, listings: 1,
		},
		{
			desc: "check finds a newer matching tag", record: []string{semver}, opts: Options{Check: true},
			change: func(f *fakeRegistry) { f.push("registry.example/shop/web:1.4.8") },
			asked:  2, listings: 1, differs: true,
			wantErr: []string{"registry.example/shop/web: policy semver:~1.4 chose 1.4.2, registry now has 1.4.8"},
		},
		{
			desc: "check finds the chosen tag moved", record: []string{semver}, opts: Options{Check: true},
			change: func(f *fakeRegistry) { f.push("registry.example/shop/web:1.4.2") },
			asked:  2, listings: 1, differs: true,
			wantErr: []string{"registry.example/shop/web: policy semver:~1.4 chose 1.4.2, which moved from sha256:"},
		},
		{
			desc: "check finds a policy the lock file lacks", opts: Options{Check: true}, policies: []string{semver},
			asked: 2, listings: 1, differs: true,
			wantErr: []string{"registry.example/shop/web:1.4: not in the lock file with policy semver:~1.4; the registry now has 1.4.2 (sha256:"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := shopFake()
			lock := filepath.Join(t.TempDir(), "digests.lock")
			rec := Options{Registry: f, WriteLock: lock}
			if len(tc.record) > 0 {
				rec.TagPolicies = mustPolicies(t, tc.record...)
			}
			recorded, err := pinOnce(t, rec, in)
			if err != nil {
				t.Fatalf("recording: %v", err)
			}
			if tc.change != nil {
				tc.change(f)
			}
			f.counts()

			o := tc.opts
			o.Registry, o.Lock = f, lock
			o.TagPolicies = rec.TagPolicies
			if tc.policies != nil {
				o.TagPolicies = mustPolicies(t, tc.policies...)
			}
			if o.CacheTTL > 0 {
				o.CacheDir = t.TempDir()
			}
			src := tc.in
			if src == nil {
				src = in
			}
			res, err := pinOnce(t, o, src)
			if asked, listings := f.counts(); asked != tc.asked || listings != tc.listings {
				t.Errorf("Pin() asked the registry %d times and listed tags %d times, want %d and %d", asked, listings, tc.asked, tc.listings)
			}
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Pin() = %d bytes, want an error", len(res.Bytes()))
				}
				for _, w := range tc.wantErr {
					if w = strings.ReplaceAll(w, "LOCK", lock); !strings.Contains(err.Error(), w) {
						t.Errorf("Pin() = %v\nwant it to say %q", err, w)
					}
				}
				if got := errors.Is(err, ErrLockDiffers); got != tc.differs {
					t.Errorf("errors.Is(%v, ErrLockDiffers) = %v, want %v", err, got, tc.differs)
				}
				return
			}
			if err != nil {
				t.Fatalf("Pin() = %v", err)
			}
			if got := string(res.Bytes()) == string(recorded.Bytes()); got != tc.same {
				t.Errorf("output is the recording's: %v, want %v:\n%s", got, tc.same, res.Bytes())
			}
			if tc.sources != nil {
				if diff := cmp.Diff(tc.sources, sourcesOf(res)); diff != "" {
					t.Errorf("sources (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// keepUnresolved is a Renderer that keeps unresolved images.
func keepUnresolved() (r renderer.Renderer) {
	r.KeepUnresolved = true
	return r
}

// TestCacheWorkflows pins twice with the same cache: within the TTL the
// second Pin asks no registry, and says its digests came from the cache;
// tag policies' choices are cached too. Frozen Pins and a zero TTL never
// touch the cache.
func TestCacheWorkflows(t *testing.T) {
	in := gen.Deployments("shop", "registry.example/shop/web:1.4", "registry.example/shop/side:1")
	for _, tc := range []struct {
		desc     string
		opts     Options
		asked    int // by the second Pin
		listings int
		source   resolution.Source
	}{
		{desc: "a folder", opts: Options{CacheTTL: time.Hour}, source: resolution.Cache},
		{desc: "a shared cache", opts: Options{CacheTTL: time.Hour, Cache: dirCache(t)}, source: resolution.Cache},
		{desc: "a tag policy's choice", opts: Options{CacheTTL: time.Hour, TagPolicies: mustPolicies(t, "registry.example/shop/web=semver:~1.4")}, source: resolution.Cache},
		{desc: "an expired entry", opts: Options{CacheTTL: time.Nanosecond}, asked: 2, source: resolution.Registry},
		{desc: "no TTL, no cache", opts: Options{}, asked: 2, source: resolution.Registry},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := shopFake()
			o := tc.opts
			o.Registry = f
			if o.Cache == nil && o.CacheTTL > 0 {
				o.CacheDir = t.TempDir()
			}
			first, err := pinOnce(t, o, in)
			if err != nil {
				t.Fatal(err)
			}
			if tc.source != resolution.Registry {
				// A cache hit must come from the cache, not from a
				// registry that happens to say the same.
				f.push("registry.example/shop/side:1")
			}
			f.counts()
			time.Sleep(time.Millisecond)
			second, err := pinOnce(t, o, in)
			if err != nil {
				t.Fatal(err)
			}
			if asked, listings := f.counts(); asked != tc.asked || listings != tc.listings {
				t.Errorf("second Pin asked the registry %d times and listed tags %d times, want %d and %d", asked, listings, tc.asked, tc.listings)
			}
			if tc.source == resolution.Cache && string(second.Bytes()) != string(first.Bytes()) {
				t.Errorf("cached output differs:\n%s\nvs\n%s", second.Bytes(), first.Bytes())
			}
			for ref, s := range sourcesOf(second) {
				if s != tc.source {
					t.Errorf("%s: source %s, want %s", ref, s, tc.source)
				}
			}
		})
	}
}

// dirCache returns a DirCache in a new folder.
func dirCache(t *testing.T) *resolve.DirCache {
	t.Helper()
	c, err := resolve.NewDirCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDefaultCacheDir checks that a CacheTTL without CacheDir keeps the
// cache in the user's cache folder, and that a folder that cannot be
// made fails the Pin, naming it.
func TestDefaultCacheDir(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	in := gen.Deployments("prod", reg.Ref("app:1"))
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", home)
	var logs []string
	o := Options{CacheTTL: 10 * time.Minute, Logf: func(format string, args ...any) { logs = append(logs, format) }}
	if _, err := pinOnce(t, o, in); err != nil {
		t.Fatal(err)
	}
	des, err := os.ReadDir(filepath.Join(home, "digestpin"))
	// The resolution, and the registry's ping answer (the auth cache).
	if err != nil || len(des) != 2 {
		t.Errorf("default cache folder holds %d entries (%v), want 2", len(des), err)
	}
	if !strings.Contains(strings.Join(logs, "\n"), "resolution cache in %s, TTL %s") {
		t.Errorf("logs = %q, want the cache folder", logs)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{CacheTTL: time.Minute, CacheDir: filepath.Join(file, "sub")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pin(context.Background(), in); err == nil || !strings.Contains(err.Error(), "creating cache folder") {
		t.Errorf("Pin(cache folder under a file) = %v, want it to say creating cache folder", err)
	}
}

// TestKeelErrors checks the Keel workflows that fail the Pin: one
// reference under two policies, naming both workloads and where they
// are, and a policy Keel does not have.
func TestKeelErrors(t *testing.T) {
	f := shopFake()
	deployment := func(name, meta, image string) string {
		return "---\n# Source: shop/templates/" + name + ".yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n" + meta +
			"spec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: " + image + "\n"
	}
	patch := "  annotations:\n    keel.sh/policy: patch\n"
	for _, tc := range []struct {
		desc string
		in   string
		want string
	}{
		{
			desc: "a policy, then none",
			in:   deployment("a", patch, "registry.example/shop/web:1.4.1") + deployment("b", "", "registry.example/shop/web:1.4.1"),
			want: `document 2 (shop/templates/b.yaml), line 26 (rendered line 10 of the template): Deployment/b container "app": registry.example/shop/web:1.4.1 would follow its own tag, but Deployment/a container "app" (document 1 (shop/templates/a.yaml), line 14 (rendered line 12 of the template)) uses it with policy semver:>=1.4.1, <1.5.0-0`,
		},
		{
			desc: "none, then a policy",
			in:   deployment("a", "", "registry.example/shop/web:1.4.1") + deployment("b", patch, "registry.example/shop/web:1.4.1"),
			want: `Deployment/b container "app": registry.example/shop/web:1.4.1 would follow policy semver:>=1.4.1, <1.5.0-0, but Deployment/a container "app" (document 1 (shop/templates/a.yaml), line 12 (rendered line 10 of the template)) uses it with its own tag`,
		},
		{
			desc: "an unknown policy",
			in:   deployment("a", "  annotations:\n    keel.sh/policy: sometimes\n", "registry.example/shop/web:1.4.1"),
			want: `document 1 (shop/templates/a.yaml), line 14 (rendered line 12 of the template): Deployment/a container "app": unknown keel policy "sometimes"`,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p, err := New(Options{Registry: f, KeelAnnotations: true})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Pin(context.Background(), []byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Pin() = %v\nwant it to say %q", err, tc.want)
			}
			if asked, listings := f.counts(); asked+listings != 0 {
				t.Errorf("a refused Keel workflow asked the registry %d times and listed tags %d times, want none", asked, listings)
			}
		})
	}
	// Without KeelAnnotations, Keel's annotations mean nothing.
	res, err := pinOnce(t, Options{Registry: f}, []byte(deployment("a", patch, "registry.example/shop/web:1.4.1")))
	if err != nil {
		t.Fatal(err)
	}
	if want := "image: registry.example/shop/web:1.4.1@" + f.digest("registry.example/shop/web:1.4.1").String() + "\n"; !strings.Contains(string(res.Bytes()), want) {
		t.Errorf("output lacks %q:\n%s", want, res.Bytes())
	}
}

// TestMirrors checks what a Pin says of the registry resolver's mirrors:
// the mirror that answered in the debug log, and a warning for a mirror
// that no image is from (a typo), whether the render succeeds or fails.
func TestMirrors(t *testing.T) {
	reg, mirror := testregistry.New(t), testregistry.New(t)
	reg.PushImage(t, "shop/web:1")
	mirror.PushImage(t, "cache/shop/web:1")
	typo := resolve.WithMirror("registry.exmple", mirror.Host()+"/cache")
	warning := "registry mirror registry.exmple=" + mirror.Host() + "/cache: no image is from registry.exmple, so the mirror is never asked"
	for _, tc := range []struct {
		desc    string
		mirrors []resolve.Option
		in      []byte
		fail    bool
		warn    bool
		log     string
	}{
		{desc: "a mirror in use", mirrors: []resolve.Option{resolve.WithMirror(reg.Host(), mirror.Host()+"/cache"), resolve.WithMirrorOnly(true)}, in: gen.Deployments("", reg.Ref("shop/web:1")), log: reg.Ref("shop/web:1") + ": sha256:"},
		{desc: "a typo", mirrors: []resolve.Option{typo}, in: gen.Deployments("", reg.Ref("shop/web:1")), warn: true},
		{desc: "a typo, and the render fails", mirrors: []resolve.Option{typo}, in: gen.Deployments("", reg.Ref("shop/gone:1")), fail: true, warn: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var warnings, logs []string
			o := Options{ResolveOptions: tc.mirrors, Logf: func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }}
			o.Renderer.Warnf = func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
			_, err := pinOnce(t, o, tc.in)
			if (err != nil) != tc.fail {
				t.Fatalf("Pin() = %v, want failure %v", err, tc.fail)
			}
			want := []string(nil)
			if tc.warn {
				want = []string{warning}
			}
			var got []string
			for _, w := range warnings {
				got = append(got, w[:min(len(w), len(warning))])
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if tc.log != "" && !slices.ContainsFunc(logs, func(l string) bool {
				return strings.HasPrefix(l, tc.log) && strings.HasSuffix(l, "(mirror "+mirror.Host()+")")
			}) {
				t.Errorf("logs = %q, want %q with the mirror", logs, tc.log)
			}
		})
	}
}

// TestMirrorOnlyHoldsTheLock checks that with mirror-only the lock
// file's digests are on a mirror before they are pinned, with --frozen
// too: one HEAD by digest per image; and that nothing is asked without
// mirror-only.
func TestMirrorOnlyHoldsTheLock(t *testing.T) {
	reg := testregistry.New(t)
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	digest := reg.Push(t, "shop/web:1", img)
	in := gen.Deployments("", reg.Ref("shop/web:1"))
	lock := filepath.Join(t.TempDir(), "digests.lock")
	if _, err := pinOnce(t, Options{WriteLock: lock}, in); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc       string
		holds      bool // the mirror holds the locked image, else another under the tag
		frozen     bool
		mirrorOnly bool
		wantErr    string
		wantHeads  int
	}{
		{desc: "the mirror holds it", holds: true, mirrorOnly: true, wantHeads: 1},
		{desc: "the mirror holds it, frozen", holds: true, frozen: true, mirrorOnly: true, wantHeads: 1},
		{desc: "the mirror lost it", mirrorOnly: true, wantErr: "no mirror holds this digest", wantHeads: 1},
		{desc: "the mirror lost it, frozen", frozen: true, mirrorOnly: true, wantErr: "no mirror holds this digest", wantHeads: 1},
		{desc: "not mirror-only", frozen: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			mirror := testregistry.New(t)
			if tc.holds {
				mirror.Push(t, "cache/shop/web:1", img)
			} else {
				mirror.PushImage(t, "cache/shop/web:1")
			}
			mirror.ResetCounts()
			reg.ResetCounts()
			o := Options{Lock: lock, Frozen: tc.frozen, ResolveOptions: []resolve.Option{
				resolve.WithMirror(reg.Host(), mirror.Host()+"/cache"), resolve.WithMirrorOnly(tc.mirrorOnly),
			}}
			res, err := pinOnce(t, o, in)
			ping := min(tc.wantHeads, 1)
			if n := mirror.Count("HEAD manifests"); n != tc.wantHeads || mirror.Total() != tc.wantHeads+ping || reg.Total() != 0 {
				t.Errorf("mirror: %d HEADs of %d requests, registry %d; want %d and a ping, and none to the registry", n, mirror.Total(), reg.Total(), tc.wantHeads)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), digest.String()) || !strings.Contains(err.Error(), mirror.Host()+"/cache") {
					t.Errorf("Pin() = %v, want an error naming the digest, the mirror and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || res.Images[0].Digest != digest.String() || res.Images[0].Source != resolution.Lock {
				t.Errorf("Pin() = %+v, %v; want %s from the lock file", res, err, digest)
			}
		})
	}
}

// TestKeelPolicies checks each Keel policy on a Deployment (annotation or
// label; the annotation wins), relative to its image's tag, with a
// workload without Keel's annotations unchanged beside it.
func TestKeelPolicies(t *testing.T) {
	f := newFake("registry.example/shop/web:1.4")
	for _, tag := range webTags {
		f.push("registry.example/shop/web:" + tag)
	}
	deployment := func(name, meta, image string) string {
		return "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n" + meta +
			"spec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: " + image + "\n"
	}
	for _, tc := range []struct {
		meta, want string // want: the chosen tag; "": 1.4.1 itself
	}{
		{"  annotations:\n    keel.sh/policy: minor\n", "1.5.0"},
		{"  annotations:\n    keel.sh/policy: patch\n", "1.4.2"},
		{"  annotations:\n    keel.sh/policy: major\n", "2.0.0"},
		{"  annotations:\n    keel.sh/policy: all\n", "2.0.0"},
		{"  labels:\n    keel.sh/policy: patch\n", "1.4.2"},
		{"  labels:\n    keel.sh/policy: major\n  annotations:\n    keel.sh/policy: patch\n", "1.4.2"},
		{"  annotations:\n    keel.sh/policy: force\n", "2.0.0"},
		{"  annotations:\n    keel.sh/policy: force\n    keel.sh/match-tag: \"true\"\n", ""},
		{"  annotations:\n    keel.sh/policy: \"glob:1.4.*\"\n", "1.4.2"},
		{"  annotations:\n    keel.sh/policy: \"regexp:^1\\\\.5\"\n", "1.5.0"},
		{"  annotations:\n    keel.sh/policy: never\n", ""},
		{"", ""},
	} {
		t.Run(strings.TrimSpace(tc.meta), func(t *testing.T) {
			in := []byte(deployment("web", tc.meta, "registry.example/shop/web:1.4.1") + deployment("plain", "", "registry.example/shop/web:1.4"))
			res, err := pinOnce(t, Options{Registry: f, KeelAnnotations: true}, in)
			if err != nil {
				t.Fatal(err)
			}
			tag := tc.want
			if tag == "" {
				tag = "1.4.1"
			}
			for _, want := range []string{
				"registry.example/shop/web:" + tag + "@" + f.digest("registry.example/shop/web:"+tag).String(),
				"registry.example/shop/web:1.4@" + f.digest("registry.example/shop/web:1.4").String(),
			} {
				if !strings.Contains(string(res.Bytes()), "image: "+want+"\n") {
					t.Errorf("output lacks %s:\n%s", want, res.Bytes())
				}
			}
		})
	}
}

// TestOptionNames: a message that says which option would change the
// outcome names it by Options.OptionNames, in every layer a Pin assembles
// (the lock layer, the renderer, the registry resolver), and by its Go
// name without.
func TestOptionNames(t *testing.T) {
	reg := testregistry.NewTLS(t)
	reg.PushImage(t, "app:1")
	dir := t.TempDir()
	lock := filepath.Join(dir, "lock.yaml")
	if _, err := pinOnce(t, Options{Registry: shopFake(), WriteLock: lock}, gen.Deployments("shop", "registry.example/shop/web:1.4")); err != nil {
		t.Fatal(err)
	}
	unpinned := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\nspec:\n  template:\n    spec:\n      containers:\n      - name: manager\n        image: registry.example/shop/web:1.4\n        env:\n        - name: SIDECAR_IMAGE\n          value: registry.example/shop/side:1\n"
	bracket := func(o string) string { return "<" + o + ">" }
	for _, tc := range []struct {
		desc    string
		o       Options
		in      []byte
		want    string // with Go names; each name in brackets with OptionNames
		options []string
	}{
		{desc: "the lock layer", o: Options{Lock: lock, Frozen: true}, in: gen.Deployments("shop", "registry.example/shop/b:1"),
			want: "registry.example/shop/b:1: not in the lock file, and Frozen asks no registry", options: []string{"Frozen"}},
		{desc: "the renderer", o: Options{Registry: shopFake(), Renderer: renderer.Renderer{Strict: true}}, in: []byte(unpinned),
			want: "(Strict): Deployment/op container \"manager\" field env[name=SIDECAR_IMAGE].value \"registry.example/shop/side:1\"; name their fields with ImagePaths", options: []string{"Strict", "ImagePaths"}},
		{desc: "the registry resolver", in: gen.Deployments("", reg.TLSRef("app:1")),
			want: "(add its CA with WithCAFiles, or name the host with WithInsecureRegistries)", options: []string{"WithCAFiles", "WithInsecureRegistries"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for _, named := range []bool{false, true} {
				o, want := tc.o, tc.want
				if named {
					o.OptionNames = bracket
					for _, n := range tc.options {
						want = strings.ReplaceAll(want, n, bracket(n))
					}
				}
				_, err := pinOnce(t, o, tc.in)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Pin() = %v, want an error with %q", err, want)
				}
			}
		})
	}
}

// TestStaleFromTheReplacedLock is a CI step that records the lock file
// while the registry is down (501, not retried): the lock file it
// replaces stands in, with a warning, and the lock file is written as it
// was; a refusal, or StaleIfError 0, still fails.
func TestStaleFromTheReplacedLock(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		status  int
		stale   time.Duration
		wantErr string
	}{
		{desc: "down", status: http.StatusNotImplemented, stale: time.Hour},
		{desc: "off", status: http.StatusNotImplemented, wantErr: "501 Not Implemented"},
		{desc: "refused", status: http.StatusForbidden, stale: time.Hour, wantErr: "403 Forbidden"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			reg := testregistry.New(t)
			d := reg.PushImage(t, "shop/web:1")
			in := gen.Deployments("", reg.Ref("shop/web:1"))
			lock := filepath.Join(t.TempDir(), "digests.lock")
			if _, err := pinOnce(t, Options{WriteLock: lock}, in); err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(lock)
			if err != nil {
				t.Fatal(err)
			}
			reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
				if !strings.Contains(r.URL.Path, "/manifests/") {
					return false
				}
				w.WriteHeader(tc.status)
				return true
			})
			var warnings []string
			o := Options{WriteLock: lock, StaleIfError: tc.stale}
			o.Renderer.Warnf = func(f string, args ...any) { warnings = append(warnings, fmt.Sprintf(f, args...)) }
			res, err := pinOnce(t, o, in)
			after, _ := os.ReadFile(lock)
			if string(after) != string(before) {
				t.Errorf("lock file changed:\n%s\nwas\n%s", after, before)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Pin() = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || res.Images[0].Digest != d.String() || res.Images[0].Source != resolution.Stale {
				t.Fatalf("Pin() = %+v, %v; want %s, stale", res, err, d)
			}
			if want := reg.Ref("shop/web:1") + ": using " + d.String() + " from " + lock + ", the lock file this run replaces, since the registry did not answer (StaleIfError; "; len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) {
				t.Errorf("warnings %q, want one beginning %q", warnings, want)
			}
		})
	}
}

// TestIndexOrManifest is a registry that serves a tag in both forms, as
// registries do for clients that accept no index: the index to
// digestpin, which accepts both, every run, and the lock file records it
// as one; with a platform, that platform's manifest. A tag that becomes a
// single image's manifest is a move, and --check says so.
func TestIndexOrManifest(t *testing.T) {
	reg := testregistry.New(t)
	index, children := reg.PushIndex(t, "shop/multi:1", "linux/amd64", "linux/arm64")
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		// A client that accepts no index gets the amd64 manifest.
		if (r.Method != http.MethodGet && r.Method != http.MethodHead) || !strings.HasSuffix(r.URL.Path, "/shop/multi/manifests/1") || strings.Contains(r.Header.Get("Accept"), "index") || strings.Contains(r.Header.Get("Accept"), "list") {
			return false
		}
		http.Redirect(w, r, "/v2/shop/multi/manifests/"+children["linux/amd64"].String(), http.StatusTemporaryRedirect)
		return true
	})
	// What a client that accepts no index gets.
	req, err := http.NewRequest(http.MethodHead, "http://"+reg.Ref("v2/shop/multi/manifests/1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", string(types.DockerManifestSchema2))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Docker-Content-Digest"); got != children["linux/amd64"].String() {
		t.Fatalf("a client that accepts no index gets %q, want the amd64 manifest %s", got, children["linux/amd64"])
	}
	in := gen.Deployments("", reg.Ref("shop/multi:1"))
	dir := t.TempDir()
	lock := filepath.Join(dir, "digests.lock")
	for run := range 2 {
		res, err := pinOnce(t, Options{WriteLock: lock, CacheDir: filepath.Join(dir, "cache"), CacheTTL: time.Hour}, in)
		if err != nil || res.Images[0].Digest != index.String() || res.Images[0].MediaType != string(types.DockerManifestList) && res.Images[0].MediaType != string(types.OCIImageIndex) {
			t.Fatalf("run %d: Pin() = %+v, %v; want the index %s, recorded as one", run, res, err, index)
		}
	}
	if b := testfiles.Read(t, lock); !strings.Contains(string(b), "    digest: "+index.String()+"\n    mediaType: ") {
		t.Errorf("lock file:\n%s\nwant the index with its media type", b)
	}
	res, err := pinOnce(t, Options{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}, in)
	if err != nil || res.Images[0].Digest != children["linux/arm64"].String() || !strings.Contains(res.Images[0].MediaType, "manifest") {
		t.Errorf("with a platform: Pin() = %+v, %v; want the arm64 manifest %s", res, err, children["linux/arm64"])
	}
	// The tag becomes one image's manifest.
	single := reg.PushImage(t, "shop/multi:1")
	_, err = pinOnce(t, Options{Lock: lock, Check: true}, in)
	if want := reg.Ref("shop/multi:1") + ": moved from " + index.String() + " (lock file) to " + single.String() + " (registry), an index, now an image manifest"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("--check: %v, want %q", err, want)
	}
}
