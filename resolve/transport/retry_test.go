package transport

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	type result struct {
		D  time.Duration
		OK bool
	}
	for _, tc := range []struct {
		in   string
		want result
	}{
		{"", result{0, false}},
		{"0", result{0, true}},
		{" 7 ", result{7 * time.Second, true}},
		{"-1", result{0, false}},
		{"soon", result{0, false}},
		{now.Add(90 * time.Second).Format(http.TimeFormat), result{90 * time.Second, true}},
		{now.Add(-time.Hour).Format(http.TimeFormat), result{0, true}},
		{"Sunday, 01-Mar-26 12:00:30 GMT", result{30 * time.Second, true}}, // RFC 850
	} {
		d, ok := retryAfter(tc.in, now)
		if diff := cmp.Diff(tc.want, result{d, ok}); diff != "" {
			t.Errorf("retryAfter(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestBackoffGrowsWithJitterWithinBounds(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{Attempts: 6, Base: 100 * time.Millisecond, Max: 500 * time.Millisecond}
	for _, tc := range []struct {
		retry    int
		min, max time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 200 * time.Millisecond, 400 * time.Millisecond},
		{4, 250 * time.Millisecond, 500 * time.Millisecond},
		{9, 250 * time.Millisecond, 500 * time.Millisecond},
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := p.backoff(tc.retry)
			if d < tc.min || d > tc.max {
				t.Fatalf("backoff(%d) = %s, want within [%s, %s]", tc.retry, d, tc.min, tc.max)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("backoff(%d) took %d distinct values in 200 draws, want jitter", tc.retry, len(seen))
		}
	}
}

func TestTransientClassification(t *testing.T) {
	t.Parallel()
	var got []int
	for code := 400; code <= 599; code++ {
		if transientStatus(code) {
			got = append(got, code)
		}
	}
	var want []int
	want = append(want, 408, 429)
	for code := 500; code <= 599; code++ {
		if code != 501 && code != 505 {
			want = append(want, code)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("transient statuses (-want +got):\n%s", diff)
	}
}

// timeoutError is a net.Error that timed out, like net/http's TLS
// handshake timeout.
type timeoutError struct{}

func (timeoutError) Error() string   { return "net/http: TLS handshake timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestTransientNetErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		err  error
		want bool
	}{
		{"connection reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"connection refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"closed early", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{"TLS handshake timeout", &url.Error{Op: "Get", URL: "https://registry.example/v2/", Err: timeoutError{}}, true},
		{"per-request timeout", &HungError{host: "registry.example", timeout: time.Second}, false},
		{"DNS", &net.DNSError{Err: "no such host", Name: "registry.example", IsNotFound: true}, false},
		{"certificate", x509.UnknownAuthorityError{}, false},
		{"canceled", context.Canceled, false},
	} {
		if got := transientNetError(tc.err); got != tc.want {
			t.Errorf("transientNetError(%s: %v) = %t, want %t", tc.desc, tc.err, got, tc.want)
		}
	}
}

// TestFailingHostOneAttempt: once a request to a host has failed through
// every retry, later requests to it get one attempt each and say why;
// another host, and an answer that is no failure, are not affected.
func TestFailingHostOneAttempt(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/v2/ok" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	var otherHits atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer other.Close()
	rt := &retryTransport{next: http.DefaultTransport, policy: RetryPolicy{Attempts: 3, Base: time.Millisecond, Max: 2 * time.Millisecond, MaxRetryAfter: time.Second}, timeout: 5 * time.Second, logf: func(string, ...any) {}}
	get := func(u string) (int, string) {
		t.Helper()
		tr := &Trace{}
		req, err := http.NewRequestWithContext(WithTrace(context.Background(), tr), http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, tr.Summary()
	}
	for i, tc := range []struct {
		url     string
		hits    int64
		code    int
		summary string
		counter *atomic.Int64
	}{
		{down.URL + "/v2/a", 3, 503, "after 3 attempts", &hits},
		{down.URL + "/v2/b", 1, 503, "not retried: an earlier request to " + strings.TrimPrefix(down.URL, "http://") + " failed after 3 attempts in this run", &hits},
		{down.URL + "/v2/ok", 1, 200, "", &hits},
		{other.URL + "/v2/a", 3, 503, "after 3 attempts", &otherHits},
	} {
		tc.counter.Store(0)
		code, summary := get(tc.url)
		if n := tc.counter.Load(); n != tc.hits || code != tc.code || summary != tc.summary {
			t.Errorf("request %d (%s): %d attempts, %d, %q; want %d, %d, %q", i, tc.url, n, code, summary, tc.hits, tc.code, tc.summary)
		}
	}
}
