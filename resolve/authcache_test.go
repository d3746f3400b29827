package resolve

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// authWorld is a registry, with a token server in front of it or not,
// its images, and a cache folder that runs share.
type authWorld struct {
	reg   *testregistry.Registry
	ts    *testregistry.TokenServer // nil: no auth
	want  map[string]string         // reference → digest
	cache *DirCache
}

func newAuthWorld(t *testing.T, bearer bool, user, password string, repos ...string) *authWorld {
	t.Helper()
	w := &authWorld{reg: testregistry.New(t), want: map[string]string{}}
	for _, repo := range repos {
		w.want[w.reg.Ref(repo+":1")] = w.reg.PushImage(t, repo+":1").String()
	}
	if bearer {
		w.ts = testregistry.NewTokenServer(t, user, password)
		w.reg.Handle(w.ts.Guard())
	}
	c, err := NewDirCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w.cache = c
	return w
}

// counts are the requests of one run: pings, token requests, HEADs.
type counts struct{ Pings, Tokens, Heads int }

// run resolves every image once with a new Resolver on the world's
// cache, as one digestpin process does, and returns its requests, its
// log and its warnings.
func (w *authWorld) run(t *testing.T, opts ...Option) (counts, string, string) {
	t.Helper()
	w.reg.ResetCounts()
	tokens0 := 0
	if w.ts != nil {
		tokens0 = w.ts.Exchanges()
	}
	warns := &logBuffer{}
	r, logs := newTestResolver(t, append([]Option{WithAuthCache(w.cache), WithWarnf(warns.logf)}, opts...)...)
	if diff := cmp.Diff(w.want, resolveAsync(t, r, w.want, 1)()); diff != "" {
		t.Fatalf("digests (-want +got):\n%s", diff)
	}
	c := counts{Pings: w.reg.Count("GET ping"), Heads: w.reg.Count("HEAD manifests")}
	if w.ts != nil {
		c.Tokens = w.ts.Exchanges() - tokens0
	}
	// A token is never in a message.
	for _, s := range []string{logs.String(), warns.String()} {
		if strings.Contains(s, "tok-") {
			t.Errorf("a message shows a token:\n%s", s)
		}
	}
	return c, logs.String(), warns.String()
}

func wantCounts(t *testing.T, what string, got, want counts) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: requests (-want +got):\n%s", what, diff)
	}
}

func TestAuthCacheWarmRun(t *testing.T) {
	t.Parallel()
	repos := []string{"team/a", "team/b", "team/c"}
	for _, tc := range []struct {
		desc           string
		bearer         bool
		user, password string
		cold           counts
	}{
		{desc: "no auth", cold: counts{Pings: 1, Heads: 3}},
		{desc: "bearer, anonymous", bearer: true, cold: counts{Pings: 1, Tokens: 1, Heads: 3}},
		{desc: "bearer, a user", bearer: true, user: "bob", password: "hunter22", cold: counts{Pings: 1, Tokens: 1, Heads: 3}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			w := newAuthWorld(t, tc.bearer, tc.user, tc.password, repos...)
			opts := []Option{WithKeychain(anonymous)}
			if tc.user != "" {
				opts = []Option{WithKeychain(staticKeychain{tc.user, tc.password})}
			}
			got, _, warns := w.run(t, opts...)
			// A cold run normally takes one token for every repository;
			// one announced after the token request began (a loaded
			// machine) takes another: the warm run below takes none.
			if tc.cold.Tokens > 0 && got.Tokens > tc.cold.Tokens && got.Tokens <= len(repos) {
				got.Tokens = tc.cold.Tokens
			}
			wantCounts(t, "cold", got, tc.cold)
			got, _, warns2 := w.run(t, opts...)
			wantCounts(t, "warm", got, counts{Heads: 3})
			if warns+warns2 != "" {
				t.Errorf("warnings:\n%s%s", warns, warns2)
			}
			// The entries are the user's alone.
			files, err := filepath.Glob(filepath.Join(w.cache.Dir(), "*.json"))
			if err != nil || len(files) == 0 {
				t.Fatalf("cache files: %v, %v", files, err)
			}
			for _, f := range files {
				if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, %v; want 0600", f, fi.Mode(), err)
				}
			}
		})
	}
}

