package resolve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
)

// mustRef parses a reference.
func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatalf("parsing %q: %v", s, err)
	}
	return ref
}

// clock is a settable time source for cache tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testCache is a DirCache read with a TTL on a fake clock.
type testCache struct {
	*DirCache
	ttl time.Duration
	clk *clock
}

// newTestCache returns a cache in a temporary folder on a fake clock.
func newTestCache(t *testing.T, ttl time.Duration) (*testCache, *clock) {
	t.Helper()
	c, err := NewDirCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatalf("NewDirCache: %v", err)
	}
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	return &testCache{DirCache: c, ttl: ttl, clk: clk}, clk
}

func (c *testCache) now() time.Time { return c.clk.now() }

// resolver returns a CachingResolver on c, with c's TTL and clock.
func (c *testCache) resolver(next resolution.Resolver, key CacheKeyFunc, warnf func(string, ...any)) *CachingResolver {
	cr := NewCachingResolver(next, c.DirCache, c.ttl, key, warnf)
	cr.entries.now = c.clk.now
	return cr
}

// get returns the digest cached for ref under key, as a resolver on c
// reads it.
func (c *testCache) get(ref name.Reference, key string) (v1.Hash, bool) {
	e := c.resolver(nil, nil, nil).entries
	rec, ok := e.recorded(context.Background(), ref, key)
	return rec.Digest, ok && e.fresh(rec)
}

// entryPath returns the file of the entry of ref under key.
func (c *testCache) entryPath(ref name.Reference, key string) string {
	return c.path(resolutionKey(ref, key))
}

// cachedRun resolves ref as one digestpin run does: with a fresh registry
// Resolver (which remembers nothing) behind the shared cache.
func cachedRun(t *testing.T, c *testCache, platform, ref string) (v1.Hash, string, error) {
	t.Helper()
	var opts []Option
	if platform != "" {
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, WithPlatform(p))
	}
	reg, err := New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var warnings []string
	cr := c.resolver(reg, reg.CacheKey, func(f string, args ...any) { warnings = append(warnings, f) })
	res, err := cr.Resolve(context.Background(), mustRef(t, ref))
	if len(warnings) > 0 {
		t.Errorf("warnings: %v", warnings)
	}
	return res.Digest, string(res.Source), err
}

func TestCacheHitAndExpiry(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	current := reg.PushImage(t, "app:1.0")
	cached := current
	c, clk := newTestCache(t, 10*time.Minute)
	ref := reg.Ref("app:1.0")

	for _, step := range []struct {
		desc     string
		advance  time.Duration
		push     bool // move the tag before the step
		stale    bool // want the digest cached before the push
		src      string
		requests int // requests to the registry
	}{
		{desc: "first run asks the registry", src: string(resolution.Registry), requests: 1},
		{desc: "a run within the TTL asks nothing", advance: 5 * time.Minute, src: string(resolution.Cache)},
		{desc: "a moved tag is not seen within the TTL", advance: 4 * time.Minute, push: true, stale: true, src: string(resolution.Cache)},
		{desc: "after the TTL the registry is asked again", advance: time.Minute, src: string(resolution.Registry), requests: 1},
		{desc: "and the new answer is cached", advance: time.Second, src: string(resolution.Cache)},
	} {
		clk.add(step.advance)
		if step.push {
			current = reg.PushImage(t, "app:1.0")
		}
		reg.ResetCounts()
		h, src, err := cachedRun(t, c, "", ref)
		if err != nil {
			t.Fatalf("%s: ResolveSource: %v", step.desc, err)
		}
		want := current
		if step.stale {
			want = cached
		}
		if h != want || src != step.src {
			t.Errorf("%s: ResolveSource = %s, %s; want %s, %s", step.desc, h, src, want, step.src)
		}
		if got := reg.Count("HEAD manifests"); got != step.requests {
			t.Errorf("%s: %d HEAD manifest requests, want %d", step.desc, got, step.requests)
		}
		if step.requests == 0 && reg.Total() != 0 {
			t.Errorf("%s: %d requests to the registry on a cache hit, want 0", step.desc, reg.Total())
		}
		cached = h
	}
}

