package resolve

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestCachingResolverLast checks Last: the entry the cache held before
// the resolver stored its own, past the TTL too, with its resolution
// time; read once with Resolve, whichever comes first, and no hit; none
// for a bad entry (corrupt, of another reference, key or format, or from
// the future), a reference that carries a digest, or one without a key.
func TestCachingResolverLast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ref := mustRef(t, "registry.example/shop/web:1")
	old := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}
	now := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("b", 64)}
	for _, tc := range []struct {
		desc   string
		entry  func(c *testCache) []byte // nil: none
		age    time.Duration             // of the clock, after the entry is written
		lastAt bool                      // call Last before Resolve
		want   bool                      // Last finds old
		asked  int                       // calls of the wrapped resolver
	}{
		{desc: "fresh: a hit, and the last", entry: func(c *testCache) []byte {
			return entryJSON(cacheFormat, ref.Name(), "", old.String(), c.now())
		}, want: true, asked: 0},
		{desc: "past the TTL: asked, and the last is the old", entry: func(c *testCache) []byte {
			return entryJSON(cacheFormat, ref.Name(), "", old.String(), c.now())
		}, age: 30 * 24 * time.Hour, want: true, asked: 1},
		{desc: "Last first", entry: func(c *testCache) []byte {
			return entryJSON(cacheFormat, ref.Name(), "", old.String(), c.now())
		}, age: 2 * time.Hour, lastAt: true, want: true, asked: 1},
		{desc: "none", asked: 1},
		{desc: "corrupt", entry: func(*testCache) []byte { return []byte(`{"format":`) }, asked: 1},
		{desc: "another reference's", entry: func(c *testCache) []byte {
			return entryJSON(cacheFormat, "registry.example/shop/other:1", "", old.String(), c.now())
		}, asked: 1},
		{desc: "another key's", entry: func(c *testCache) []byte {
			return entryJSON(cacheFormat, ref.Name(), "linux/arm64", old.String(), c.now())
		}, asked: 1},
		{desc: "another format's", entry: func(c *testCache) []byte {
			return entryJSON("digestpin-cache-v1", ref.Name(), "", old.String(), c.now())
		}, asked: 1},
		{desc: "from the future", entry: func(c *testCache) []byte {
			return entryJSON(cacheFormat, ref.Name(), "", old.String(), c.now().Add(time.Minute))
		}, asked: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c, clk := newTestCache(t, time.Hour)
			if tc.entry != nil {
				if err := os.WriteFile(c.entryPath(ref, ""), tc.entry(c), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			written := clk.now()
			clk.add(tc.age)
			next := &fixed{h: now}
			r := c.resolver(next, noKey, nil)
			check := func(when string) {
				t.Helper()
				rec, ok := r.Last(ctx, ref)
				if ok != tc.want || ok && (rec.Digest != old || !rec.Resolved.Equal(written)) {
					t.Errorf("Last %s = %+v, %v, want %s resolved at %s: %v", when, rec, ok, old, written, tc.want)
				}
			}
			if tc.lastAt {
				check("before Resolve")
			}
			res, err := r.Resolve(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			check("after Resolve")
			if next.calls != tc.asked {
				t.Errorf("the wrapped resolver was asked %d times, want %d", next.calls, tc.asked)
			}
			if want := map[bool]v1.Hash{true: old, false: now}[tc.asked == 0]; res.Digest != want {
				t.Errorf("Resolve = %s, want %s", res.Digest, want)
			}
			// A resolver of the next run sees what this one stored.
			if tc.asked > 0 {
				if rec, ok := c.resolver(next, noKey, nil).Last(ctx, ref); !ok || rec.Digest != now {
					t.Errorf("Last of the next run = %+v, %v, want %s", rec, ok, now)
				}
			}
		})
	}
	c, _ := newTestCache(t, time.Hour)
	r := c.resolver(&fixed{h: now}, func(context.Context, name.Reference) (string, bool, error) { return "", false, nil }, nil)
	if _, err := r.Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if rec, ok := r.Last(ctx, ref); ok {
		t.Errorf("Last(a reference without a key) = %+v, want none", rec)
	}
	if rec, ok := r.Last(ctx, ref.Context().Digest(old.String())); ok {
		t.Errorf("Last(a digest) = %+v, want none", rec)
	}
}
