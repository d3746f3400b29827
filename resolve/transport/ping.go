package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// maxPingBody caps the body of a ping answer that is kept.
const maxPingBody = 64 << 10

// PingStore keeps registries' answers to the ping (GET /v2/) beyond one
// RoundTripper's lifetime (Options.Pings): the auth scheme, and the token
// realm, that go-containerregistry's handshake reads from it rarely
// change, and a run that knows them sends its first requests straight
// away. The transport asks the store before pinging a registry, and
// gives it each answer it got (200 or 401). A store decides how long an
// answer stands. Its methods must be safe for concurrent use.
type PingStore interface {
	// LoadPing returns the answer kept for the ping of scheme://host.
	LoadPing(ctx context.Context, scheme, host string) (PingAnswer, bool)
	// StorePing keeps the answer that the ping of scheme://host got.
	StorePing(ctx context.Context, scheme, host string, a PingAnswer)
}

// PingAnswer is what a registry's answer to the ping says of its auth:
// its status (200, no auth; 401, auth) and its WWW-Authenticate
// challenges, as sent.
type PingAnswer struct {
	Status     int
	Challenges []string
}

// pingCache answers the registry ping ("GET /v2/") once per scheme and
// host. go-containerregistry pings a registry for every repository it
// opens; the answer (which auth scheme, which token realm) is the same for
// all of them, so one round trip per registry is enough. With a store,
// an answer kept from an earlier run costs none.
type pingCache struct {
	next    http.RoundTripper
	store   PingStore // nil: none
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

func newPingCache(next http.RoundTripper, store PingStore) *pingCache {
	return &pingCache{next: next, store: store, entries: map[string]*pingEntry{}}
}

// RoundTrip implements http.RoundTripper.
func (p *pingCache) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.URL.Path != "/v2/" || req.Header.Get("Authorization") != "" {
		return p.next.RoundTrip(req)
	}
	key := req.URL.Scheme + "://" + req.URL.Host
	p.mu.Lock()
	_, live := p.entries[key]
	p.mu.Unlock()
	if !live && p.store != nil {
		if ok, resp, err := p.stored(req); ok {
			return resp, err
		}
	}
	p.mu.Lock()
	e, ok := p.entries[key]
	if !ok {
		e = &pingEntry{}
		p.entries[key] = e
	}
	p.mu.Unlock()
	e.once.Do(func() {
		e.fetch(p.next, req)
		if p.store != nil && e.err == nil && (e.status == http.StatusOK || e.status == http.StatusUnauthorized) {
			p.store.StorePing(req.Context(), req.URL.Scheme, req.URL.Host, PingAnswer{Status: e.status, Challenges: e.header.Values("WWW-Authenticate")})
		}
	})
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

// stored answers the ping req from the store, when it keeps an answer
// for its scheme and host: that answer, without a request. A registry
// that answered over plain HTTP only (go-containerregistry pings HTTPS
// first, then HTTP, for a registry on loopback or named insecure) fails
// its HTTPS ping at once, so that the handshake goes on to the HTTP one,
// as it did then.
func (p *pingCache) stored(req *http.Request) (bool, *http.Response, error) {
	ctx := req.Context()
	a, ok := p.store.LoadPing(ctx, req.URL.Scheme, req.URL.Host)
	if !ok {
		if req.URL.Scheme == "https" {
			if _, ok := p.store.LoadPing(ctx, "http", req.URL.Host); ok {
				return true, nil, fmt.Errorf("GET https://%s/v2/: not asked: the registry answered its last ping over plain HTTP only", req.URL.Host)
			}
		}
		return false, nil, nil
	}
	h := http.Header{"Content-Type": {"application/json"}}
	for _, c := range a.Challenges {
		h.Add("WWW-Authenticate", c)
	}
	body := []byte("{}")
	return true, &http.Response{
		Status:        http.StatusText(a.Status),
		StatusCode:    a.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
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