func TestCacheKeyedByPlatform(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	index, children := reg.PushIndex(t, "multi:1", "linux/amd64", "linux/arm64")
	c, _ := newTestCache(t, time.Hour)
	ref := reg.Ref("multi:1")
	for _, tc := range []struct {
		platform string
		want     v1.Hash
		src      string
	}{
		{platform: "", want: index, src: string(resolution.Registry)},
		{platform: "linux/amd64", want: children["linux/amd64"], src: string(resolution.Registry)},
		{platform: "linux/arm64", want: children["linux/arm64"], src: string(resolution.Registry)},
		{platform: "", want: index, src: string(resolution.Cache)},
		{platform: "linux/amd64", want: children["linux/amd64"], src: string(resolution.Cache)},
	} {
		h, src, err := cachedRun(t, c, tc.platform, ref)
		if err != nil || h != tc.want || src != tc.src {
			t.Errorf("platform %q: ResolveSource = %s, %s, %v; want %s, %s", tc.platform, h, src, err, tc.want, tc.src)
		}
	}
}

// runKey returns the key under which cachedRun stores ref (without a
// platform).
func runKey(t *testing.T, ref string) string {
	t.Helper()
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	k, ok, err := r.CacheKey(context.Background(), mustRef(t, ref))
	if err != nil || !ok {
		t.Fatalf("CacheKey(%s) = %v, %v", ref, ok, err)
	}
	return k
}

// entryJSON is a cache entry as a file holds it.
func entryJSON(format, ref, key, digest string, resolved time.Time) []byte {
	return []byte(fmt.Sprintf(`{"format":%q,"reference":%q,"key":%q,"digest":%q,"resolved":%q}`, format, ref, key, digest, resolved.Format(time.RFC3339)))
}

func TestCacheBadEntries(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	want := reg.PushImage(t, "app:1.0")
	ref := mustRef(t, reg.Ref("app:1.0"))
	other := mustRef(t, reg.Ref("other:1.0"))
	key := runKey(t, ref.String())
	for _, tc := range []struct {
		desc  string
		entry func(c *testCache) []byte
	}{
		{desc: "truncated", entry: func(*testCache) []byte { return []byte(`{"format":"` + cacheFormat + `","reference":`) }},
		{desc: "bad digest", entry: func(c *testCache) []byte {
			return entryJSON(cacheFormat, ref.Name(), key, "sha256:00", c.now())
		}},
		{desc: "another reference's entry", entry: func(c *testCache) []byte {
			return entryJSON(cacheFormat, other.Name(), key, want.String(), c.now())
		}},
		{desc: "another key's entry", entry: func(c *testCache) []byte {
			return entryJSON(cacheFormat, ref.Name(), "linux/amd64", want.String(), c.now())
		}},
		{desc: "another format's entry", entry: func(c *testCache) []byte {
			return entryJSON("digestpin-cache-v3", ref.Name(), key, want.String(), c.now())
		}},
		{desc: "an entry of the first format, keyed by platform only", entry: func(c *testCache) []byte {
			return []byte(`{"reference":"` + ref.Name() + `","digest":"` + want.String() + `","resolved":"` + c.now().Format(time.RFC3339) + `"}`)
		}},
		{desc: "from the future", entry: func(c *testCache) []byte {
			return entryJSON(cacheFormat, ref.Name(), key, want.String(), c.now().Add(time.Hour))
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, _ := newTestCache(t, time.Hour)
			if err := os.WriteFile(c.entryPath(ref, key), tc.entry(c), 0o600); err != nil {
				t.Fatal(err)
			}
			if h, ok := c.get(ref, key); ok {
				t.Fatalf("Get = %s, true; want a miss", h)
			}
			// The next resolution replaces the bad entry.
			if h, src, err := cachedRun(t, c, "", ref.String()); err != nil || h != want || src != string(resolution.Registry) {
				t.Fatalf("Resolve = %s, %s, %v; want %s from the registry", h, src, err, want)
			}
			if h, ok := c.get(ref, key); !ok || h != want {
				t.Errorf("Get after resolving = %s, %v; want %s, true", h, ok, want)
			}
		})
	}
}

func TestCacheDoesNotKeepErrors(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	c, _ := newTestCache(t, time.Hour)
	ref := reg.Ref("missing:1")
	for range 2 {
		if _, _, err := cachedRun(t, c, "", ref); err == nil {
			t.Fatal("Resolve(missing image) = nil error")
		}
	}
	if got := reg.Count("HEAD manifests"); got != 2 {
		t.Errorf("HEAD manifests = %d, want 2: a failure must not be cached", got)
	}
	des, err := os.ReadDir(c.Dir())
	if err != nil || len(des) != 0 {
		t.Errorf("cache folder holds %d entries (%v), want none", len(des), err)
	}
}

