package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/digestpin/digestpin/internal/redact"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/internal/hosts"
	"github.com/digestpin/digestpin/resolve/internal/smallfile"
)

// Options configure the HTTP layer that New builds. The zero value is
// the default of every field.
type Options struct {
	// Base is the transport under the layer; nil is a clone of
	// http.DefaultTransport. An *http.Transport is cloned, not changed,
	// and its dialling wrapped so that hosts other than the registry are
	// checked on the addresses connected to; another RoundTripper gets
	// the same check before each request.
	Base http.RoundTripper
	// CAFiles are PEM files whose certificates are added to the system's
	// roots. They need Base to be nil or an *http.Transport.
	CAFiles []string
	// Insecure are the registry hosts (host or host:port) that may be
	// reached over plain HTTP, and over HTTPS without verification.
	Insecure []string
	// Retry says how often and how patiently a request is retried.
	Retry RetryPolicy
	// RequestTimeout bounds each attempt of a request, reading its answer
	// included; 0 is DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Logf receives each retry; nil discards them.
	Logf func(format string, args ...any)
	// Redactor is shown every Authorization header sent, and masks the
	// causes in the retries' messages; nil is one of its own.
	Redactor *redact.Redactor
	// Lookup looks up a host's addresses and Classify classes them, for
	// the address check (see WithRegistry); nil is LookupHost and
	// ClassOf. Tests play a registry on the internet with them.
	Lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
	Classify func(netip.Addr) AddrClass
	// Pings keeps the registries' ping answers between runs; nil keeps
	// them for the RoundTripper's lifetime only.
	Pings PingStore
}

// DefaultRequestTimeout bounds one attempt of a request unless
// Options.RequestTimeout says otherwise.
const DefaultRequestTimeout = 30 * time.Second

