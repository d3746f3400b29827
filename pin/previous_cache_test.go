package pin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolve"
)

// TestChangesAgainstCache pins three times with a cache and neither a
// lock file nor an earlier output, on a loopback registry, with the cache
// in a folder and on Redis: the first run has nothing in the cache (every
// image added), the second finds every digest the same, and after a push
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
				{want: func() string { return "no image moved, 2 added (against the cache)\n" }, blobs: 2},
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
				if res.Changes.Against != AgainstCache {
					t.Errorf("run %d: against %q, want %q", i, res.Changes.Against, AgainstCache)
				}
				if rep := readReport(t, o.Report); rep.Changes == nil || rep.Changes.Against != AgainstCache {
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
