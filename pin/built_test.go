package pin

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/redisstore"
	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolve"
)

// builtCase is a case of TestBuiltTimes.
type builtCase struct {
	desc string
	// push moves app:1 and returns its new digest.
	push   func(t *testing.T, reg *testregistry.Registry) string
	refuse bool   // the registry refuses every blob
	want   string // what the text says after the new digest
}

// TestBuiltTimes pins against a lock file on a loopback registry, with a
// cache in a folder or on Redis whose resolutions expire at once: a moved
// image shows when it was built, from its config, for one GET of its
// manifest and one of its config; the same change again takes the time
// from the cache and asks neither; an image built at the epoch or in the
// future shows no time; a registry that refuses the config leaves the
// time out, the Pin succeeds and the next run asks again; the unchanged
// image costs no request.
func TestBuiltTimes(t *testing.T) {
	built := time.Date(2026, 12, 1, 14, 3, 0, 0, time.UTC)
	epochConfig := []byte(`{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z","rootfs":{"type":"layers","diff_ids":[]}}`)
	for _, tc := range []builtCase{
		{desc: "a time", push: func(t *testing.T, reg *testregistry.Registry) string {
			return reg.PushCreated(t, "app:1", built).String()
		}, want: " (built 2026-12-01 14:03 UTC): Deployment/prod/w0"},
		{desc: "the epoch", push: func(t *testing.T, reg *testregistry.Registry) string {
			return reg.PushConfig(t, "app:1", epochConfig, nil).String()
		}, want: ": Deployment/prod/w0"},
		{desc: "in the future", push: func(t *testing.T, reg *testregistry.Registry) string {
			return reg.PushCreated(t, "app:1", time.Now().Add(24*time.Hour)).String()
		}, want: ": Deployment/prod/w0"},
		{desc: "the config refused", push: func(t *testing.T, reg *testregistry.Registry) string {
			return reg.PushCreated(t, "app:1", built).String()
		}, refuse: true, want: ": Deployment/prod/w0"},
	} {
		for _, onRedis := range []bool{false, true} {
			name := tc.desc + " in a folder"
			if onRedis {
				name = tc.desc + " on Redis"
			}
			t.Run(name, func(t *testing.T) { testBuiltTime(t, tc, onRedis) })
		}
	}
}

// testBuiltTime runs a case of TestBuiltTimes.
func testBuiltTime(t *testing.T, tc builtCase, onRedis bool) {
	built := time.Date(2026, 12, 1, 14, 3, 0, 0, time.UTC)
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	reg.PushImage(t, "side:2")
	in := gen.Deployments("prod", reg.Ref("app:1"), reg.Ref("side:2"))
	dir := t.TempDir()
	lock, txt := filepath.Join(dir, "digests.lock"), filepath.Join(dir, "summary.txt")
	o := Options{WriteLock: lock, CacheTTL: time.Millisecond}
	if onRedis {
		o.Cache = redisCache(t, o.CacheTTL)
	} else {
		o.CacheDir = filepath.Join(dir, "cache")
	}
	if _, err := pinOnce(t, o, in); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, lock)
	moved := tc.push(t, reg)
	if tc.refuse {
		reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/blobs/") {
				return false
			}
			w.WriteHeader(http.StatusForbidden)
			return true
		})
	}
	o.SummaryText = txt
	// The second run finds the same change (the lock file as it was),
	// and takes the time from the cache; a failure is not kept, and is
	// asked again.
	for run, cached := range []bool{false, !tc.refuse} {
		if err := os.WriteFile(lock, before, 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // every resolution past the TTL
		reg.ResetCounts()
		res, err := pinOnce(t, o, in)
		if err != nil {
			t.Fatalf("run %d: Pin = %v", run, err)
		}
		got := string(readFile(t, txt))
		if !strings.Contains(got, reg.Ref("app:1")+" ") || !strings.Contains(got, ShortDigest(moved)+tc.want+"\n") || strings.Count(got, "built") != strings.Count(tc.want, "built") {
			t.Errorf("run %d: summary = %q, want a line of %s that ends %q", run, got, reg.Ref("app:1"), ShortDigest(moved)+tc.want)
		}
		if c := res.Changes.Moved[0].Created; (c != nil) != strings.Contains(tc.want, "built") || c != nil && !c.Equal(built) {
			t.Errorf("run %d: Created = %v, want %s or none, as the text says", run, c, built)
		}
		want := 1
		switch {
		case cached:
			want = 0
		case tc.refuse:
			// A refusal, on a session that took the registry's auth from
			// the cache, is asked once more after a fresh ping: the
			// cache may have led to it (resolve's session.relearn).
			want = 2
		}
		if m, b := reg.Count("GET manifests"), reg.Count("GET blobs"); m != want || b != want {
			t.Errorf("run %d: %d manifest and %d blob GETs, want %d of each (for the moved image alone)", run, m, b, want)
		}
	}
}

// redisCache returns a resolution cache on a new redis-server, for ttl.
func redisCache(t *testing.T, ttl time.Duration) resolve.Cache {
	t.Helper()
	srv := testredis.Start(t, testredis.Options{})
	c, err := redisstore.New(redisstore.Options{URL: srv.URL(0), Warnf: t.Errorf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rc, err := c.Cache(ttl, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}
