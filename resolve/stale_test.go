package resolve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/digestpin/digestpin/internal/oneline"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// TestStaleIfError checks that the cache's last digest stands in for a
// registry that cannot answer, within the allowance past the TTL, with
// one warning per reference that says how old it is; and never for a
// registry that said something about the image.
func TestStaleIfError(t *testing.T) {
	t.Parallel()
	const ttl = 5 * time.Minute
	for _, tc := range []struct {
		desc    string
		fail    func(w http.ResponseWriter, r *http.Request) // every manifest request, once the entry is written
		stale   time.Duration
		age     time.Duration // of the entry when the registry fails
		want    resolution.Source
		wantErr string
	}{
		{desc: "503", fail: status(http.StatusServiceUnavailable), stale: time.Hour, age: 30 * time.Minute, want: resolution.Stale},
		{desc: "429", fail: status(http.StatusTooManyRequests), stale: time.Hour, age: 30 * time.Minute, want: resolution.Stale},
		{desc: "connection closed", fail: hangUp, stale: time.Hour, age: 30 * time.Minute, want: resolution.Stale},
		{desc: "at the bound", fail: status(http.StatusBadGateway), stale: time.Hour, age: ttl + time.Hour - time.Second, want: resolution.Stale},
		{desc: "past the bound", fail: status(http.StatusBadGateway), stale: time.Hour, age: ttl + time.Hour, wantErr: "502 Bad Gateway"},
		{desc: "off", fail: status(http.StatusServiceUnavailable), age: 30 * time.Minute, wantErr: "503 Service Unavailable"},
		{desc: "404", fail: status(http.StatusNotFound), stale: time.Hour, age: 30 * time.Minute, wantErr: "404 Not Found"},
		{desc: "401", fail: status(http.StatusUnauthorized), stale: time.Hour, age: 30 * time.Minute, wantErr: "401 Unauthorized"},
		{desc: "403", fail: status(http.StatusForbidden), stale: time.Hour, age: 30 * time.Minute, wantErr: "403 Forbidden"},
		{desc: "fresh entries ask nothing", stale: time.Hour, age: time.Minute, want: resolution.Cache},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			reg := testregistry.New(t)
			want := reg.PushImage(t, "shop/web:1")
			ref := mustRef(t, reg.Ref("shop/web:1"))
			c, clk := newTestCache(t, ttl)
			run := func() (resolution.Resolution, []string, error) {
				r, err := New(WithKeychain(anonymous), withRetry(2, time.Millisecond, time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				var warnings []string
				cr := NewCachingResolver(r, c.DirCache, ttl, r.CacheKey, func(f string, args ...any) { warnings = append(warnings, fmt.Sprintf(f, args...)) }, StaleIfError(tc.stale))
				cr.entries.now = clk.now
				var res resolution.Resolution
				// Twice: one warning per reference.
				for range 2 {
					if res, err = cr.Resolve(context.Background(), ref); err != nil {
						break
					}
				}
				return res, warnings, err
			}
			if res, _, err := run(); err != nil || res.Digest != want {
				t.Fatalf("first run: %+v, %v", res, err)
			}
			clk.add(tc.age)
			if tc.fail != nil {
				reg.Handle(failFirst(1000, tc.fail))
			}
			res, warnings, err := run()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Resolve = %+v, %v; want an error with %q", res, err, tc.wantErr)
				}
				if len(warnings) > 0 {
					t.Errorf("warnings %q, want none", warnings)
				}
				return
			}
			if err != nil || res.Digest != want || res.Source != tc.want {
				t.Fatalf("Resolve = %+v, %v; want %s from %s", res, err, want, tc.want)
			}
			if tc.want != resolution.Stale {
				return
			}
			if len(warnings) != 1 {
				t.Fatalf("warnings %q, want one", warnings)
			}
			for _, w := range []string{ref.String() + ": using " + want.String() + ", resolved " + oneline.Duration(tc.age) + " ago (StaleIfError 1h past CacheTTL 5m), since the registry did not answer: "} {
				if !strings.HasPrefix(warnings[0], w) {
					t.Errorf("warning %q, want it to begin %q", warnings[0], w)
				}
			}
		})
	}
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter, _ *http.Request) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
		}
	}
}

