package resolve

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// failFirst answers the first n manifest requests with fail, then lets
// the registry answer.
func failFirst(n int, fail func(w http.ResponseWriter, r *http.Request)) testregistry.Handler {
	var seen atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/manifests/") || seen.Add(1) > int64(n) {
			return false
		}
		fail(w, r)
		return true
	}
}

func status(code int, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
	}
}

// reset closes the connection without an answer, with a TCP reset.
func reset(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

func TestRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc        string
		handler     testregistry.Handler
		wantHEAD    int // -1: at least 3 (the client may also retry a reset itself)
		minDuration time.Duration
		wantErr     []string
		wantLog     string
	}{
		{
			desc:     "500 twice then success",
			handler:  failFirst(2, status(http.StatusInternalServerError)),
			wantHEAD: 3,
			wantLog:  "500 Internal Server Error; retrying",
		},
		{
			desc:     "503 every time",
			handler:  failFirst(100, status(http.StatusServiceUnavailable)),
			wantHEAD: DefaultAttempts,
			wantErr:  []string{"HEAD manifest: 503 Service Unavailable", "after 4 attempts"},
		},
		{
			desc:        "429 with Retry-After in seconds",
			handler:     failFirst(1, status(http.StatusTooManyRequests, "Retry-After", "1")),
			wantHEAD:    2,
			minDuration: time.Second,
			wantLog:     "429 Too Many Requests; retrying in 1s",
		},
		{
			desc: "503 with Retry-After as an HTTP-date",
			handler: failFirst(1, func(w http.ResponseWriter, r *http.Request) {
				status(http.StatusServiceUnavailable, "Retry-After", time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat))(w, r)
			}),
			wantHEAD:    2,
			minDuration: time.Second, // the date has whole seconds
		},
		{
			desc:     "Retry-After longer than the limit",
			handler:  failFirst(1, status(http.StatusTooManyRequests, "Retry-After", "3600")),
			wantHEAD: 1,
			wantErr:  []string{"429 Too Many Requests", "not retried: Retry-After 1h0m0s is longer than 1m0s"},
		},
		{
			desc:     "connection reset twice then success",
			handler:  failFirst(2, reset),
			wantHEAD: -1,
			wantLog:  "; retrying in", // Go's transport retries a reused connection once itself, not twice
		},
		{
			desc:     "401 is not retried",
			handler:  failFirst(100, status(http.StatusUnauthorized)),
			wantHEAD: 1,
			wantErr:  []string{"HEAD manifest: 401 Unauthorized"},
		},
		{
			desc:     "501 is not retried",
			handler:  failFirst(100, status(http.StatusNotImplemented)),
			wantHEAD: 1,
			wantErr:  []string{"501 Not Implemented"}, // after a GET, which also got 501
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			reg := testregistry.New(t)
			want := reg.PushImage(t, "app:1")
			reg.ResetCounts()
			reg.Handle(tc.handler)
			r, logs := newTestResolver(t)
			start := time.Now()
			got, err := resolveString(t, r, reg.Ref("app:1"))
			elapsed := time.Since(start)
			if tc.wantErr != nil {
				wantErr(t, err, append(tc.wantErr, reg.Ref("app:1"))...)
			} else if err != nil || got != want.String() {
				t.Errorf("Resolve = %s, %v, want %s", got, err, want)
			}
			if n := reg.Count("HEAD manifests"); tc.wantHEAD >= 0 && n != tc.wantHEAD || tc.wantHEAD < 0 && n < 3 {
				t.Errorf("HEAD manifests = %d, want %d", n, tc.wantHEAD)
			}
			if elapsed < tc.minDuration {
				t.Errorf("took %s, want at least %s (Retry-After)", elapsed, tc.minDuration)
			}
			if !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("log = %q, want it to contain %q", logs, tc.wantLog)
			}
		})
	}
}

func TestRetryAfterWaitsNoLongerThanTheDeadline(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	reg.Handle(failFirst(1, status(http.StatusTooManyRequests, "Retry-After", "30")))
	r, _ := newTestResolver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := r.Resolve(ctx, parseRef(t, reg.Ref("app:1")))
	wantErr(t, err, "429 Too Many Requests", "would pass the deadline")
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s, want an answer at once", d)
	}
}

