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

// entry is an entry as the Cache stores it, whatever resolve makes of it,
// and accept reads entries of up to maxEntry bytes and takes every one.
var (
	entry  = []byte(`{"an":"entry"}`)
	accept = resolve.EntryRead{Max: maxEntry, Check: func([]byte) error { return nil }}
)

// maxEntry is the bound resolve reads a resolution's entry with.
const maxEntry = 64 << 10

// errMissing is the answer of the registry of lookup: no digest.
var errMissing = errors.New("not in the registry")

// keyed keys every reference with key, as a resolver with these options
// would.
func keyed(key string) resolve.CacheKeyFunc {
	return func(context.Context, name.Reference) (string, bool, error) { return key, true, nil }
}

// lookup returns what a process finds in k for ref under key, through
// resolve (which builds the Redis key and reads the entry): the digest of
// an entry it accepts, or a miss. Its registry has nothing and ends the
// run as it answers, so that a miss shares no failure with the processes
// after it.
func lookup(t *testing.T, k *Cache, ref name.Reference, key string) (v1.Hash, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	registry := resolution.Func(func(context.Context, name.Reference) (resolution.Resolution, error) {
		cancel()
		return resolution.Resolution{}, errMissing
	})
	res, err := resolve.NewCachingResolver(registry, k, time.Hour, keyed(key), t.Errorf).Resolve(ctx, ref)
	switch {
	case errors.Is(err, errMissing):
		return v1.Hash{}, false
	case err != nil || res.Source != resolution.Cache:
		t.Fatalf("lookup(%s) = %+v, %v; want a cache hit or a miss", ref, res, err)
	}
	return res.Digest, true
}

// store stores h for ref under key, as a process that resolved it does
// through resolve; it returns the failure to store it, which resolve
// warns of.
func store(t *testing.T, k *Cache, ref name.Reference, key string, h v1.Hash) error {
	t.Helper()
	var failed error
	registry := resolution.Func(func(context.Context, name.Reference) (resolution.Resolution, error) {
		return resolution.Resolution{Digest: h, Source: resolution.Registry}, nil
	})
	warnf := func(format string, args ...any) { failed = fmt.Errorf(format, args...) }
	cr := resolve.NewCachingResolver(registry, k, time.Hour, keyed(key), warnf)
	if res, err := cr.Resolve(context.Background(), ref); err != nil || res.Digest != h {
		t.Fatalf("store(%s) = %+v, %v", ref, res, err)
	}
	return failed
}

// entryKeyOf returns the Redis key of the entry of ref under key: the
// one key that storing it adds to the empty database 0 of srv.
func entryKeyOf(t *testing.T, srv *testredis.Server, k *Cache, ref name.Reference, key string) string {
	t.Helper()
	rc := srv.Client(0)
	defer rc.Close()
	ctx := context.Background()
	if err := rc.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := store(t, k, ref, key, digest); err != nil {
		t.Fatal(err)
	}
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys after one Put = %q, %v; want one", keys, err)
	}
	return keys[0]
}

// TestCacheOneRequestPerReference is several processes (one Client, one
// registry Resolver each) resolving the same references at the same
// moment through one Redis: the registry is asked once per reference.
func TestCacheOneRequestPerReference(t *testing.T) {
	t.Parallel()
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
		cr := resolve.NewCachingResolver(r, newCache(t, c, time.Hour, 10*time.Second), time.Hour, r.CacheKey, t.Errorf)
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
	t.Parallel()
	srv := testredis.Start(t, testredis.Options{})
	rc := srv.Client(0)
	defer rc.Close()
	ctx := context.Background()
	c, w := newClient(t, Options{URL: srv.URL(0), Prefix: "test:"})
	k := newCache(t, c, time.Hour, time.Second)
	ref := mustRef(t, "registry.example/app:1")
	key := "platform "

	if _, ok := lookup(t, k, ref, key); ok {
		t.Fatal("Get on an empty server found an entry")
	}
	if err := store(t, k, ref, key, digest); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if h, ok := lookup(t, k, ref, key); !ok || h != digest {
		t.Fatalf("Get after Put = %s, %t; want %s", h, ok, digest)
	}
	// The key carries the prefix and resolve's key, and expires after
	// Keep (longer than the TTL), the last digest recorded.
	keys, err := rc.Keys(ctx, "test:resolution:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys = %q, %v; want one test:resolution: key", keys, err)
	}
	ek := keys[0]
	if ttl := rc.PTTL(ctx, ek).Val(); ttl <= Keep-time.Minute || ttl > Keep {
		t.Errorf("PTTL(%s) = %s, want about %s", ek, ttl, Keep)
	}
	// Another key, another prefix, another database: misses.
	if _, ok := lookup(t, k, ref, "platform linux/amd64"); ok {
		t.Error("Get under another key hit")
	}
	other, _ := newClient(t, Options{URL: srv.URL(1), Prefix: "test:"})
	if _, ok := lookup(t, newCache(t, other, time.Hour, 0), ref, key); ok {
		t.Error("Get in database 1 hit an entry of database 0")
	}
	// A process with a shorter TTL does not take an older entry: its
	// read says the entry expired, a plain miss.
	expired := resolve.EntryRead{Max: maxEntry, Check: func([]byte) error { return resolve.ErrCacheEntryExpired }}
	if _, ok := newCache(t, c, time.Hour, 0).Get(ctx, strings.TrimPrefix(ek, "test:"), expired); ok {
		t.Error("an entry older than the reader's TTL hit")
	}
	// Flushed: a miss, and the next Put fills it again.
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := lookup(t, k, ref, key); ok {
		t.Error("Get after FLUSHALL hit")
	}
	if err := store(t, k, ref, key, digest); err != nil {
		t.Fatal(err)
	}
	if _, ok := lookup(t, k, ref, key); !ok {
		t.Error("Get after FLUSHALL and Put missed")
	}
	if got := w.get(); len(got) > 0 {
		t.Errorf("warnings: %q", got)
	}
}

