package pin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/redisstore"
	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolve"
)

// TestChangesAgainstCache pins three times with a cache and neither a
// lock file nor an earlier output, on a loopback registry, with the cache
// in a folder and on Redis: the first run has nothing in the cache, so
// nothing to compare with (every image pinned, and no build time asked
// for, as with a first lock file), the second finds every digest the same, and after a push
// the third says the image moved from the digest the cache recorded,
// though its entry is past the TTL, with its build time. A run with a lock
// file compares with the lock file, not the cache.
func TestChangesAgainstCache(t *testing.T) {
	const ttl = 50 * time.Millisecond
	built := time.Date(2026, 12, 1, 14, 3, 0, 0, time.UTC)
	for _, tc := range []struct {
		desc  string
		cache func(t *testing.T, o *Options)
	}{
		{"a folder", func(t *testing.T, o *Options) { o.CacheDir = t.TempDir() }},
		{"Redis", func(t *testing.T, o *Options) { o.Cache = redisCache(t, ttl) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			reg := testregistry.New(t)
			old := reg.PushImage(t, "app:1")
			reg.PushImage(t, "side:2")
			in := gen.Deployments("prod", reg.Ref("app:1"), reg.Ref("side:2"))
			dir := t.TempDir()
			txt := filepath.Join(dir, "summary.txt")
			o := Options{CacheTTL: ttl, SummaryText: txt, Report: filepath.Join(dir, "report.json")}
			tc.cache(t, &o)
			var moved string
			for i, step := range []struct {
				push  bool
				want  func() string
				blobs int
			}{
				{want: func() string {
					return "2 images pinned (nothing to compare with: no lock file, earlier output or cache)\n"
				}},
				{want: func() string { return "no image moved, 2 unchanged (against the cache)\n" }},
				{push: true, want: func() string {
					return "1 image moved, 1 unchanged (against the cache)\n" +
						reg.Ref("app:1") + " " + ShortDigest(old.String()) + " → " + ShortDigest(moved) + " (built 2026-12-01 14:03 UTC): Deployment/prod/w0\n"
				}, blobs: 1},
			} {
				if step.push {
					moved = reg.PushCreated(t, "app:1", built).String()
				}
				// Every entry past the TTL: each run asks the registry.
				time.Sleep(2 * ttl)
				reg.ResetCounts()
				res, err := pinOnce(t, o, in)
				if err != nil {
					t.Fatalf("run %d: %v", i, err)
				}
				got := string(readFile(t, txt))
				if i < 2 {
					got, _, _ = strings.Cut(got, "\n")
					got += "\n"
				}
				if want := step.want(); got != want {
					t.Errorf("run %d: summary = %q, want %q", i, got, want)
				}
				against := AgainstCache
				if i == 0 {
					against = ""
				}
				if res.Changes.Against != against {
					t.Errorf("run %d: against %q, want %q", i, res.Changes.Against, against)
				}
				if rep := readReport(t, o.Report); i > 0 && (rep.Changes == nil || rep.Changes.Against != AgainstCache) {
					t.Errorf("run %d: report changes = %+v, want against the cache", i, rep.Changes)
				}
				if n := reg.Count("HEAD manifests"); n != 2 {
					t.Errorf("run %d: %d HEAD manifests, want 2: the entries are past the TTL", i, n)
				}
				if n := reg.Count("GET blobs"); n != step.blobs {
					t.Errorf("run %d: %d config GETs, want %d", i, n, step.blobs)
				}
			}

			// With a lock file, the lock file is the previous state.
			lock := filepath.Join(dir, "digests.lock")
			if err := os.WriteFile(lock, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			o.WriteLock = lock
			res, err := pinOnce(t, o, in)
			if err != nil {
				t.Fatal(err)
			}
			if res.Changes.Against != "" {
				t.Errorf("with a first lock file: against %q, want nothing", res.Changes.Against)
			}
		})
	}
}

// TestChangesAgainstCacheGolden pins against a cache that recorded
// older digests, with the fakeRegistry: the summaries and the report's
// change set say "against the cache", as testdata/cache.* hold them. An
// image pinned by the manifests, and one kept unresolved, are not in the
// cache's change set.
func TestChangesAgainstCacheGolden(t *testing.T) {
	f := newFake("registry.example/shop/web:dev", "registry.example/shop/tool:1", "registry.example/shop/db:16")
	in := gen.Deployments("prod", "registry.example/shop/web:dev", "registry.example/shop/tool:1", "registry.example/shop/db:16",
		"registry.example/shop/gone:1", "registry.example/shop/pinned@sha256:"+strings.Repeat("1", 64))
	dir := t.TempDir()
	cache, err := resolve.NewDirCache(filepath.Join(dir, "cache"))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Registry: f, Cache: cache, CacheTTL: time.Nanosecond}
	o.Renderer.KeepUnresolved = true
	if _, err := pinOnce(t, o, gen.Deployments("prod", "registry.example/shop/web:dev", "registry.example/shop/tool:1")); err != nil {
		t.Fatal(err)
	}
	f.push("registry.example/shop/web:dev")
	f.push("registry.example/shop/tool:1")
	f.reproducible("registry.example/shop/tool:1")
	o.Summary, o.SummaryText, o.Report = filepath.Join(dir, "summary.md"), filepath.Join(dir, "summary.txt"), filepath.Join(dir, "report.json")
	time.Sleep(time.Millisecond)
	res, err := pinOnce(t, o, in)
	if err != nil {
		t.Fatal(err)
	}
	for golden, path := range map[string]string{"cache.summary.md": o.Summary, "cache.summary.txt": o.SummaryText, "cache.report.json": o.Report} {
		compareGolden(t, filepath.Join("testdata", golden), readFile(t, path))
	}

	// Idempotence: the output pinned again is the same, and moves
	// nothing (its images are pinned, which the cache never holds).
	out := res.Bytes()
	o.Summary, o.SummaryText, o.Report, o.Changes = "", "", "", true
	again, err := pinOnce(t, o, out)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Bytes()) != string(out) {
		t.Errorf("Pin of its own output changed it:\n%s", again.Bytes())
	}
	if cs := again.Changes; cs.Len() != 0 || cs.Against != AgainstCache {
		t.Errorf("Pin of its own output: changes %s, want none against the cache", cs.Text())
	}
}

