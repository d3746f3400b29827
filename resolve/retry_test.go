package resolve

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/testregistry"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
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
			wantHEAD: regtransport.DefaultAttempts,
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
	if n := reg.Count("GET ping"); n != regtransport.DefaultAttempts {
		t.Errorf("pings = %d, want %d", n, regtransport.DefaultAttempts)
	}
}

// TestHangAfterHeadersNamesTheStep is a registry that sends a manifest's
// headers and half of its body, then hangs: the error names the request
// whose answer stopped (GET manifest), as it does for one that never
// began.
func TestHangAfterHeadersNamesTheStep(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	hang := reg.HangAfterHeaders()
	reg.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			return false
		}
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed) // forces a GET
			return true
		}
		return hang(w, r)
	})
	r, _ := newTestResolver(t, WithRequestTimeout(300*time.Millisecond))
	_, err := resolveString(t, r, reg.Ref("app:1"))
	wantErr(t, err, reg.Ref("app:1")+": GET manifest: no answer from "+reg.Host()+" within 300ms")
}
