package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
)

// warnings collects a Client's warnings.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) warnf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, fmt.Sprintf(format, args...))
}

func (w *warnings) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

// newClient returns a Client of srv's database 0 that warns into a
// warnings, closed when the test ends.
func newClient(t *testing.T, o Options) (*Client, *warnings) {
	t.Helper()
	w := &warnings{}
	o.Warnf = w.warnf
	c, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, w
}

func newCache(t *testing.T, c *Client, ttl, wait time.Duration) *Cache {
	t.Helper()
	k, err := c.Cache(ttl, wait)
	if err != nil {
		t.Fatalf("Cache: %v", err)
	}
	return k
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

var digest = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}

// TestCacheOneRequestPerReference is several processes (one Client, one
// registry Resolver each) resolving the same references at the same
// moment through one Redis: the registry is asked once per reference.
func TestCacheOneRequestPerReference(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	reg := testregistry.New(t)
	want := map[string]v1.Hash{}
	for i := range 10 {
		tag := fmt.Sprintf("team/app%d:1", i)
		want[reg.Ref(tag)] = reg.PushImage(t, tag)
	}
	reg.ResetCounts()
	reg.SetLatency(50 * time.Millisecond)

	const procs = 6
	sources := map[resolution.Source]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range procs {
		c, w := newClient(t, Options{URL: srv.URL(0)})
		t.Cleanup(func() {
			if got := w.get(); len(got) > 0 {
				t.Errorf("warnings: %q", got)
			}
		})
		r, err := resolve.New()
		if err != nil {
			t.Fatal(err)
		}
		cr := resolve.NewCachingResolver(r, newCache(t, c, time.Hour, 10*time.Second), r.CacheKey, t.Errorf)
		for ref, h := range want {
			wg.Go(func() {
				res, err := cr.Resolve(context.Background(), mustRef(t, ref))
				if err != nil || res.Digest != h {
					t.Errorf("Resolve(%s) = %s, %v; want %s", ref, res.Digest, err, h)
				}
				mu.Lock()
				sources[res.Source]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if n := reg.Manifests(); n != len(want) {
		t.Errorf("%d processes made %d manifest requests for %d references, want %d", procs, n, len(want), len(want))
	}
	if sources[resolution.Registry] != len(want) || sources[resolution.Cache] != (procs-1)*len(want) {
		t.Errorf("sources = %v, want %d registry and %d cache", sources, len(want), (procs-1)*len(want))
	}
}

func TestCacheEntries(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	rc := srv.Client(0)
	defer rc.Close()
	ctx := context.Background()
	c, w := newClient(t, Options{URL: srv.URL(0), Prefix: "test:"})
	k := newCache(t, c, time.Hour, time.Second)
	ref := mustRef(t, "registry.example/app:1")
	key := "platform "

	if _, ok := k.Get(ctx, ref, key); ok {
		t.Fatal("Get on an empty server found an entry")
	}
	if err := k.Put(ctx, ref, key, digest); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if h, ok := k.Get(ctx, ref, key); !ok || h != digest {
		t.Fatalf("Get after Put = %s, %t; want %s", h, ok, digest)
	}
	// The key carries the prefix and expires with the TTL.
	ek := "test:resolution:" + resolve.CacheEntryID(ref, key)
	if ttl := rc.PTTL(ctx, ek).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("PTTL(%s) = %s, want about 1h", ek, ttl)
	}
	// Another key, another prefix, another database: misses.
	if _, ok := k.Get(ctx, ref, "platform linux/amd64"); ok {
		t.Error("Get under another key hit")
	}
	other, _ := newClient(t, Options{URL: srv.URL(1), Prefix: "test:"})
	if _, ok := newCache(t, other, time.Hour, 0).Get(ctx, ref, key); ok {
		t.Error("Get in database 1 hit an entry of database 0")
	}
	// A process with a shorter TTL does not take an older entry.
	short := newCache(t, c, time.Hour, 0)
	short.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, ok := short.Get(ctx, ref, key); ok {
		t.Error("an entry older than the reader's TTL hit")
	}
	// Flushed: a miss, and the next Put fills it again.
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := k.Get(ctx, ref, key); ok {
		t.Error("Get after FLUSHALL hit")
	}
	if err := k.Put(ctx, ref, key, digest); err != nil {
		t.Fatal(err)
	}
	if _, ok := k.Get(ctx, ref, key); !ok {
		t.Error("Get after FLUSHALL and Put missed")
	}
	if got := w.get(); len(got) > 0 {
		t.Errorf("warnings: %q", got)
	}
}

func TestCacheIgnoresForeignValues(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	rc := srv.Client(0)
	defer rc.Close()
	ctx := context.Background()
	ref := mustRef(t, "registry.example/app:1")
	other := mustRef(t, "registry.example/other:1")
	entry := func(ref name.Reference, key, digest string) string {
		return fmt.Sprintf(`{"format":"digestpin-cache-v2","reference":%q,"key":%q,"digest":%q,"resolved":%q}`, ref.Name(), key, digest, time.Now().UTC().Format(time.RFC3339))
	}
	for _, tc := range []struct {
		desc, value string
		list        bool // a list, not a string
	}{
		{desc: "garbage", value: "\x00\xffnot json"},
		{desc: "a list", value: entry(ref, "k", digest.String()), list: true},
		{desc: "truncated", value: `{"format":"digestpin-cache-v2","refer`},
		{desc: "another reference's entry", value: entry(other, "k", digest.String())},
		{desc: "another key's entry", value: entry(ref, "other", digest.String())},
		{desc: "another format", value: strings.Replace(entry(ref, "k", digest.String()), "v2", "v9", 1)},
		{desc: "bad digest", value: entry(ref, "k", "sha256:beef")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, w := newClient(t, Options{URL: srv.URL(0)})
			k := newCache(t, c, time.Hour, time.Second)
			ek := DefaultPrefix + "resolution:" + resolve.CacheEntryID(ref, "k")
			rc.Del(ctx, ek)
			var err error
			if tc.list {
				err = rc.RPush(ctx, ek, tc.value).Err()
			} else {
				err = rc.Set(ctx, ek, tc.value, time.Hour).Err()
			}
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if h, ok := k.Get(ctx, ref, "k"); ok {
					t.Fatalf("Get = %s, want a miss", h)
				}
			}
			if got := w.get(); len(got) != 1 || !strings.Contains(got[0], "ignoring the value of key "+ek) {
				t.Errorf("warnings = %q, want one that names %s", got, ek)
			}
			// The next resolution replaces it.
			if err := k.Put(ctx, ref, "k", digest); err != nil {
				t.Fatal(err)
			}
			if h, ok := k.Get(ctx, ref, "k"); !ok || h != digest {
				t.Errorf("Get after Put = %s, %t", h, ok)
			}
		})
	}
}

func TestClaim(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	ctx := context.Background()
	ref := mustRef(t, "registry.example/app:1")
	a, _ := newClient(t, Options{URL: srv.URL(0)})
	b, _ := newClient(t, Options{URL: srv.URL(0)})
	ka, kb := newCache(t, a, time.Hour, 2*time.Second), newCache(t, b, time.Hour, 2*time.Second)

	// a claims; b waits for a's answer.
	if _, found, release, err := ka.Claim(ctx, ref, "k"); found || err != nil {
		t.Fatalf("first Claim found an answer: %t, %v", found, err)
	} else {
		go func() {
			time.Sleep(100 * time.Millisecond)
			_ = ka.Put(ctx, ref, "k", digest)
			release(nil)
		}()
	}
	start := time.Now()
	h, found, _, err := kb.Claim(ctx, ref, "k")
	if !found || h != digest || err != nil {
		t.Fatalf("waiting Claim = %s, %t, %v; want %s", h, found, err, digest)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("waiting Claim took %s", d)
	}

	// a gives up without an answer: b takes the lock at once, not after
	// the bound.
	_, _, release, _ := ka.Claim(ctx, ref, "k2")
	go func() { time.Sleep(100 * time.Millisecond); release(nil) }()
	start = time.Now()
	if _, found, release, err := kb.Claim(ctx, ref, "k2"); found || err != nil {
		t.Errorf("Claim after a release without answer found one: %t, %v", found, err)
	} else {
		release(nil)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Claim after a release took %s", d)
	}

	// A holder that died: b asks the registry itself after the bound.
	_, _, _, _ = ka.Claim(ctx, ref, "k3")
	start = time.Now()
	if _, found, _, _ := kb.Claim(ctx, ref, "k3"); found {
		t.Error("Claim of a dead holder's lock found an answer")
	}
	if d := time.Since(start); d < 1500*time.Millisecond || d > 3*time.Second {
		t.Errorf("Claim of a dead holder's lock returned after %s, want about 2s", d)
	}

	// A lock taken when the answer came meanwhile: found at once.
	if err := ka.Put(ctx, ref, "k4", digest); err != nil {
		t.Fatal(err)
	}
	if h, found, _, err := kb.Claim(ctx, ref, "k4"); !found || h != digest || err != nil {
		t.Errorf("Claim with the answer stored = %s, %t, %v", h, found, err)
	}

	// a fails: b, waiting, fails at once with a's error, and so does a
	// Claim that comes after, until the failure expires.
	ka.failTTL, kb.failTTL = 500*time.Millisecond, 500*time.Millisecond
	_, _, release, _ = ka.Claim(ctx, ref, "k5")
	go func() {
		time.Sleep(100 * time.Millisecond)
		release(errors.New("registry.example/app:1: HEAD manifest: 404 Not Found\nsecond line"))
	}()
	start = time.Now()
	for range 2 {
		_, found, _, err := kb.Claim(ctx, ref, "k5")
		if want := "registry.example/app:1: HEAD manifest: 404 Not Found second line (the answer another process had moments ago"; found || err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Claim of a failed resolution = %t, %v; want an error that begins %q", found, err, want)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Claims of a failed resolution took %s", d)
	}
	time.Sleep(600 * time.Millisecond)
	if _, found, release, err := kb.Claim(ctx, ref, "k5"); found || err != nil {
		t.Errorf("Claim after the failure expired = %t, %v; want the lock", found, err)
	} else {
		release(nil)
	}
}

