package transport

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// maxPingBody caps the body of a ping answer that is kept.
const maxPingBody = 64 << 10

// pingCache answers the registry ping ("GET /v2/") once per scheme and
// host. go-containerregistry pings a registry for every repository it
// opens; the answer (which auth scheme, which token realm) is the same for
// all of them, so one round trip per registry is enough.
type pingCache struct {
	next    http.RoundTripper
	mu      sync.Mutex
	entries map[string]*pingEntry
}

type pingEntry struct {
	once   sync.Once
	status int
	proto  string
	header http.Header
	body   []byte
	err    error
}

func newPingCache(next http.RoundTripper) *pingCache {
	return &pingCache{next: next, entries: map[string]*pingEntry{}}
}

// RoundTrip implements http.RoundTripper.
func (p *pingCache) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Path != "/v2/" || req.Header.Get("Authorization") != "" {
		return p.next.RoundTrip(req)
	}
	key := req.URL.Scheme + "://" + req.URL.Host
	p.mu.Lock()
	e, ok := p.entries[key]
	if !ok {
		e = &pingEntry{}
		p.entries[key] = e
	}
	p.mu.Unlock()
	e.once.Do(func() { e.fetch(p.next, req) })
	if e.err != nil || (e.status != http.StatusOK && e.status != http.StatusUnauthorized) {
		// Keep only a registry's real answer, not a failure: the next
		// caller asks again.
		p.mu.Lock()
		if p.entries[key] == e {
			delete(p.entries, key)
		}
		p.mu.Unlock()
	}
	if e.err != nil {
		return nil, e.err
	}
	return &http.Response{
		Status:        http.StatusText(e.status),
		StatusCode:    e.status,
		Proto:         e.proto,
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        e.header.Clone(),
		Body:          io.NopCloser(bytes.NewReader(e.body)),
		ContentLength: int64(len(e.body)),
		Request:       req,
	}, nil
}

func (e *pingEntry) fetch(next http.RoundTripper, req *http.Request) {
	resp, err := next.RoundTrip(req)
	if err != nil {
		e.err = err
		return
	}
	defer resp.Body.Close()
	e.body, e.err = io.ReadAll(io.LimitReader(resp.Body, maxPingBody))
	e.status, e.proto, e.header = resp.StatusCode, resp.Proto, resp.Header
}
