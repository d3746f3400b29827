package resolve

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/internal/hosts"
	"github.com/digestpin/digestpin/resolve/internal/smallfile"
)

// newBaseTransport builds the HTTP layer under the registry protocol, from
// the bottom up: TLS verification (with the extra CA bundles, skipped only
// for insecure hosts), a refusal of plain HTTP except to loopback and
// insecure hosts, retries with per-request timeouts, and the shared ping.
func newBaseTransport(o *options, red *redactor) (http.RoundTripper, error) {
	t := o.transport
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
	if len(o.caFiles) > 0 {
		ht, ok := t.(*http.Transport)
		if !ok {
			return nil, optionError("WithCAFiles", errors.New("needs the default transport or an *http.Transport from WithTransport"))
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		for _, f := range o.caFiles {
			pem, err := smallfile.Read(f, maxCAFile, true)
			if err != nil {
				return nil, optionError("WithCAFiles", fmt.Errorf("reading %s: %w", f, err))
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, optionError("WithCAFiles", fmt.Errorf("reading %s: no PEM certificate in it", f))
			}
		}
		ht = ht.Clone()
		if ht.TLSClientConfig == nil {
			ht.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		ht.TLSClientConfig.RootCAs = pool
		t = ht
	}
	if len(o.insecure) > 0 {
		t = newInsecureTransport(t, o.insecure)
	}
	t = &dialTarget{next: t}
	t = &plainHTTPGuard{next: t, insecure: o.insecure}
	t = &bodyCap{next: t, max: maxResponseBody}
	rt := &retryTransport{next: &redactingTransport{next: t, red: red}, policy: o.retry, timeout: o.requestTimeout, logf: o.logf, red: red}
	return &redirectLimit{next: newPingCache(rt), max: maxRedirects}, nil
}

// maxRedirects is how many redirects one registry request may follow, as
// Go's http.Client does by default.
const maxRedirects = 10

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
	return nil, &redirectError{host: first.URL.Host, max: l.max}
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

// redirectError is a request whose chain reached max redirects.
type redirectError struct {
	host string
	max  int
}

func (e *redirectError) Error() string {
	return fmt.Sprintf("too many redirects (%d) from %s", e.max, e.host)
}

// maxCAFile caps a CA bundle file. The system's whole bundle is about
// 200 KiB.
const maxCAFile = 16 << 20

// maxResponseBody caps what a Resolver reads of one registry answer. The
// largest answers it reads are manifests and indexes (and, with a
// platform, an image config), a few kilobytes each; registries commonly
// refuse to store manifests over 4 MiB. go-containerregistry's own cap is
// 100 MiB, times the concurrency: a hostile registry could make a run
// hold gigabytes.
const maxResponseBody = 8 << 20

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
		return 0, fmt.Errorf("%s %s%s: the answer goes on past %d bytes, more than a registry answer may have", b.req.Method, b.req.URL.Host, b.req.URL.Path, maxResponseBody)
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