func TestCacheIgnoresForeignValues(t *testing.T) {
	t.Parallel()
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
			ek := entryKeyOf(t, srv, k, ref, "k")
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
				if h, ok := lookup(t, k, ref, "k"); ok {
					t.Fatalf("Get = %s, want a miss", h)
				}
			}
			if got := w.get(); len(got) != 1 || !strings.Contains(got[0], "ignoring the value of key "+ek) {
				t.Errorf("warnings = %q, want one that names %s", got, ek)
			}
			// The next resolution replaces it.
			if err := store(t, k, ref, "k", digest); err != nil {
				t.Fatal(err)
			}
			if h, ok := lookup(t, k, ref, "k"); !ok || h != digest {
				t.Errorf("Get after Put = %s, %t", h, ok)
			}
		})
	}
}

func TestClaim(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t, testredis.Options{})
	ctx := context.Background()
	a, _ := newClient(t, Options{URL: srv.URL(0)})
	b, _ := newClient(t, Options{URL: srv.URL(0)})
	ka, kb := newCache(t, a, time.Hour, 2*time.Second), newCache(t, b, time.Hour, 2*time.Second)

	// a claims; b waits for a's answer.
	if _, found, release, err := ka.Claim(ctx, "k", accept); found || err != nil {
		t.Fatalf("first Claim found an answer: %t, %v", found, err)
	} else {
		go func() {
			time.Sleep(100 * time.Millisecond)
			_ = ka.Put(ctx, "k", entry)
			release(nil)
		}()
	}
	start := time.Now()
	h, found, _, err := kb.Claim(ctx, "k", accept)
	if !found || string(h) != string(entry) || err != nil {
		t.Fatalf("waiting Claim = %s, %t, %v; want %s", h, found, err, digest)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("waiting Claim took %s", d)
	}

	// a gives up without an answer: b takes the lock at once, not after
	// the bound.
	_, _, release, _ := ka.Claim(ctx, "k2", accept)
	go func() { time.Sleep(100 * time.Millisecond); release(nil) }()
	start = time.Now()
	if _, found, release, err := kb.Claim(ctx, "k2", accept); found || err != nil {
		t.Errorf("Claim after a release without answer found one: %t, %v", found, err)
	} else {
		release(nil)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Claim after a release took %s", d)
	}

	// A holder that died: b asks the registry itself after the bound.
	_, _, _, _ = ka.Claim(ctx, "k3", accept)
	start = time.Now()
	if _, found, _, _ := kb.Claim(ctx, "k3", accept); found {
		t.Error("Claim of a dead holder's lock found an answer")
	}
	if d := time.Since(start); d < 1500*time.Millisecond || d > 3*time.Second {
		t.Errorf("Claim of a dead holder's lock returned after %s, want about 2s", d)
	}

	// A lock taken when the answer came meanwhile: found at once.
	if err := ka.Put(ctx, "k4", entry); err != nil {
		t.Fatal(err)
	}
	if h, found, _, err := kb.Claim(ctx, "k4", accept); !found || string(h) != string(entry) || err != nil {
		t.Errorf("Claim with the answer stored = %s, %t, %v", h, found, err)
	}

	// a fails: b, waiting, fails at once with a's error, and so does a
	// Claim that comes after, until the failure expires.
	ka.failTTL, kb.failTTL = 500*time.Millisecond, 500*time.Millisecond
	_, _, release, _ = ka.Claim(ctx, "k5", accept)
	go func() {
		time.Sleep(100 * time.Millisecond)
		release(errors.New("registry.example/app:1: HEAD manifest: 404 Not Found\nsecond line"))
	}()
	start = time.Now()
	for range 2 {
		_, found, _, err := kb.Claim(ctx, "k5", accept)
		if want := "registry.example/app:1: HEAD manifest: 404 Not Found second line (the answer another process had moments ago"; found || err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Claim of a failed resolution = %t, %v; want an error that begins %q", found, err, want)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Claims of a failed resolution took %s", d)
	}
	time.Sleep(600 * time.Millisecond)
	if _, found, release, err := kb.Claim(ctx, "k5", accept); found || err != nil {
		t.Errorf("Claim after the failure expired = %t, %v; want the lock", found, err)
	} else {
		release(nil)
	}
}

// TestClientOff checks that a dead or stalled server costs one bounded
// call and one warning, and then nothing.
func TestClientOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
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
			if err := k.Put(ctx, "k", entry); err != nil {
				t.Fatal(err)
			}
			tc.breakIt(t, srv)
			start := time.Now()
			for range 3 {
				if _, ok := k.Get(ctx, "k", accept); ok {
					t.Error("Get hit on a broken server")
				}
				if _, found, release, err := k.Claim(ctx, "k", accept); found || err != nil {
					t.Errorf("Claim found an answer on a broken server: %t, %v", found, err)
				} else {
					release(errors.New("a failure"))
				}
				if err := k.Put(ctx, "k", entry); err != nil {
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
	t.Parallel()
	ctx := context.Background()
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
			if err := k.Put(ctx, "k", entry); err != nil {
				t.Fatal(err)
			}
			h, ok := k.Get(ctx, "k", accept)
			got := w.get()
			for _, g := range got {
				if strings.Contains(g, password) {
					t.Errorf("a warning holds the password: %q", g)
				}
			}
			if tc.want == "" {
				if !ok || string(h) != string(entry) || len(got) > 0 {
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
	t.Parallel()
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