func TestAuthCacheTokens(t *testing.T) {
	t.Parallel()
	bob := WithKeychain(staticKeychain{"bob", "hunter22"})
	for _, tc := range []struct {
		desc string
		// between runs the first and the second
		between func(t *testing.T, w *authWorld)
		second  []Option
		want    counts
		wantLog string
	}{
		{
			desc:   "another user asks for a token of their own",
			second: []Option{WithKeychain(staticKeychain{"carol", "hunter22"})},
			want:   counts{Tokens: -1, Heads: 2},
		},
		{
			desc:   "an expired token is asked for again, without a ping",
			second: []Option{bob, withAuthClock(time.Now().Add(6 * time.Minute))},
			want:   counts{Tokens: 1, Heads: 2},
		},
		{
			desc: "a revoked token: one 401, one token request, the HEAD again",
			between: func(t *testing.T, w *authWorld) {
				w.ts.Revoke()
			},
			second:  []Option{bob, WithJobs(1)},
			want:    counts{Tokens: 1, Heads: 3},
			wantLog: "the registry refused a kept token",
		},
		{
			desc: "the registry wants auth where it wanted none",
			between: func(t *testing.T, w *authWorld) {
				w.reg.Handle(w.ts.Guard())
			},
			second:  []Option{bob, WithJobs(1)},
			want:    counts{Pings: 1, Tokens: 1, Heads: 3},
			wantLog: "pinging the registry",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			open := strings.HasPrefix(tc.desc, "the registry wants auth")
			w := newAuthWorld(t, !open, "", "", "team/a", "team/b")
			if open {
				// The guard comes between the runs.
				w.ts = testregistry.NewTokenServer(t, "bob", "hunter22")
			}
			got, _, _ := w.run(t, bob)
			if !open {
				wantCounts(t, "first", got, counts{Pings: 1, Tokens: 1, Heads: 2})
			}
			if tc.between != nil {
				tc.between(t, w)
			}
			got, logs, warns := w.run(t, tc.second...)
			if tc.want.Tokens < 0 {
				// Another user's first run: at least one token of
				// their own (two when the second repository is asked
				// for after the first token request began).
				tc.want.Tokens = 1
				if got.Tokens == 2 {
					tc.want.Tokens = 2
				}
			}
			wantCounts(t, "second", got, tc.want)
			if !strings.Contains(logs, tc.wantLog) {
				t.Errorf("log does not say %q:\n%s", tc.wantLog, logs)
			}
			if warns != "" {
				t.Errorf("warnings:\n%s", warns)
			}
			// What the second run learnt serves the third.
			got, _, _ = w.run(t, tc.second...)
			wantCounts(t, "third", got, counts{Heads: 2})
		})
	}
}

// withAuthClock makes the Resolver's auth cache read the time as now.
func withAuthClock(now time.Time) Option {
	return func(o *options) error {
		o.authNow = func() time.Time { return now }
		return nil
	}
}

func TestAuthCacheIssuedAt(t *testing.T) {
	t.Parallel()
	w := newAuthWorld(t, true, "", "", "team/a")
	// A token issued 50 s ago that lasts 60 s has 10 s left: less than
	// the margin, it is not kept.
	w.ts.SetExpiry(time.Minute, 50*time.Second)
	got, _, _ := w.run(t)
	wantCounts(t, "first", got, counts{Pings: 1, Tokens: 1, Heads: 1})
	got, _, _ = w.run(t)
	wantCounts(t, "second", got, counts{Tokens: 1, Heads: 1})
}

