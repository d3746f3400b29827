package transport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/digestpin/digestpin/internal/redact"
)

// DefaultAttempts is how many times one registry request is sent, the
// first try included, when the registry answers with a transient failure.
const DefaultAttempts = 4

// DefaultMaxRetryAfter is the longest Retry-After a Resolver waits for.
// A registry that asks for a longer pause fails the request at once,
// rather than holding the whole run.
const DefaultMaxRetryAfter = time.Minute

// Backoff between attempts when the registry gives no Retry-After: the
// n-th retry waits a random time between half and all of base·2^(n-1),
// at most max.
const (
	defaultBackoffBase = 500 * time.Millisecond
	defaultBackoffMax  = 8 * time.Second
)

// RetryPolicy says how often and how patiently a request is retried. A
// zero field is its default.
type RetryPolicy struct {
	// Attempts is how many times a request is sent, the first try
	// included; the default is DefaultAttempts.
	Attempts int
	// Base and Max bound the backoff between attempts when the registry
	// gives no Retry-After: the n-th retry waits a random time between
	// half and all of Base·2^(n-1), at most Max. The defaults are 500ms
	// and 8s.
	Base, Max time.Duration
	// MaxRetryAfter is the longest Retry-After waited for; the default is
	// DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
}

// withDefaults returns p with each zero field set to its default.
func (p RetryPolicy) withDefaults() RetryPolicy {
	p.Attempts = cmp.Or(p.Attempts, DefaultAttempts)
	p.Base = cmp.Or(p.Base, defaultBackoffBase)
	p.Max = cmp.Or(p.Max, defaultBackoffMax)
	p.MaxRetryAfter = cmp.Or(p.MaxRetryAfter, DefaultMaxRetryAfter)
	return p
}

// backoff returns the jittered wait before retry n (1 for the first).
func (p RetryPolicy) backoff(n int) time.Duration {
	d := p.Base
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1) //nolint:gosec // jitter, not a secret
}

// retryTransport sends each request again when the registry answers with a
// transient failure (408, 429, 5xx but 501 and 505, a reset or refused
// connection, a TLS handshake timeout), waiting with exponential backoff
// and jitter or as long as Retry-After says. Each attempt is bounded by
// timeout. A host that lets an attempt run into that bound is considered
// hung for the rest of the run: later requests to it fail at once, so a
// hung registry costs one timeout, not one per image. A host that keeps
// failing a request through every retry (down, refusing connections,
// 5xx, rate limited) gets one attempt per later request in the run, and
// no retries: a registry outage costs one request's retries, then one
// request per image, not retries per image (with the registry's ping
// answer kept in the cache, no ping fails for all of them first).
//
// go-containerregistry's own retries are off (the registry transports are
// built as transport.Wrapper), so attempts are not multiplied.
type retryTransport struct {
	next    http.RoundTripper
	policy  RetryPolicy
	timeout time.Duration
	logf    func(format string, args ...any)
	red     *redact.Redactor // masks credentials in causes before they are cut
	hung    sync.Map         // host → time.Duration it failed to answer within
	failing sync.Map         // host → how an earlier request gave up ("after 4 attempts")
}

// RoundTrip implements http.RoundTripper.
func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if d, ok := t.hung.Load(req.URL.Host); ok {
		return nil, &HungError{host: req.URL.Host, timeout: d.(time.Duration), earlier: true}
	}
	tr := traceFrom(req.Context())
	for attempt := 1; ; attempt++ {
		resp, err := t.attempt(req, attempt)
		tr.attempted(attempt)
		if how, failing := t.failing.Load(req.URL.Host); failing && transient(req, resp, err) {
			tr.gaveUp(fmt.Sprintf("not retried: an earlier request to %s failed %s in this run", req.URL.Host, how))
			return resp, err
		}
		wait, cause, retry := t.shouldRetry(req, resp, err, attempt, tr)
		if !retry {
			if transient(req, resp, err) {
				how := fmt.Sprintf("after %d attempts", attempt)
				if attempt == 1 {
					how = "and was not retried"
				}
				t.failing.LoadOrStore(req.URL.Host, how)
			}
			return resp, err
		}
		if resp != nil {
			// Drain a little so that the connection can be reused.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			_ = resp.Body.Close()
		}
		t.logf("%s %s%s: %s; retrying in %s (attempt %d of %d)", req.Method, req.URL.Host, req.URL.Path, cause, wait.Round(time.Millisecond), attempt+1, t.policy.Attempts)
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-req.Context().Done():
			timer.Stop()
			return nil, req.Context().Err()
		}
	}
}

// attempt sends req once, bounded by the per-request timeout. The bound
// covers reading the body too: it is released when the body is closed.
func (t *retryTransport) attempt(req *http.Request, n int) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	r := req.Clone(ctx)
	if n > 1 && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			cancel()
			return nil, err
		}
		r.Body = body
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		cancel()
		if t.timedOut(ctx, req) {
			return nil, &HungError{host: req.URL.Host, timeout: t.timeout}
		}
		return nil, err
	}
	resp.Body = &timeoutBody{ReadCloser: resp.Body, t: t, req: req, ctx: ctx, cancel: cancel}
	return resp, nil
}