// TestClientOff checks that a dead or stalled server costs one bounded
// call and one warning, and then nothing.
func TestClientOff(t *testing.T) {
	ctx := context.Background()
	ref := mustRef(t, "registry.example/app:1")
	for _, tc := range []struct {
		desc    string
		breakIt func(t *testing.T, s *testredis.Server)
		want    string
	}{
		{desc: "killed", breakIt: func(_ *testing.T, s *testredis.Server) { s.Kill() }, want: "connection refused"},
		{desc: "stalled", breakIt: func(t *testing.T, s *testredis.Server) { s.Pause(t) }, want: "timeout"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			srv := testredis.Start(t, testredis.Options{})
			c, w := newClient(t, Options{URL: srv.URL(0), Timeout: 300 * time.Millisecond})
			k := newCache(t, c, time.Hour, 5*time.Second)
			if err := k.Put(ctx, ref, "k", digest); err != nil {
				t.Fatal(err)
			}
			tc.breakIt(t, srv)
			start := time.Now()
			for range 3 {
				if _, ok := k.Get(ctx, ref, "k"); ok {
					t.Error("Get hit on a broken server")
				}
				if _, found, release, err := k.Claim(ctx, ref, "k"); found || err != nil {
					t.Errorf("Claim found an answer on a broken server: %t, %v", found, err)
				} else {
					release(errors.New("a failure"))
				}
				if err := k.Put(ctx, ref, "k", digest); err != nil {
					t.Errorf("Put: %v", err)
				}
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("9 calls to a broken server took %s, want one bounded call (300ms)", d)
			}
			got := w.get()
			if len(got) != 1 || !strings.Contains(got[0], tc.want) || !strings.Contains(got[0], srv.URL(0)) {
				t.Errorf("warnings = %q, want one naming %s and %q", got, srv.URL(0), tc.want)
			}
		})
	}
}

