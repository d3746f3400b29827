package testregistry

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// BasicAuth returns a Handler that makes the registry ask for HTTP basic
// auth (user, password): a request without them, or with others, gets
// 401 with a Basic challenge; a request with them goes on to the registry.
func BasicAuth(user, password string) Handler {
	return func(w http.ResponseWriter, r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		if ok && u == user && p == password {
			return false
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="testregistry"`)
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		return true
	}
}

// TokenServer is a small bearer token server, after the distribution token
// spec: GET /token?service=…&scope=… returns a token that grants the
// scopes asked for. Its Guard makes a registry accept only its tokens.
// Its methods are safe for concurrent use.
type TokenServer struct {
	// Server is the running server; its realm is Realm().
	Server *httptest.Server
	// Service is the service name in challenges and token requests.
	Service string

	user, password string // "" accepts anonymous requests
	realmHost      string // the host the realm names

	latency   atomic.Int64 // nanoseconds added to every token request
	expiresIn atomic.Int64 // seconds the tokens say they last; 0: 300
	issuedAgo atomic.Int64 // seconds before now that issued_at says; 0: no issued_at

	mu        sync.Mutex
	tokens    map[string]map[string]bool // token → scopes granted
	exchanges [][]string                 // scopes of each token request
	refused   int
	denied    map[string]int // repository → status that refuses a request for it
}

// Deny makes the token server refuse, with status (401 or 403), every
// token request that asks for pull on repo, however many other
// repositories it asks for too, as some token servers do for a scope the
// credentials do not allow. A request without a scope is granted.
func (ts *TokenServer) Deny(repo string, status int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.denied == nil {
		ts.denied = map[string]int{}
	}
	ts.denied["repository:"+repo+":pull"] = status
}

// NewTokenServer starts a token server that is closed when the test ends.
// With a non-empty user, token requests need basic auth with user and
// password; without, anyone gets a token.
func NewTokenServer(t TB, user, password string) *TokenServer {
	t.Helper()
	ts := &TokenServer{Service: "testregistry", user: user, password: password, tokens: map[string]map[string]bool{}, realmHost: "localhost"}
	ts.Server = httptest.NewServer(http.HandlerFunc(ts.serveToken))
	t.Cleanup(ts.Server.Close)
	return ts
}

// NewTokenServerOn is NewTokenServer listening on addr (a loopback
// "ip:0", e.g. "127.0.0.2:0"), whose realm names realmHost: a name the
// resolver under test is told resolves to addr's IP.
func NewTokenServerOn(t TB, addr, realmHost, user, password string) *TokenServer {
	t.Helper()
	ts := &TokenServer{Service: "testregistry", user: user, password: password, tokens: map[string]map[string]bool{}, realmHost: realmHost}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	ts.Server = httptest.NewUnstartedServer(http.HandlerFunc(ts.serveToken))
	_ = ts.Server.Listener.Close()
	ts.Server.Listener = l
	ts.Server.Start()
	t.Cleanup(ts.Server.Close)
	return ts
}

// Realm is the token endpoint. It names the host "localhost" (not the
// loopback address) because go-containerregistry refuses realms on
// private addresses other than the registry's own, or the realm host of
// NewTokenServerOn.
func (ts *TokenServer) Realm() string {
	return "http://" + ts.realmHost + ":" + ts.Server.URL[strings.LastIndex(ts.Server.URL, ":")+1:] + "/token"
}

// SetLatency makes every token request wait d before it is answered, as
// Registry.SetLatency does for the registry's.
func (ts *TokenServer) SetLatency(d time.Duration) { ts.latency.Store(int64(d)) }

// SetExpiry makes the tokens given from now on say that they last
// expiresIn (expires_in, in whole seconds; 300 until set) and, with
// issuedAgo > 0, that they were issued that long ago (issued_at), as a
// token server that hands out a token it issued earlier says. The
// registry accepts a token as long as Revoke has not forgotten it,
// whatever it said.
func (ts *TokenServer) SetExpiry(expiresIn, issuedAgo time.Duration) {
	ts.expiresIn.Store(int64(expiresIn / time.Second))
	ts.issuedAgo.Store(int64(issuedAgo / time.Second))
}

// Revoke forgets every token given so far: the registry answers a request
// that carries one with 401 and a Bearer challenge, as it answers an
// expired token.
func (ts *TokenServer) Revoke() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.tokens = map[string]map[string]bool{}
}

func (ts *TokenServer) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/token" {
		http.NotFound(w, r)
		return
	}
	if d := time.Duration(ts.latency.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	scopes := r.URL.Query()["scope"]
	ts.mu.Lock()
	ts.exchanges = append(ts.exchanges, scopes)
	ts.mu.Unlock()
	if ts.user != "" {
		u, p, ok := r.BasicAuth()
		if !ok || u != ts.user || p != ts.password {
			ts.mu.Lock()
			ts.refused++
			ts.mu.Unlock()
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "bad credentials")
			return
		}
	}
	ts.mu.Lock()
	status := 0
	for _, sc := range scopes {
		for _, one := range strings.Fields(sc) {
			status = max(status, ts.denied[one])
		}
	}
	if status != 0 {
		ts.refused++
	}
	ts.mu.Unlock()
	if status != 0 {
		writeError(w, status, "DENIED", "access to the requested resource is not authorized")
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := "tok-" + hex.EncodeToString(b)
	granted := map[string]bool{}
	for _, s := range scopes {
		for _, one := range strings.Fields(s) {
			// repository:NAME:push,pull grants each action.
			i := strings.LastIndex(one, ":")
			for _, action := range strings.Split(one[i+1:], ",") {
				granted[one[:i+1]+action] = true
			}
		}
	}
	ts.mu.Lock()
	ts.tokens[tok] = granted
	ts.mu.Unlock()
	answer := map[string]any{"token": tok, "expires_in": 300}
	if e := ts.expiresIn.Load(); e > 0 {
		answer["expires_in"] = e
	}
	if ago := ts.issuedAgo.Load(); ago > 0 {
		answer["issued_at"] = time.Now().Add(-time.Duration(ago) * time.Second).UTC().Format(time.RFC3339)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

// Exchanges returns how many token requests were made.
func (ts *TokenServer) Exchanges() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.exchanges)
}

// Scopes returns the scopes of each token request, sorted within each.
func (ts *TokenServer) Scopes() [][]string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := make([][]string, len(ts.exchanges))
	for i, s := range ts.exchanges {
		out[i] = append([]string(nil), s...)
		sort.Strings(out[i])
	}
	return out
}

// Guard returns a Handler that makes the registry accept only tokens of
// ts that grant pull on the repository asked for (GET and HEAD), or
// push (the other methods: an upload, a manifest PUT). Other requests
// get 401 with a Bearer challenge naming the scope they need; the ping
// gets one without a scope.
func (ts *TokenServer) Guard() Handler {
	return func(w http.ResponseWriter, r *http.Request) bool {
		scope := ""
		if repo, ok := repository(r.URL.Path); ok {
			scope = "repository:" + repo + ":pull"
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				scope = "repository:" + repo + ":push,pull"
			}
		}
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			ts.mu.Lock()
			granted, known := ts.tokens[tok]
			ts.mu.Unlock()
			if known && (scope == "" || grants(granted, scope)) {
				return false
			}
		}
		ch := fmt.Sprintf(`Bearer realm=%q,service=%q`, ts.Realm(), ts.Service)
		if scope != "" {
			ch += fmt.Sprintf(`,scope=%q`, scope)
		}
		w.Header().Set("WWW-Authenticate", ch)
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		return true
	}
}

// grants reports whether granted holds every action of scope
// (repository:NAME:push,pull).
func grants(granted map[string]bool, scope string) bool {
	i := strings.LastIndex(scope, ":")
	for _, action := range strings.Split(scope[i+1:], ",") {
		if !granted[scope[:i+1]+action] {
			return false
		}
	}
	return true
}

// repository returns the repository of a /v2/<name>/(manifests|blobs|tags)/… path.
func repository(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return "", false
	}
	for _, kind := range []string{"/manifests/", "/blobs/", "/tags/"} {
		if i := strings.LastIndex(rest, kind); i > 0 {
			return rest[:i], true
		}
	}
	return "", false
}

// writeError writes a registry error answer.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}