// New builds the HTTP layer under the registry protocol, from the bottom
// up: the address check, TLS verification (with the extra CA bundles,
// skipped only for insecure hosts), a refusal of plain HTTP except to
// loopback and insecure hosts, a cap on answers, retries with
// per-request timeouts, the shared ping, and a bound on redirects. An
// error is one of CAFiles'. The RoundTripper is safe for concurrent use;
// it remembers, for its lifetime, the ping of each registry (and, with
// Options.Pings, asks the store first and keeps the answers there) and
// the hosts that ran into the request timeout.
func New(o Options) (http.RoundTripper, error) {
	red := o.Redactor
	if red == nil {
		red = redact.New()
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	insecure := map[string]bool{}
	for _, h := range o.Insecure {
		insecure[hosts.Key(h)] = true
	}
	t := o.Base
	if t == nil {
		t = http.DefaultTransport.(*http.Transport).Clone()
	}
	// Connections to hosts other than the registry go only where the
	// registry is: see addrGuard.
	g := newAddrGuard(o)
	if ht, ok := t.(*http.Transport); ok {
		ht = ht.Clone()
		g.guardDial(ht)
		t = ht
	} else {
		t = &addrGuardTransport{next: t, g: g}
	}
	if len(o.CAFiles) > 0 {
		ht, ok := t.(*http.Transport)
		if !ok {
			return nil, errors.New("needs the default transport or an *http.Transport from WithTransport")
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		for _, f := range o.CAFiles {
			pem, err := smallfile.Read(f, maxCAFile, true)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", f, err)
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("reading %s: no PEM certificate in it", f)
			}
		}
		ht = ht.Clone()
		if ht.TLSClientConfig == nil {
			ht.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		ht.TLSClientConfig.RootCAs = pool
		t = ht
	}
	if len(insecure) > 0 {
		t = newInsecureTransport(t, insecure)
	}
	t = &dialTarget{next: t}
	t = &plainHTTPGuard{next: t, insecure: insecure}
	t = &bodyCap{next: t, max: MaxResponseBody}
	rt := &retryTransport{next: &redactingTransport{next: t, red: red}, policy: o.Retry.withDefaults(), timeout: o.RequestTimeout, logf: o.Logf, red: red}
	return &redirectLimit{next: newPingCache(rt, o.Pings), max: MaxRedirects}, nil
}

// MaxRedirects is how many redirects one registry request may follow, as
// Go's http.Client does by default.
const MaxRedirects = 10

// redirectLimit fails a request whose answer is the max-th redirect of
// its chain, as Go's http.Client stops by default. go-containerregistry's
// registry clients replace the client's redirect policy with an SSRF check
// that does not count hops, so a registry that redirects to itself would
// be asked without end. The transport sees each hop: http.Client sets
// req.Response to the redirect that led to it. It fails the answer rather
// than the next request so that it comes before http.Client's own limit
// (the ping's client keeps it), with the same message everywhere.
type redirectLimit struct {
	next http.RoundTripper
	max  int
}

// RoundTrip implements http.RoundTripper.
func (l *redirectLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	hops := 0
	first := req
	for r := req; r.Response != nil && r.Response.Request != nil; r = r.Response.Request {
		hops++
		first = r.Response.Request
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil || hops+1 < l.max || !isRedirect(resp) {
		return resp, err
	}
	_ = resp.Body.Close()
	return nil, &RedirectError{host: first.URL.Host, max: l.max}
}

// isRedirect reports whether http.Client would follow resp.
func isRedirect(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return resp.Header.Get("Location") != ""
	}
	return false
}

// RedirectError is a request whose chain reached max redirects.
type RedirectError struct {
	host string
	max  int
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("too many redirects (%d) from %s", e.max, e.host)
}

// maxCAFile caps a CA bundle file. The system's whole bundle is about
// 200 KiB.
const maxCAFile = 16 << 20

// MaxResponseBody caps what a Resolver reads of one registry answer. The
// largest answers it reads are manifests and indexes (and, with a
// platform, an image config), a few kilobytes each; registries commonly
// refuse to store manifests over 4 MiB. go-containerregistry's own cap is
// 100 MiB, times the concurrency: a hostile registry could make a run
// hold gigabytes.
const MaxResponseBody = 8 << 20

// bodyCap fails the reading of a response body that goes on past max
// bytes, however the reader reads it.
type bodyCap struct {
	next http.RoundTripper
	max  int64
}

// RoundTrip implements http.RoundTripper.
func (c *bodyCap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	// A HEAD answer's length is that of the GET answer, which is not read.
	if req.Method != http.MethodHead && resp.ContentLength > c.max {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s %s%s: the answer is %d bytes, more than the %d a registry answer may have", req.Method, req.URL.Host, req.URL.Path, resp.ContentLength, c.max)
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: c.max, req: req}
	return resp, nil
}

// cappedBody reads at most left more bytes: reading one more fails.
type cappedBody struct {
	io.ReadCloser
	left int64
	req  *http.Request
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return 0, fmt.Errorf("%s %s%s: the answer goes on past %d bytes, more than a registry answer may have", b.req.Method, b.req.URL.Host, b.req.URL.Path, MaxResponseBody)
	}
	return n, err
}

// plainHTTPGuard refuses plain HTTP to hosts that are neither loopback nor
// named insecure. go-containerregistry also falls back to HTTP for private
// (RFC 1918) addresses and .local names; credentials must not travel there
// in clear text unless the user asked for it.
type plainHTTPGuard struct {
	next     http.RoundTripper
	insecure map[string]bool
}

// RoundTrip implements http.RoundTripper.
func (g *plainHTTPGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !g.insecure[hosts.Key(req.URL.Host)] && !isLoopback(req.URL.Hostname()) {
		return nil, fmt.Errorf("plain HTTP to %s refused: it is not loopback; name it with %s to allow it", req.URL.Host, resolution.OptionName(req.Context(), "WithInsecureRegistries"))
	}
	return g.next.RoundTrip(req)
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// newInsecureTransport skips certificate verification for the insecure
// hosts only.
func newInsecureTransport(base http.RoundTripper, insecure map[string]bool) http.RoundTripper {
	ht, ok := base.(*http.Transport)
	if !ok {
		return base
	}
	unverified := ht.Clone()
	if unverified.TLSClientConfig == nil {
		unverified.TLSClientConfig = &tls.Config{}
	}
	unverified.TLSClientConfig.InsecureSkipVerify = true //nolint:gosec // only for hosts named with --insecure-registry
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if insecure[hosts.Key(req.URL.Host)] {
			return unverified.RoundTrip(req)
		}
		return base.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// redactingTransport shows the redactor every Authorization header sent.
type redactingTransport struct {
	next http.RoundTripper
	red  *redact.Redactor
}

// RoundTrip implements http.RoundTripper.
func (t *redactingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	addHeader(t.red, req.Header.Get("Authorization"))
	return t.next.RoundTrip(req)
}

// addHeader remembers the credential of an Authorization header.
func addHeader(r *redact.Redactor, h string) {
	if h == "" {
		return
	}
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok {
		r.Add(h)
		return
	}
	r.Add(cred)
	if strings.EqualFold(scheme, "basic") {
		if b, err := base64.StdEncoding.DecodeString(cred); err == nil {
			if _, pass, ok := strings.Cut(string(b), ":"); ok {
				r.Add(pass)
			}
		}
	}
}
