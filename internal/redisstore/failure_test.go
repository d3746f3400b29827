package redisstore

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
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
		out = append(out, resolve.NewCachingResolver(r, newCache(t, c, time.Hour, 10*time.Second), time.Hour, r.CacheKey, t.Errorf))
	}
	return out
}

// TestCacheFailureSharedBriefly is several processes resolving an image
// the registry does not have, at the same moment: one asks the registry,
// and the others fail at once with its answer instead of asking in turn.
func TestCacheFailureSharedBriefly(t *testing.T) {
	t.Parallel()
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

// TestChoicesShared is several processes applying one tag policy through
// one Redis, four at once and two after them: one lists the repository's
// tags, the others take its choice and list nothing. A choice someone else wrote, whose tag is not
// a valid tag, is ignored with a warning.
func TestChoicesShared(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t, testredis.Options{})
	rc := srv.Client(0)
	defer rc.Close()
	reg := testregistry.New(t)
	d := reg.PushImage(t, "team/app:1.4.2")
	reg.PushImage(t, "team/app:1.3.0")
	reg.ResetCounts()
	var ps tagpolicy.TagPolicies
	if err := ps.Add(reg.Ref("team/app"), "semver:~1.4"); err != nil {
		t.Fatal(err)
	}
	ref := mustRef(t, reg.Ref("team/app:1.4"))
	// process returns a resolver of its own, on its own Client.
	process := func() (*tagpolicy.PolicyResolver, *warnings) {
		c, w := newClient(t, Options{URL: srv.URL(0)})
		k := newCache(t, c, time.Hour, 10*time.Second)
		r, err := resolve.New()
		if err != nil {
			t.Fatal(err)
		}
		pr, err := tagpolicy.NewPolicyResolver(resolve.NewCachingResolver(r, k, time.Hour, r.CacheKey, t.Errorf), r, &ps, tagpolicy.WithChoiceCache(k, time.Hour, r.CacheKey, t.Errorf))
		if err != nil {
			t.Fatal(err)
		}
		return pr, w
	}
	// Four processes at once, then two after them.
	reg.SetLatency(50 * time.Millisecond)
	for _, wave := range []int{4, 2} {
		var wg sync.WaitGroup
		for i := range wave {
			pr, w := process()
			wg.Go(func() {
				res, err := pr.Resolve(context.Background(), ref)
				if err != nil || res.Digest != d || res.Tag != "1.4.2" {
					t.Errorf("process %d: Resolve = %+v, %v; want 1.4.2 at %s", i, res, err, d)
				}
				if got := w.get(); len(got) > 0 {
					t.Errorf("process %d: warnings %q", i, got)
				}
			})
		}
		wg.Wait()
	}
	if n := reg.Count("GET tags"); n != 1 {
		t.Errorf("6 processes listed the tags %d times, want once", n)
	}
	// A foreign choice: its tag would break the reference.
	keys, err := rc.Keys(context.Background(), "digestpin:choice:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("choice keys = %q, %v; want one", keys, err)
	}
	v := rc.Get(context.Background(), keys[0]).Val()
	rc.Set(context.Background(), keys[0], strings.Replace(v, `"tag":"1.4.2"`, `"tag":"1.4.2 evil"`, 1), time.Hour)
	pr, w := process()
	res, err := pr.Resolve(context.Background(), ref)
	if err != nil || res.Tag != "1.4.2" || reg.Count("GET tags") != 2 {
		t.Errorf("Resolve with a foreign choice = %+v, %v after %d listings; want 1.4.2 from a new listing", res, err, reg.Count("GET tags"))
	}
	if got := w.get(); len(got) != 1 || !strings.Contains(got[0], `"1.4.2 evil" is not a valid tag`) {
		t.Errorf("warnings = %q, want one about the foreign choice", got)
	}
}

// TestForeignFailuresIgnored writes failures digestpin would not write
// under a failure key: each is ignored with a warning, and the caller
// takes the lock and asks the registry itself.
func TestForeignFailuresIgnored(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t, testredis.Options{})
	rc := srv.Client(0)
	defer rc.Close()
	ctx := context.Background()
	for _, v := range []string{
		`not json`,
		`{"format":"digestpin-failure-v2","key":"other","error":"x"}`,
		`{"format":"digestpin-failure-v1","key":"k","error":"x"}`,
		`{"format":"digestpin-failure-v2","key":"k","error":"\u001b[31mred"}`,
		`{"format":"digestpin-failure-v2","key":"k","error":""}`,
		`{"format":"digestpin-failure-v2","key":"k","error":"` + strings.Repeat("x", maxMessage+10) + `"}`,
	} {
		c, w := newClient(t, Options{URL: srv.URL(0)})
		k := newCache(t, c, time.Hour, time.Second)
		rc.Set(ctx, k.failKey("k"), v, time.Minute)
		_, found, release, err := k.Claim(ctx, "k", accept)
		if found || err != nil {
			t.Errorf("Claim with the failure %.40q = %t, %v; want the lock", v, found, err)
		}
		release(nil)
		if got := w.get(); len(got) != 1 || !strings.Contains(got[0], "ignoring the value of key digestpin:failed:") {
			t.Errorf("warnings with the failure %.40q = %q, want one", v, got)
		}
	}
}

// TestStaleSharedThroughRedis is several processes resolving an image,
// past the TTL, while its registry is down: one asks the registry, the
// others take its failure, and each answers with the last digest Redis
// recorded (resolve.StaleIfError), the same for every replica.
func TestStaleSharedThroughRedis(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t, testredis.Options{})
	reg := testregistry.New(t)
	want := reg.PushImage(t, "team/app:1")
	ref := mustRef(t, reg.Ref("team/app:1"))
	// A failure is shared for FailureTTL, or the TTL if shorter: a TTL
	// long enough for the others to take it.
	const ttl = time.Second
	process := func() *resolve.CachingResolver {
		c, _ := newClient(t, Options{URL: srv.URL(0)})
		r, err := resolve.New()
		if err != nil {
			t.Fatal(err)
		}
		return resolve.NewCachingResolver(r, newCache(t, c, ttl, 10*time.Second), ttl, r.CacheKey, func(string, ...any) {}, resolve.StaleIfError(time.Hour))
	}
	if res, err := process().Resolve(context.Background(), ref); err != nil || res.Digest != want {
		t.Fatalf("first Resolve = %+v, %v", res, err)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	reg.ResetCounts()
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			return false
		}
		time.Sleep(20 * time.Millisecond)
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	var wg sync.WaitGroup
	for i := range 6 {
		cr := process()
		wg.Go(func() {
			res, err := cr.Resolve(context.Background(), ref)
			if err != nil || res.Digest != want || res.Source != resolution.Stale {
				t.Errorf("process %d: Resolve = %+v, %v; want the stale %s", i, res, err, want)
			}
		})
	}
	wg.Wait()
	if n := reg.Manifests(); n != regtransport.DefaultAttempts {
		t.Errorf("6 processes made %d manifest requests to a registry that is down, want one process's %d attempts", n, regtransport.DefaultAttempts)
	}
}