// TestAuthAndTLS round-trips a cache entry with each way of giving the
// password and the CA: the entry reads back, or the one warning says why
// not, never with the password in it.
func TestAuthAndTLS(t *testing.T) {
	ctx := context.Background()
	ref := mustRef(t, "registry.example/app:1")
	const password = "s3cret-p4ss"
	plain := testredis.Start(t, testredis.Options{Password: password})
	secure := testredis.Start(t, testredis.Options{Password: password, TLS: true})
	host := strings.TrimPrefix(plain.URL(0), "redis://")
	for _, tc := range []struct {
		desc string
		o    Options
		want string // in the one warning; "" for none
	}{
		{desc: "password option", o: Options{URL: plain.URL(0), Password: password}},
		{desc: "password in the URL", o: Options{URL: "redis://:" + password + "@" + host}},
		{desc: "user and password in the URL", o: Options{URL: "redis://default:" + password + "@" + host}},
		{desc: "password option wins over the URL's", o: Options{URL: "redis://:wrong@" + host, Password: password}},
		{desc: "no password", o: Options{URL: plain.URL(0)}, want: "NOAUTH"},
		{desc: "wrong password in the URL", o: Options{URL: "redis://:wrong-" + password + "@" + host}, want: "WRONGPASS"},
		{desc: "TLS with the CA", o: Options{URL: secure.URL(0), Password: password, CAFile: secure.CAFile}},
		{desc: "TLS without the CA", o: Options{URL: secure.URL(0), Password: password}, want: "certificate signed by unknown authority"},
		{desc: "plain to a TLS port", o: Options{URL: strings.Replace(secure.URL(0), "rediss:", "redis:", 1), Password: password}, want: "going on without Redis"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, w := newClient(t, tc.o)
			k := newCache(t, c, time.Hour, 0)
			if err := k.Put(ctx, ref, "k", digest); err != nil {
				t.Fatal(err)
			}
			h, ok := k.Get(ctx, ref, "k")
			got := w.get()
			for _, g := range got {
				if strings.Contains(g, password) {
					t.Errorf("a warning holds the password: %q", g)
				}
			}
			if tc.want == "" {
				if !ok || h != digest || len(got) > 0 {
					t.Errorf("Get = %s, %t; warnings %q; want %s", h, ok, got, digest)
				}
				return
			}
			if ok || len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Errorf("Get = %s, %t; warnings %q, want a miss and one with %q", h, ok, got, tc.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{o: Options{URL: "http://u:s3cret@host:6379/0"}, want: "want redis://"},
		{o: Options{URL: "redis://u:s3cret@host:6379/x"}, want: "invalid database number"},
		{o: Options{URL: "redis://u:s3cret@host:6379/0?dial_timeout=1s"}, want: "query parameters"},
		{o: Options{URL: "redis://u:s3cret@host:port/0"}, want: "parsing the Redis URL"},
		{o: Options{URL: "redis:///0"}, want: "no host"},
		{o: Options{URL: "redis://u:s3cret@host/0", CAFile: "ca.pem"}, want: "needs rediss://"},
		{o: Options{URL: "rediss://u:s3cret@host/0", CAFile: "/nonexistent/ca.pem"}, want: "reading the redis CA file"},
		{o: Options{URL: "redis://u:s3cret@host/0", Timeout: -time.Second}, want: "must not be negative"},
	} {
		_, err := New(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%+v) = %v, want an error with %q and without the password", tc.o, err, tc.want)
		}
	}
}