// TestUnavailable checks which failures say nothing about the image.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	te := func(code int) error { return &transport.Error{StatusCode: code} }
	tries := func(mirror []bool, errs ...error) error { return &resolveError{msg: "x", errs: errs, mirror: mirror} }
	for _, tc := range []struct {
		desc string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"503", te(503), true},
		{"500", te(500), true},
		{"429", te(429), true},
		{"408", te(408), true},
		{"404", te(404), false},
		{"401", te(401), false},
		{"403", te(403), false},
		{"400", te(400), false},
		{"refused", &url.Error{Op: "Head", URL: "https://r.example/v2/", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, true},
		{"hung", fmt.Errorf("ping: %w", &regtransport.HungError{}), true},
		{"timeout", context.DeadlineExceeded, true},
		{"platform", &platformError{"no manifest for platform"}, false},
		{"refused login", credentialError{err: te(401)}, false},
		{"malformed", errors.New("unexpected media type"), false},
		{"mirror 404, registry 503", tries([]bool{true, false}, te(404), te(503)), true},
		{"mirror 503, registry 404", tries([]bool{true, false}, te(503), te(404)), false},
		{"mirror 503, registry 401", tries([]bool{true, false}, te(503), te(401)), false},
		{"mirrors only, all 404", tries([]bool{true, true}, te(404), te(404)), true},
		{"shared, unavailable", sharedUnavailable(true), true},
		{"shared, not", sharedUnavailable(false), false},
	} {
		if got := Unavailable(tc.err); got != tc.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", tc.desc, tc.err, got, tc.want)
		}
	}
}

// sharedUnavailable is a failure that says whether it is unavailable, as
// one shared through Redis does.
type sharedUnavailable bool

func (s sharedUnavailable) Error() string     { return "shared" }
func (s sharedUnavailable) Unavailable() bool { return bool(s) }

// TestStaleChoice is a tag policy past the TTL while the registry cannot
// list its tags: the last choice and the last digest of the chosen tag
// stand in, each warned about once; with a 404 (the repository is gone)
// the run fails.
func TestStaleChoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status  int
		wantErr string
	}{
		{status: http.StatusServiceUnavailable},
		{status: http.StatusNotFound, wantErr: "404 Not Found"},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			t.Parallel()
			reg := testregistry.New(t)
			digests := pushTags(t, reg, "shop/web", "1.4.1", "1.4.2")
			var ps tagpolicy.TagPolicies
			must(t, ps.Add(reg.Ref("shop/web"), "semver:~1.4"))
			dir := t.TempDir()
			const ttl = time.Millisecond
			run := func() (resolution.Resolution, []string, error) {
				t.Helper()
				r, _ := newTestResolver(t, withRetry(1, time.Millisecond, time.Millisecond))
				cache, err := NewDirCache(dir)
				must(t, err)
				var warnings []string
				warnf := func(f string, args ...any) { warnings = append(warnings, fmt.Sprintf(f, args...)) }
				live := NewCachingResolver(r, cache, ttl, r.CacheKey, warnf, StaleIfError(time.Hour))
				pr, err := tagpolicy.NewPolicyResolver(live, r, &ps, tagpolicy.WithChoiceCache(cache, ttl, r.CacheKey, warnf), tagpolicy.WithStaleIfError(time.Hour, Unavailable))
				must(t, err)
				res, err := pr.Resolve(context.Background(), parseRef(t, reg.Ref("shop/web:1.4")))
				return res, warnings, err
			}
			if res, _, err := run(); err != nil || res.Tag != "1.4.2" {
				t.Fatalf("first run = %+v, %v", res, err)
			}
			time.Sleep(5 * ttl)
			pushTags(t, reg, "shop/web", "1.4.3")
			reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
				if r.URL.Path == "/v2/" {
					return false
				}
				w.WriteHeader(tc.status)
				return true
			})
			res, warnings, err := run()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("Resolve = %+v, %v; want an error with %q", res, err, tc.wantErr)
				}
				return
			}
			if err != nil || res.Tag != "1.4.2" || res.Digest.String() != digests["1.4.2"] || res.Source != resolution.Stale {
				t.Fatalf("Resolve = %+v, %v; want 1.4.2's %s, stale", res, err, digests["1.4.2"])
			}
			if len(warnings) != 2 || !strings.Contains(warnings[0], ": keeping tag 1.4.2, chosen ") || !strings.Contains(warnings[1], ": using "+digests["1.4.2"]) {
				t.Errorf("warnings %q, want the choice's, then the digest's", warnings)
			}
		})
	}
}