func TestLongErrorBodyIsOneShortLine(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	body := "<html>\n<body>\n" + strings.Repeat("bad gateway, really\n", 100) + "</body></html>"
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		switch r.Method {
		case http.MethodHead:
			w.WriteHeader(http.StatusMethodNotAllowed) // forces a GET, which has a body
		default:
			if !strings.Contains(r.URL.Path, "/manifests/") {
				return false
			}
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(body))
		}
		return true
	})
	r, _ := newTestResolver(t)
	_, err := resolveString(t, r, reg.Ref("app:1"))
	wantErr(t, err, "GET manifest: 502 Bad Gateway (<html> <body> bad gateway, really", "…", "after 4 attempts")
	if n := len(err.Error()); n > 400 {
		t.Errorf("error is %d bytes long, want a short line: %q", n, err)
	}
}

func TestHungRegistryCostsOneTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	reg := testregistry.New(t)
	var refs []string
	for _, repo := range []string{"a:1", "b:1", "c:1", "d:1"} {
		reg.PushImage(t, repo)
		refs = append(refs, reg.Ref(repo))
	}
	reg.ResetCounts()
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			return false
		}
		<-r.Context().Done() // hang until the client gives up
		return true
	})
	r, _ := newTestResolver(t, WithJobs(1), WithRequestTimeout(timeout))
	var wg sync.WaitGroup
	errs := make([]error, len(refs))
	for i, ref := range refs {
		wg.Go(func() { _, errs[i] = resolveString(t, r, ref) })
	}
	wg.Wait()
	// Without the memory of a hung host: 4 references one at a time, each
	// a timeout (or four, with retries). The requests counted below say
	// so without a clock: one HEAD, and one reference timed out.
	var got []string
	for i, err := range errs {
		if err == nil {
			t.Fatalf("Resolve(%s) = nil error", refs[i])
		}
		wantErr(t, err, refs[i], "within 300ms")
		switch {
		case strings.Contains(err.Error(), "no answer from "+reg.Host()):
			got = append(got, "timed out")
		case strings.Contains(err.Error(), "skipped: "+reg.Host()+" gave no answer within 300ms earlier"):
			got = append(got, "skipped")
		default:
			t.Errorf("Resolve(%s) = %v, want a timeout", refs[i], err)
		}
	}
	if n := reg.Count("HEAD manifests"); n != 1 {
		t.Errorf("HEAD manifests = %d, want 1", n)
	}
	if diff := cmp.Diff(1, strings.Count(strings.Join(got, " "), "timed out")); diff != "" {
		t.Errorf("timed-out references (-want +got):\n%s\nerrors: %v", diff, errs)
	}
}

func TestDeadlineBoundsAHungRegistry(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		<-r.Context().Done()
		return true
	})
	r, _ := newTestResolver(t, WithRequestTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Resolve(ctx, parseRef(t, reg.Ref("app:1")))
	wantErr(t, err, reg.Ref("app:1"), "deadline exceeded")
	// The request timeout is a minute: ending well before it shows that
	// the deadline bounded the call, on a machine however busy.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %s, want about the deadline (300ms), not the request timeout (1m)", d)
	}
}

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
	p := retryPolicy{attempts: 6, base: 100 * time.Millisecond, max: 500 * time.Millisecond}
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
		{"per-request timeout", &hungError{host: "registry.example", timeout: time.Second}, false},
		{"DNS", &net.DNSError{Err: "no such host", Name: "registry.example", IsNotFound: true}, false},
		{"certificate", x509.UnknownAuthorityError{}, false},
		{"canceled", context.Canceled, false},
	} {
		if got := transientNetError(tc.err); got != tc.want {
			t.Errorf("transientNetError(%s: %v) = %t, want %t", tc.desc, tc.err, got, tc.want)
		}
	}
}

func TestFailingPingIsSharedByWaitingReferences(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	var refs []string
	for _, repo := range []string{"a:1", "b:1", "c:1", "d:1", "e:1"} {
		reg.PushImage(t, repo)
		refs = append(refs, reg.Ref(repo))
	}
	reg.ResetCounts()
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v2/" {
			return false
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	r, _ := newTestResolver(t, WithJobs(len(refs)))
	var wg sync.WaitGroup
	errs := make([]error, len(refs))
	for i, ref := range refs {
		wg.Go(func() { _, errs[i] = resolveString(t, r, ref) })
	}
	wg.Wait()
	for i, err := range errs {
		wantErr(t, err, refs[i], "ping "+reg.Host()+": 503 Service Unavailable")
	}
	// One ping with its retries, not one per reference.
	if n := reg.Count("GET ping"); n != DefaultAttempts {
		t.Errorf("pings = %d, want %d", n, DefaultAttempts)
	}
}
