package pin

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// TestBuiltTimes pins against a lock file on a loopback registry, with a
// cache whose resolutions expire at once: a moved image shows when it
// was built, from its config; the same change again takes the time from
// the cache and asks no manifest or config; an image built at the epoch
// shows no time; a registry that refuses the config leaves the time out
// and the Pin succeeds; an unchanged image costs no request.
func TestBuiltTimes(t *testing.T) {
	built := time.Date(2026, 12, 1, 14, 3, 0, 0, time.UTC)
	epochConfig := []byte(`{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z","rootfs":{"type":"layers","diff_ids":[]}}`)
	for _, tc := range []struct {
		desc string
		// push moves app:1 and returns its new digest.
		push      func(t *testing.T, reg *testregistry.Registry) string
		refuse    bool   // the registry refuses every blob
		want      string // what the text says after the new digest
		manifests int    // GET manifests of the Pin that finds the move
		blobs     int    // GET blobs of it
	}{
		{desc: "a time", push: func(t *testing.T, reg *testregistry.Registry) string {
			return reg.PushCreated(t, "app:1", built).String()
		}, want: " (built 2026-12-01 14:03 UTC): Deployment/prod/w0", manifests: 1, blobs: 1},
		{desc: "the epoch", push: func(t *testing.T, reg *testregistry.Registry) string {
			return reg.PushConfig(t, "app:1", epochConfig, nil).String()
		}, want: ": Deployment/prod/w0", manifests: 1, blobs: 1},
		{desc: "in the future", push: func(t *testing.T, reg *testregistry.Registry) string {
			return reg.PushCreated(t, "app:1", time.Now().Add(24*time.Hour)).String()
		}, want: ": Deployment/prod/w0", manifests: 1, blobs: 1},
		{desc: "the config refused", push: func(t *testing.T, reg *testregistry.Registry) string {
			return reg.PushCreated(t, "app:1", built).String()
		}, refuse: true, want: ": Deployment/prod/w0", manifests: 1, blobs: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			reg := testregistry.New(t)
			reg.PushImage(t, "app:1")
			reg.PushImage(t, "side:2")
			in := gen.Deployments("prod", reg.Ref("app:1"), reg.Ref("side:2"))
			dir := t.TempDir()
			lock, txt := filepath.Join(dir, "digests.lock"), filepath.Join(dir, "summary.txt")
			o := Options{WriteLock: lock, CacheDir: filepath.Join(dir, "cache"), CacheTTL: time.Nanosecond}
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
			for run, want := range []struct{ manifests, blobs int }{{tc.manifests, tc.blobs}, {0, 0}} {
				// The second run finds the same change (the lock file as
				// it was), and takes the time from the cache; a failure
				// is not kept, and is asked again.
				if tc.refuse && run == 1 {
					want = struct{ manifests, blobs int }{tc.manifests, tc.blobs}
				}
				if err := os.WriteFile(lock, before, 0o644); err != nil {
					t.Fatal(err)
				}
				reg.ResetCounts()
				res, err := pinOnce(t, o, in)
				if err != nil {
					t.Fatalf("run %d: Pin = %v", run, err)
				}
				line := reg.Ref("app:1") + " "
				got := string(readFile(t, txt))
				if !strings.Contains(got, ShortDigest(moved)+tc.want+"\n") || strings.Count(got, "built") != strings.Count(tc.want, "built") {
					t.Errorf("run %d: summary = %q, want a line %q…%q", run, got, line, ShortDigest(moved)+tc.want)
				}
				if c := res.Changes.Moved[0].Created; (c != nil) != strings.Contains(tc.want, "built") || c != nil && !c.Equal(built) {
					t.Errorf("run %d: Created = %v, want %s or none as the text says", run, c, built)
				}
				if m, b := reg.Count("GET manifests"), reg.Count("GET blobs"); m != want.manifests || b != want.blobs {
					t.Errorf("run %d: %d manifest and %d blob GETs, want %d and %d (for the moved image alone)", run, m, b, want.manifests, want.blobs)
				}
			}
		})
	}
}