// noKey keys every reference alike, for a resolver whose answers depend
// on the reference alone.
func noKey(context.Context, name.Reference) (string, bool, error) { return "", true, nil }

// fixed resolves every reference to one digest and counts its calls.
type fixed struct {
	mu    sync.Mutex
	h     v1.Hash
	calls int
}

func (f *fixed) Resolve(_ context.Context, ref name.Reference) (resolution.Resolution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if d, ok := ref.(name.Digest); ok {
		h, err := v1.NewHash(d.DigestStr())
		return resolution.Resolution{Digest: h, Source: resolution.Pinned}, err
	}
	return resolution.Resolution{Digest: f.h, Source: resolution.Registry}, nil
}

func TestCacheSharedConcurrently(t *testing.T) {
	t.Parallel()
	// Many resolvers on one folder at once, as concurrent runs are: every
	// answer is a whole entry, and no temporary file is left behind.
	dir := t.TempDir()
	h := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	refs := []string{"a:1", "b:1", "c:1", "d:1"}
	var wg sync.WaitGroup
	for range 8 {
		c, err := NewDirCache(dir)
		if err != nil {
			t.Fatal(err)
		}
		cr := NewCachingResolver(&fixed{h: h}, c, time.Hour, noKey, func(f string, args ...any) { t.Errorf(f, args...) })
		for range 20 {
			for _, r := range refs {
				wg.Go(func() {
					res, err := cr.Resolve(context.Background(), mustRef(t, "registry.example/"+r))
					if got := res.Digest; err != nil || got != h {
						t.Errorf("Resolve(%s) = %s, %v; want %s", r, got, err, h)
					}
				})
			}
		}
	}
	wg.Wait()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(des) != len(refs) {
		var names []string
		for _, d := range des {
			names = append(names, d.Name())
		}
		t.Errorf("cache folder holds %v, want %d entries and nothing else", names, len(refs))
	}
}

func TestCachingResolverPassesDigests(t *testing.T) {
	t.Parallel()
	c, _ := newTestCache(t, time.Hour)
	f := &fixed{}
	cr := c.resolver(f, noKey, nil)
	d := "sha256:" + strings.Repeat("cd", 32)
	res, err := cr.Resolve(context.Background(), mustRef(t, "registry.example/a@"+d))
	if err != nil || res.Digest.String() != d || res.Source != resolution.Pinned {
		t.Errorf("Resolve(digest) = %+v, %v; want %s, pinned", res, err, d)
	}
	if des, _ := os.ReadDir(c.Dir()); len(des) != 0 {
		t.Errorf("a digest reference was cached: %d entries", len(des))
	}
}

func TestNewDirCacheErrors(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc string
		dir  string
		want string
	}{
		{desc: "no folder", dir: "", want: "cache folder is empty"},
		{desc: "folder under a file", dir: filepath.Join(file, "sub"), want: "creating cache folder"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := NewDirCache(tc.dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewDirCache(%q) = %v, want an error containing %q", tc.dir, err, tc.want)
			}
		})
	}
}

// TestCacheTTLPositive checks that a choice cache needs a positive TTL
// (the TTL the Cache's entries are read with, now that resolve checks it,
// not the Cache).
func TestCacheTTLPositive(t *testing.T) {
	t.Parallel()
	c, _ := newTestCache(t, time.Hour)
	for _, tc := range []struct {
		ttl  time.Duration
		want string
	}{
		{ttl: 0, want: "cache TTL must be positive, got 0s"},
		{ttl: -time.Second, want: "cache TTL must be positive, got -1s"},
	} {
		_, err := tagpolicy.NewPolicyResolver(&fixed{}, nil, &tagpolicy.TagPolicies{}, tagpolicy.WithChoiceCache(c.DirCache, tc.ttl, noKey, nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WithChoiceCache(ttl %s) = %v, want an error containing %q", tc.ttl, err, tc.want)
		}
	}
}

func TestDefaultCacheDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", home)
	got, err := DefaultCacheDir()
	if want := filepath.Join(home, "digestpin"); err != nil || got != want {
		t.Errorf("DefaultCacheDir() = %q, %v; want %q", got, err, want)
	}
}