// timedOut reports whether an attempt ran into the per-request timeout
// (rather than the caller's deadline), and marks the host hung if so.
func (t *retryTransport) timedOut(ctx context.Context, req *http.Request) bool {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || req.Context().Err() != nil {
		return false
	}
	t.hung.Store(req.URL.Host, t.timeout)
	return true
}

// shouldRetry decides whether to send req again and after how long.
func (t *retryTransport) shouldRetry(req *http.Request, resp *http.Response, err error, attempt int, tr *Trace) (time.Duration, string, bool) {
	var cause string
	var after time.Duration
	var hasAfter bool
	switch {
	case err != nil:
		if !transientNetError(err) || req.Context().Err() != nil {
			return 0, "", false
		}
		cause = Cause(req.Context(), err, t.red)
	case transientStatus(resp.StatusCode):
		cause = resp.Status
		after, hasAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	default:
		return 0, "", false
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return 0, "", false
	}
	if attempt >= t.policy.Attempts {
		return 0, "", false
	}
	if hasAfter && after > t.policy.MaxRetryAfter {
		tr.gaveUp(fmt.Sprintf("not retried: Retry-After %s is longer than %s", after, t.policy.MaxRetryAfter))
		return 0, "", false
	}
	wait := max(after, t.policy.backoff(attempt))
	if dl, ok := req.Context().Deadline(); ok && time.Until(dl) < wait {
		tr.gaveUp(fmt.Sprintf("not retried: waiting %s would pass the deadline", wait.Round(time.Millisecond)))
		return 0, "", false
	}
	tr.retried()
	return wait, cause, true
}

// transient reports whether an attempt failed in a way that another may
// not (transientStatus, transientNetError), not because the request's own
// context ended.
func transient(req *http.Request, resp *http.Response, err error) bool {
	if err != nil {
		return req.Context().Err() == nil && transientNetError(err)
	}
	return transientStatus(resp.StatusCode)
}

// transientStatus reports whether a registry answer may change when asked
// again.
func transientStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	}
	return code >= 500 && code <= 599
}

// transientNetError reports whether a failed round trip is worth another
// try: the connection was reset, refused or closed early, or a dial or
// TLS handshake timed out (the per-request timeout is not: see HungError).
func transientNetError(err error) bool {
	var he *HungError
	if errors.As(err, &he) {
		return false
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP-date.
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(h, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, 1<<31)) * time.Second, true
	}
	if at, err := http.ParseTime(h); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// timeoutBody releases an attempt's timeout when the body is closed, and
// reports a read that ran into it as a hung registry, in a *url.Error
// that names the request, as the client names one that got no headers.
type timeoutBody struct {
	io.ReadCloser
	t      *retryTransport
	req    *http.Request
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *timeoutBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.t.timedOut(b.ctx, b.req) {
		return n, &url.Error{Op: b.req.Method, URL: b.req.URL.String(), Err: &HungError{host: b.req.URL.Host, timeout: b.t.timeout}}
	}
	return n, err
}

func (b *timeoutBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// HungError is a registry that did not answer within the per-request
// timeout, now or earlier in the transport's lifetime.
type HungError struct {
	host    string
	timeout time.Duration
	earlier bool
}

func (e *HungError) Error() string {
	if e.earlier {
		return fmt.Sprintf("skipped: %s gave no answer within %s earlier in this run", e.host, e.timeout)
	}
	return fmt.Sprintf("no answer from %s within %s", e.host, e.timeout)
}

// Timeout reports true, like other net.Error timeouts.
func (e *HungError) Timeout() bool { return true }

// Trace collects what happened to the requests of one resolution, for its
// error message. Requests may run concurrently (the ping races https and
// http), so it has a lock. A nil *Trace records nothing. Pass one
// to the requests with WithTrace.
type Trace struct {
	mu       sync.Mutex
	attempts int // of the last request
	retries  int // over all requests
	note     string
}

type traceKey struct{}

// WithTrace returns a copy of ctx whose requests record their attempts
// in tr.
func WithTrace(ctx context.Context, tr *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, tr)
}

func traceFrom(ctx context.Context) *Trace {
	tr, _ := ctx.Value(traceKey{}).(*Trace)
	return tr
}

func (tr *Trace) attempted(n int) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.attempts = n
}

func (tr *Trace) retried() {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.retries++
}

func (tr *Trace) gaveUp(note string) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.note = note
}

// Summary describes the retries, e.g. "after 4 attempts", or "".
func (tr *Trace) Summary() string {
	if tr == nil {
		return ""
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var parts []string
	if tr.attempts > 1 {
		parts = append(parts, fmt.Sprintf("after %d attempts", tr.attempts))
	}
	if tr.note != "" {
		parts = append(parts, tr.note)
	}
	return strings.Join(parts, ", ")
}
