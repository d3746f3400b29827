package redisstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolve"
)

// resolvers returns n caching resolvers, each with its own Client and
// registry Resolver, like n processes sharing srv.
func resolvers(t *testing.T, srv *testredis.Server, n int) []*resolve.CachingResolver {
	t.Helper()
	var out []*resolve.CachingResolver
	for range n {
		c, _ := newClient(t, Options{URL: srv.URL(0)})
		r, err := resolve.New()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resolve.NewCachingResolver(r, newCache(t, c, time.Hour, 10*time.Second), r.CacheKey, t.Errorf))
	}
	return out
}

// TestCacheFailureSharedBriefly is several processes resolving an image
// the registry does not have, at the same moment: one asks the registry,
// and the others fail at once with its answer instead of asking in turn.
func TestCacheFailureSharedBriefly(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	reg := testregistry.New(t)
	reg.PushImage(t, "team/app:1") // the repository exists; tag 2 does not
	reg.ResetCounts()
	reg.SetLatency(50 * time.Millisecond)
	ref := reg.Ref("team/app:2")
	start := time.Now()
	var wg sync.WaitGroup
	for _, cr := range resolvers(t, srv, 6) {
		wg.Go(func() {
			_, err := cr.Resolve(context.Background(), mustRef(t, ref))
			if err == nil || !strings.Contains(err.Error(), "404 Not Found") || !strings.HasPrefix(err.Error(), ref+": ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("Resolve(%s) = %v, want one line that names it and says 404 Not Found", ref, err)
			}
		})
	}
	wg.Wait()
	if n := reg.Manifests(); n != 1 {
		t.Errorf("6 processes made %d manifest requests for a missing image, want 1", n)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("6 processes took %s to fail, want about one request's time", d)
	}
}