func TestAuthCacheBadEntries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		entry    func(w *authWorld, ping, tokens []byte) (key string, b []byte)
		want     counts
		wantWarn string
	}{
		{
			desc:     "garbage for the ping",
			entry:    func(w *authWorld, _, _ []byte) (string, []byte) { return w.pingKey(), []byte("\x00garbage") },
			want:     counts{Pings: 1, Heads: 1},
			wantWarn: "not an auth cache entry",
		},
		{
			desc:     "a JSON array for the tokens",
			entry:    func(w *authWorld, _, _ []byte) (string, []byte) { return w.tokenKey(), []byte(`[1, 2]`) },
			want:     counts{Tokens: 1, Heads: 1},
			wantWarn: "not an auth cache entry",
		},
		{
			desc: "the ping answer of another registry",
			entry: func(w *authWorld, ping, _ []byte) (string, []byte) {
				return w.pingKey(), []byte(strings.Replace(string(ping), w.reg.Host(), "127.0.0.1:1", 1))
			},
			want:     counts{Pings: 1, Heads: 1},
			wantWarn: `the ping answer of "http://127.0.0.1:1"`,
		},
		{
			desc: "the tokens of another user",
			entry: func(w *authWorld, _, tokens []byte) (string, []byte) {
				var e tokenSet
				_ = json.Unmarshal(tokens, &e)
				e.Identity = strings.Repeat("0", 64)
				b, _ := json.Marshal(e)
				return w.tokenKey(), b
			},
			want:     counts{Tokens: 1, Heads: 1},
			wantWarn: "for other credentials",
		},
		{
			desc: "a ping answer of another format",
			entry: func(w *authWorld, ping, _ []byte) (string, []byte) {
				return w.pingKey(), []byte(strings.Replace(string(ping), authFormat, "digestpin-auth-v0", 1))
			},
			want:     counts{Pings: 1, Heads: 1},
			wantWarn: `of format "digestpin-auth-v0"`,
		},
		{
			desc: "a realm that is not https",
			entry: func(w *authWorld, ping, _ []byte) (string, []byte) {
				return w.pingKey(), []byte(strings.Replace(string(ping), "http://localhost", "ftp://localhost", 1))
			},
			want:     counts{Pings: 1, Heads: 1},
			wantWarn: "is not https",
		},
		{
			desc: "a status other than 200 or 401",
			entry: func(w *authWorld, ping, _ []byte) (string, []byte) {
				return w.pingKey(), []byte(strings.Replace(string(ping), `"status":401`, `"status":302`, 1))
			},
			want:     counts{Pings: 1, Heads: 1},
			wantWarn: "status 302",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			w := newAuthWorld(t, true, "", "", "team/a")
			w.run(t)
			key, b := tc.entry(w, w.read(t, w.pingKey()), w.read(t, w.tokenKey()))
			if err := w.cache.Put(context.Background(), key, b); err != nil {
				t.Fatal(err)
			}
			got, _, warns := w.run(t)
			wantCounts(t, "with the bad entry", got, tc.want)
			if !strings.Contains(warns, tc.wantWarn) || strings.Count(warns, "\n") != 0 {
				t.Errorf("warnings = %q, want one line that says %q", warns, tc.wantWarn)
			}
			// The run replaced it.
			got, _, warns = w.run(t)
			wantCounts(t, "after", got, counts{Heads: 1})
			if warns != "" {
				t.Errorf("warnings after:\n%s", warns)
			}
		})
	}
}

// pingKey and tokenKey are the cache keys of the world's registry's ping
// answer, and of its anonymous tokens.
func (w *authWorld) pingKey() string {
	return authKey("auth-ping", registryID("http", w.reg.Host()))
}

func (w *authWorld) tokenKey() string {
	return authKey("auth-token", registryID("http", w.reg.Host()), identityHash("anonymous"))
}

func (w *authWorld) read(t *testing.T, key string) []byte {
	t.Helper()
	b, ok := w.cache.Get(context.Background(), key, anyEntry)
	if !ok {
		t.Fatalf("no cache entry %s", key)
	}
	return b
}

func TestAuthCachePrivateRealm(t *testing.T) {
	t.Parallel()
	// A kept realm on a private address, which the registry (on
	// loopback) is not on: refused as a live one is, then the registry
	// is pinged.
	for _, realm := range []string{"http://10.1.2.3:9/token", "http://169.254.169.254/token"} {
		t.Run(realm, func(t *testing.T) {
			t.Parallel()
			w := newAuthWorld(t, true, "", "", "team/a")
			w.run(t)
			ping := w.read(t, w.pingKey())
			b := []byte(strings.Replace(string(ping), w.ts.Realm(), realm, 1))
			if err := w.cache.Put(context.Background(), w.pingKey(), b); err != nil {
				t.Fatal(err)
			}
			// The kept tokens are of the live realm: none serves.
			got, logs, _ := w.run(t)
			wantCounts(t, "with the private realm", got, counts{Pings: 1, Tokens: 1, Heads: 1})
			if !strings.Contains(logs, "pinging the registry") {
				t.Errorf("log does not say the registry was pinged:\n%s", logs)
			}
		})
	}
}

func TestAuthCacheTagListingFallsBack(t *testing.T) {
	t.Parallel()
	w := newAuthWorld(t, false, "", "", "team/a")
	w.run(t)
	// The registry wants tokens now; the kept answer says it wants none.
	w.ts = testregistry.NewTokenServer(t, "", "")
	w.reg.Handle(w.ts.Guard())
	w.reg.ResetCounts()
	r, logs := newTestResolver(t, WithAuthCache(w.cache))
	repo, err := name.NewRepository(w.reg.Ref("team/a"))
	if err != nil {
		t.Fatal(err)
	}
	tags, err := r.Tags(context.Background(), repo)
	if err != nil || len(tags) != 1 || tags[0] != "1" {
		t.Fatalf("Tags = %q, %v; want [1]", tags, err)
	}
	if n := w.reg.Count("GET ping"); n != 1 || !strings.Contains(logs.String(), "pinging the registry") {
		t.Errorf("%d pings, log:\n%s\nwant one ping after the kept answer failed", n, logs)
	}
}