// TestChangesAgainstCacheForeignEntry swaps the cache entries of two
// images, in a folder and on Redis, as someone who can write the cache
// could: each entry now names another reference, and is never taken as
// the image's previous digest (nor as its digest): both images are
// added, resolved at the registry, and Redis warns about each value.
func TestChangesAgainstCacheForeignEntry(t *testing.T) {
	const ttl = time.Hour
	for _, onRedis := range []bool{false, true} {
		t.Run(map[bool]string{false: "a folder", true: "Redis"}[onRedis], func(t *testing.T) {
			reg := testregistry.New(t)
			reg.PushImage(t, "app:1")
			reg.PushImage(t, "side:2")
			in := gen.Deployments("prod", reg.Ref("app:1"), reg.Ref("side:2"))
			o := Options{CacheTTL: ttl, Changes: true}
			var mu sync.Mutex
			var warnings []string
			o.Renderer.Warnf = func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				warnings = append(warnings, fmt.Sprintf(format, args...))
			}
			var swap func()
			if onRedis {
				srv := testredis.Start(t, testredis.Options{})
				c, err := redisstore.New(redisstore.Options{URL: srv.URL(0), Warnf: o.Renderer.Warnf})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				if o.Cache, err = c.Cache(ttl, time.Second); err != nil {
					t.Fatal(err)
				}
				rc := srv.Client(0)
				t.Cleanup(func() { _ = rc.Close() })
				swap = func() {
					ctx := context.Background()
					keys, err := rc.Keys(ctx, "digestpin:resolution:*").Result()
					if err != nil || len(keys) != 2 {
						t.Fatalf("resolution keys = %q, %v; want 2", keys, err)
					}
					a, b := rc.Get(ctx, keys[0]).Val(), rc.Get(ctx, keys[1]).Val()
					rc.Set(ctx, keys[0], b, 0)
					rc.Set(ctx, keys[1], a, 0)
				}
			} else {
				o.CacheDir = t.TempDir()
				swap = func() {
					all, err := filepath.Glob(filepath.Join(o.CacheDir, "*.json"))
					var files []string
					for _, f := range all {
						if strings.Contains(string(readFile(t, f)), `"format":"digestpin-cache-v2"`) {
							files = append(files, f)
						}
					}
					if err != nil || len(files) != 2 {
						t.Fatalf("cache files = %q, %v; want 2", files, err)
					}
					a, b := readFile(t, files[0]), readFile(t, files[1])
					for f, b := range map[string][]byte{files[0]: b, files[1]: a} {
						if err := os.WriteFile(f, b, 0o644); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if _, err := pinOnce(t, o, in); err != nil {
				t.Fatal(err)
			}
			swap()
			reg.ResetCounts()
			res, err := pinOnce(t, o, in)
			if err != nil {
				t.Fatal(err)
			}
			if cs := res.Changes; len(cs.Added) != 2 || len(cs.Moved)+len(cs.Unchanged) != 0 {
				t.Errorf("changes = %s, want both images added", cs.Text())
			}
			if n := reg.Count("HEAD manifests"); n != 2 {
				t.Errorf("%d HEAD manifests, want 2: a foreign entry is no answer", n)
			}
			if onRedis && (len(warnings) != 2 || !strings.Contains(strings.Join(warnings, "\n"), "ignoring the value of key")) {
				t.Errorf("warnings = %q, want one for each foreign value; changes %s", warnings, res.Changes.Text())
			}
		})
	}
}
