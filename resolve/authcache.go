package resolve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/digestpin/digestpin/resolve/credentials"
	"github.com/digestpin/digestpin/resolve/internal/hosts"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// The auth cache keeps, in the resolution cache (WithAuthCache), what a
// run learns of a registry's auth before its first real request: the
// answer to the ping (which scheme, which token realm), by registry, and
// the bearer tokens the realm gave, by registry and by whose credentials
// asked. A run that finds both sends its HEADs straight away: one round
// trip instead of three (ping, token, HEAD).
//
// Tokens are secrets: they are kept only in the cache (a DirCache writes
// its files 0600 in a 0700 folder; Redis is as trusted as the resolutions
// on it), never in a message, and each only until it expires (expires_in
// from issued_at, less a margin). A token is kept under the registry and
// the identity of the credentials that asked for it: anonymous, or the
// user name and where it came from (the docker config or pull secret
// file), hashed; credentials without a user name, or an identity or
// registry token, keep none. A token of another registry or identity is
// never read. A registry that refuses a cached token (401) has it
// dropped, and go-containerregistry asks the realm for a new one, once.
// When what the cache said leads nowhere (the registry wants auth where
// it wanted none, the realm moved or is refused), the session forgets
// it, pings the registry, and asks again, once.
//
// A cache entry that is not one (corrupt, of another format, registry or
// identity, a realm that fails the checks) is ignored with a warning,
// once, and replaced: the cache never fails a resolution.

// authFormat names the format of the auth cache's entries and keys.
const authFormat = "digestpin-auth-v1"

const (
	// challengeAge bounds how long a kept ping answer stands.
	challengeAge = 24 * time.Hour
	// maxAuthEntry caps what is read of one entry: a ping answer is a
	// few hundred bytes, a set of tokens a few kilobytes each.
	maxAuthEntry = 256 << 10
	// maxTokens caps the tokens kept for one registry and identity.
	maxTokens = 16
	// maxChallenges caps the challenges of a kept ping answer, and
	// maxChallenge each one's length.
	maxChallenges = 8
	maxChallenge  = 4 << 10
	// tokenMargin is how long before it expires a token is no longer
	// used (at most half its lifetime): a run takes a few seconds, and
	// the token server's clock is not ours.
	tokenMargin = 30 * time.Second
	// defaultTokenLife is a token's lifetime when the realm gives no
	// expires_in (the distribution token spec's 60 s); maxTokenLife caps
	// what the realm may claim.
	defaultTokenLife = 60 * time.Second
	maxTokenLife     = 24 * time.Hour
)

// WithAuthCache keeps registries' ping answers and bearer tokens in c
// between runs (see the package documentation of the auth cache above):
// usually the resolution cache, so that the processes that share it
// share these too. nil, the default, keeps them for the Resolver's
// lifetime only.
func WithAuthCache(c Cache) Option {
	return func(o *options) error {
		o.authCache = c
		return nil
	}
}

// authCache is a Resolver's view of the auth entries of its Cache: it
// reads each entry once, and warns once about each entry it ignores. It
// is the transport's PingStore. Its methods are safe for concurrent use.
type authCache struct {
	c     Cache
	warnf func(format string, args ...any)
	logf  func(format string, args ...any)
	now   func() time.Time

	mu     sync.Mutex
	pings  map[string]*pingMemo // registry ID → what the cache said
	warned map[string]bool      // cache keys warned about
}

// pingMemo is what the cache holds of one registry's ping.
type pingMemo struct {
	read      sync.Once // reads the cache, once
	answer    regtransport.PingAnswer
	ok        bool // answer is one to use
	served    bool // answer was given to the transport
	forgotten bool // the session forgot it: the transport pings
}

func newAuthCache(c Cache, warnf, logf func(format string, args ...any)) *authCache {
	return &authCache{c: c, warnf: warnf, logf: logf, now: time.Now, pings: map[string]*pingMemo{}, warned: map[string]bool{}}
}

// registryID names a registry as the auth cache keys it: the scheme of
// its ping and its host as package hosts reads it.
func registryID(scheme, host string) string { return scheme + "://" + hosts.Key(host) }

// authKey is the Cache key of an entry of kind ("auth-ping",
// "auth-token") of the parts: a hex SHA-256, like every key of the cache.
func authKey(kind string, parts ...string) string {
	sum := sha256.Sum256([]byte(authFormat + "\n" + kind + "\n" + strings.Join(parts, "\n")))
	return kind + ":" + hex.EncodeToString(sum[:])
}

// anyEntry is how the auth cache reads an entry: whole, up to
// maxAuthEntry, and checked by the auth cache itself, which warns once
// about an entry it ignores, whichever store holds it.
var anyEntry = EntryRead{Max: maxAuthEntry, Check: func([]byte) error { return nil }}

// ignore warns, once per key, that the entry under key is ignored.
func (a *authCache) ignore(key string, err error) {
	a.mu.Lock()
	seen := a.warned[key]
	a.warned[key] = true
	a.mu.Unlock()
	if !seen {
		a.warnf("auth cache: ignoring entry %s: %v; asking the registry instead", key, err)
	}
}

// pingEntry is a kept ping answer.
type pingEntry struct {
	Format     string    `json:"format"`
	Registry   string    `json:"registry"`
	Status     int       `json:"status"`
	Challenges []string  `json:"challenges,omitempty"`
	Pinged     time.Time `json:"pinged"`
}

// LoadPing implements regtransport.PingStore.
func (a *authCache) LoadPing(ctx context.Context, scheme, host string) (regtransport.PingAnswer, bool) {
	id := registryID(scheme, host)
	a.mu.Lock()
	m := a.pings[id]
	if m == nil {
		m = &pingMemo{}
		a.pings[id] = m
	}
	a.mu.Unlock()
	m.read.Do(func() {
		key := authKey("auth-ping", id)
		if b, ok := a.c.Get(ctx, key, anyEntry); ok {
			ans, err := decodePing(b, id, a.now())
			switch {
			case errors.Is(err, ErrCacheEntryExpired):
			case err != nil:
				a.ignore(key, err)
			default:
				a.mu.Lock()
				if !m.forgotten {
					m.answer, m.ok = ans, true
				}
				a.mu.Unlock()
			}
		}
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	if !m.ok || m.forgotten {
		return regtransport.PingAnswer{}, false
	}
	m.served = true
	return m.answer, true
}

// StorePing implements regtransport.PingStore.
func (a *authCache) StorePing(ctx context.Context, scheme, host string, ans regtransport.PingAnswer) {
	id := registryID(scheme, host)
	b, err := json.Marshal(pingEntry{Format: authFormat, Registry: id, Status: ans.Status, Challenges: ans.Challenges, Pinged: a.now().UTC()})
	if err != nil || len(b) > maxAuthEntry {
		return
	}
	if _, err := decodePing(b, id, a.now()); err != nil {
		return // an answer no run would read back: keep none
	}
	if err := a.c.Put(ctx, authKey("auth-ping", id), b); err != nil {
		a.warnf("auth cache: %v", err)
	}
}

// served reports whether the transport was given the kept ping answer
// of the registry at host, for either scheme, and it was not forgotten.
func (a *authCache) served(host string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, scheme := range []string{"https", "http"} {
		if m := a.pings[registryID(scheme, host)]; m != nil && m.served && !m.forgotten {
			return true
		}
	}
	return false
}

// forget makes the transport ping the registry at host again, for the
// rest of the run: what the cache said of it led nowhere.
func (a *authCache) forget(host string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, scheme := range []string{"https", "http"} {
		id := registryID(scheme, host)
		if a.pings[id] == nil {
			a.pings[id] = &pingMemo{}
		}
		a.pings[id].forgotten = true
	}
}

// decodePing returns the ping answer of entry b, kept for registry id,
// when it is younger than challengeAge at now.
func decodePing(b []byte, id string, now time.Time) (regtransport.PingAnswer, error) {
	var e pingEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return regtransport.PingAnswer{}, fmt.Errorf("not an auth cache entry: %w", err)
	}
	switch {
	case e.Format != authFormat:
		return regtransport.PingAnswer{}, fmt.Errorf("an entry of format %q, want %q", e.Format, authFormat)
	case e.Registry != id:
		return regtransport.PingAnswer{}, fmt.Errorf("the ping answer of %q, not of %q", e.Registry, id)
	case e.Status != http.StatusOK && e.Status != http.StatusUnauthorized:
		return regtransport.PingAnswer{}, fmt.Errorf("a ping answer with status %d, neither 200 nor 401", e.Status)
	case len(e.Challenges) > maxChallenges:
		return regtransport.PingAnswer{}, fmt.Errorf("a ping answer with %d challenges, more than %d", len(e.Challenges), maxChallenges)
	case e.Pinged.IsZero() || now.Before(e.Pinged):
		return regtransport.PingAnswer{}, ErrCacheEntryExpired
	case now.Sub(e.Pinged) >= challengeAge:
		return regtransport.PingAnswer{}, ErrCacheEntryExpired
	}
	for _, c := range e.Challenges {
		if len(c) > maxChallenge || strings.ContainsFunc(c, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return regtransport.PingAnswer{}, errors.New("a ping answer with a challenge too long or not one line")
		}
		if err := checkRealm(c, id); err != nil {
			return regtransport.PingAnswer{}, err
		}
	}
	return regtransport.PingAnswer{Status: e.Status, Challenges: e.Challenges}, nil
}

// checkRealm checks the realm of a Bearer challenge c kept for registry
// id as go-containerregistry checks a live one, on its URL: https, or
// http for a registry pinged over plain HTTP. Where its host resolves
// to is checked when the transport connects, as for a live realm.
func checkRealm(c, id string) error {
	scheme, params, _ := strings.Cut(c, " ")
	if !strings.EqualFold(scheme, "bearer") {
		return nil
	}
	i := strings.Index(strings.ToLower(params), `realm="`)
	if i < 0 {
		return nil // go-containerregistry says so, as of a live one
	}
	realm, _, _ := strings.Cut(params[i+len(`realm="`):], `"`)
	u, err := url.Parse(realm)
	switch {
	case err != nil:
		return fmt.Errorf("a ping answer whose realm is no URL: %w", err)
	case u.Host == "" || (u.Scheme != "https" && (u.Scheme != "http" || !strings.HasPrefix(id, "http://"))):
		return fmt.Errorf("a ping answer whose realm %q is not https, or http for a registry on plain HTTP", realm)
	}
	return nil
}

// tokenSet is the entry of the tokens of one registry and identity.
type tokenSet struct {
	Format   string        `json:"format"`
	Registry string        `json:"registry"`
	Identity string        `json:"identity"` // a hash, never a name
	Tokens   []cachedToken `json:"tokens"`
}

// cachedToken is a bearer token, the repositories it was asked for, the
// realm that gave it, and when it stops being used (its expiry, less the
// margin).
type cachedToken struct {
	Token string    `json:"token"`
	Realm string    `json:"realm"`
	Repos []string  `json:"repos"`
	Until time.Time `json:"until"`
}

// tokenKeeper is a session's part of the auth cache: the tokens of its
// registry and identity, read once and written back whole when they
// change. ok is false for credentials whose tokens are not kept.
type tokenKeeper struct {
	a        *authCache
	id       string // registry ID
	identity string // hash of the identity
	key      string

	mu     sync.Mutex
	tokens []cachedToken
	stale  map[string]bool // tokens a registry refused
}

// tokenIdentity names the credentials of the session as the token cache
// keys them: anonymous, or the user name and where it came from; ok is
// false for those whose tokens are not kept (no user name, an identity
// token or a registry token).
func (s *session) tokenIdentity(ctx context.Context) (string, bool) {
	_, cfg, err := s.credentials(ctx)
	if err != nil || cfg.IdentityToken != "" || cfg.RegistryToken != "" {
		return "", false
	}
	id, ok, err := s.identity(ctx)
	if err != nil || !ok {
		return "", false
	}
	if id != "anonymous" {
		id += "\nfrom " + credentials.Describe(s.kc, s.reg, true)
	}
	return identityHash(id), true
}

// identityHash is the hash of an identity that the token cache keeps.
func identityHash(id string) string {
	sum := sha256.Sum256([]byte(authFormat + "\nidentity\n" + id))
	return hex.EncodeToString(sum[:])
}

// keeper returns the session's token keeper, reading the cache once; nil
// without an auth cache, or for credentials whose tokens are not kept.
// The caller holds s.prep.
func (s *session) keeper(ctx context.Context) *tokenKeeper {
	if s.ac == nil || s.tk != nil || s.tkDone {
		return s.tk
	}
	s.tkDone = true
	ident, ok := s.tokenIdentity(ctx)
	if !ok {
		return nil
	}
	id := registryID(s.reg.Scheme(), s.reg.RegistryStr())
	k := &tokenKeeper{a: s.ac, id: id, identity: ident, key: authKey("auth-token", id, ident), stale: map[string]bool{}}
	if b, ok := s.ac.c.Get(ctx, k.key, anyEntry); ok {
		toks, err := decodeTokens(b, id, ident, s.ac.now())
		if err != nil {
			s.ac.ignore(k.key, err)
		}
		for _, t := range toks {
			s.red.Add(t.Token)
		}
		k.tokens = toks
	}
	s.mu.Lock()
	s.tk = k
	s.mu.Unlock()
	return k
}

// decodeTokens returns the tokens of entry b, kept for registry id and
// identity ident, that may still be used at now.
func decodeTokens(b []byte, id, ident string, now time.Time) ([]cachedToken, error) {
	var e tokenSet
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("not an auth cache entry: %w", err)
	}
	switch {
	case e.Format != authFormat:
		return nil, fmt.Errorf("an entry of format %q, want %q", e.Format, authFormat)
	case e.Registry != id || e.Identity != ident:
		return nil, fmt.Errorf("the tokens of %q for other credentials, not of %q for these", e.Registry, id)
	case len(e.Tokens) > maxTokens:
		return nil, fmt.Errorf("%d tokens, more than %d", len(e.Tokens), maxTokens)
	}
	var out []cachedToken
	for _, t := range e.Tokens {
		if t.Token == "" || strings.ContainsFunc(t.Token, func(r rune) bool { return r <= ' ' || r == 0x7f }) || len(t.Repos) == 0 || t.Realm == "" {
			return nil, errors.New("a token that is empty, not one word, or for no repository or realm")
		}
		// An expired token is kept a while for the repositories it
		// was for (hints), never used.
		if t.Until.Sub(now) <= maxTokenLife && now.Sub(t.Until) < challengeAge {
			out = append(out, t)
		}
	}
	return out, nil
}

// lookup returns a kept token of realm that covers repo, if any.
func (k *tokenKeeper) lookup(realm, repo string) (cachedToken, bool) {
	if k == nil {
		return cachedToken{}, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.a.now()
	for _, t := range k.tokens {
		if t.Realm == realm && !k.stale[t.Token] && now.Before(t.Until) && slices.Contains(t.Repos, repo) {
			return t, true
		}
	}
	return cachedToken{}, false
}

// hints returns the repositories of the kept tokens, expired ones
// too: those an earlier run asked for, which a new token is asked for
// with the repository at hand, as the cold run's ping gave time for the
// others to be announced (session.scopesFor). k.mu is not held.
func (k *tokenKeeper) hints() []string {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, t := range k.tokens {
		out = append(out, t.Repos...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// isStale reports whether a registry refused tok.
func (k *tokenKeeper) isStale(tok string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stale[tok]
}

// refused drops tok, which a registry refused, when it is a kept one.
func (k *tokenKeeper) refused(ctx context.Context, tok string) {
	k.mu.Lock()
	i := slices.IndexFunc(k.tokens, func(t cachedToken) bool { return t.Token == tok })
	if i < 0 {
		k.mu.Unlock()
		return
	}
	k.stale[tok] = true
	k.tokens = slices.Delete(k.tokens, i, i+1)
	k.a.logf("auth cache: the registry refused a kept token of %s; asking for a new one", k.id)
	k.write(ctx)
}

// got keeps the token the realm gave in answer b to req (a GET of the
// realm with the scopes asked for).
func (k *tokenKeeper) got(ctx context.Context, realm string, req *http.Request, b []byte, received time.Time) {
	var ans struct {
		Token       string    `json:"token"`
		AccessToken string    `json:"access_token"`
		ExpiresIn   int64     `json:"expires_in"`
		IssuedAt    time.Time `json:"issued_at"`
	}
	if json.Unmarshal(b, &ans) != nil {
		return
	}
	tok := cmpOr(ans.Token, ans.AccessToken)
	var repos []string
	for _, sc := range req.URL.Query()["scope"] {
		for one := range strings.FieldsSeq(sc) {
			parts := strings.Split(one, ":")
			if len(parts) == 3 && parts[0] == "repository" && slices.Contains(strings.Split(parts[2], ","), transport.PullScope) {
				repos = append(repos, parts[1])
			}
		}
	}
	if tok == "" || len(repos) == 0 {
		return
	}
	life := defaultTokenLife
	if ans.ExpiresIn > 0 {
		life = min(time.Duration(ans.ExpiresIn)*time.Second, maxTokenLife)
	}
	// From issued_at when the realm says so and it is earlier (a token
	// issued before it was asked for), else from when it came.
	from := received
	if !ans.IssuedAt.IsZero() && ans.IssuedAt.Before(received) {
		from = ans.IssuedAt
	}
	until := from.Add(life - min(tokenMargin, life/2))
	if !until.After(received) {
		return
	}
	slices.Sort(repos)
	k.mu.Lock()
	now := k.a.now()
	k.tokens = slices.DeleteFunc(k.tokens, func(t cachedToken) bool { return now.Sub(t.Until) >= challengeAge || t.Token == tok })
	k.tokens = append(k.tokens, cachedToken{Token: tok, Realm: realm, Repos: slices.Compact(repos), Until: until.UTC()})
	if n := len(k.tokens); n > maxTokens {
		k.tokens = slices.Delete(k.tokens, 0, n-maxTokens)
	}
	k.write(ctx)
}

// write stores the tokens; k.mu is held, and released.
func (k *tokenKeeper) write(ctx context.Context) {
	b, err := json.Marshal(tokenSet{Format: authFormat, Registry: k.id, Identity: k.identity, Tokens: k.tokens})
	k.mu.Unlock()
	if err != nil || len(b) > maxAuthEntry {
		return
	}
	if err := k.a.c.Put(context.WithoutCancel(ctx), k.key, b); err != nil {
		// The error names the key and the cause, never the entry.
		k.a.warnf("auth cache: %v", err)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// tokenTap is the layer of a session's HTTP stack under
// go-containerregistry's auth: it keeps each token the realm gives, and
// drops a kept token that the registry refuses (before
// go-containerregistry asks the realm for another).
type tokenTap struct {
	next http.RoundTripper
	s    *session
}

// RoundTrip implements http.RoundTripper.
func (t *tokenTap) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	t.s.mu.Lock()
	k, realm := t.s.tk, t.s.realm
	t.s.mu.Unlock()
	if k == nil {
		return resp, nil
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		if tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer "); ok {
			k.refused(req.Context(), tok)
		}
	case resp.StatusCode == http.StatusOK && req.Method == http.MethodGet && realm != "" && sameEndpoint(req.URL, realm):
		received := k.a.now()
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxAuthEntry+1))
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if rerr == nil && len(b) <= maxAuthEntry {
			k.got(req.Context(), realm, req, b, received)
		}
	}
	return resp, nil
}

// sameEndpoint reports whether u is a request to realm: the same scheme,
// host and path.
func sameEndpoint(u *url.URL, realm string) bool {
	r, err := url.Parse(realm)
	return err == nil && r.Scheme == u.Scheme && strings.EqualFold(r.Host, u.Host) && r.Path == u.Path
}

// keptAuth is the authenticator of a puller built on a kept token: the
// token, until the registry refuses it; then the credentials, with which
// go-containerregistry asks the realm for a new one.
type keptAuth struct {
	creds authn.Authenticator
	tok   string
	k     *tokenKeeper
}

// Authorization implements authn.Authenticator.
func (a *keptAuth) Authorization() (*authn.AuthConfig, error) {
	return a.AuthorizationContext(context.Background())
}

// AuthorizationContext implements authn.ContextAuthenticator.
func (a *keptAuth) AuthorizationContext(ctx context.Context) (*authn.AuthConfig, error) {
	if !a.k.isStale(a.tok) {
		return &authn.AuthConfig{RegistryToken: a.tok}, nil
	}
	return authn.Authorization(ctx, a.creds)
}

// realmOf returns the realm of a Bearer challenge, "" for another.
func realmOf(ch *transport.Challenge) string {
	if ch == nil || !strings.EqualFold(ch.Scheme, "bearer") {
		return ""
	}
	return ch.Parameters["realm"]
}

// warmFailure reports whether err, a failure of a session that used what
// the auth cache kept, may come from it: a refusal (401, 403), or a
// failure of another host than the registry (its token realm), or of no
// request at all (a realm that go-containerregistry refuses); not the
// registry's answer about the image (a 404, a platform it lacks).
func warmFailure(err error, registry string) bool {
	var pe *platformError
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &pe) {
		return false
	}
	var te *transport.Error
	if errors.As(err, &te) {
		if te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden {
			return true
		}
		return te.Request != nil && te.Request.URL != nil && !strings.EqualFold(te.Request.URL.Host, registry)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		u, perr := url.Parse(ue.URL)
		return perr != nil || !strings.EqualFold(u.Host, registry)
	}
	return true
}

// relearn forgets what the auth cache told the session, after err, when
// err may come from it (warmFailure) and the session used it in
// generation gen (s.gen when the caller began): the registry is pinged,
// and tokens asked for, again. It reports whether the caller should try
// once more: also when another caller relearned since gen. A caller
// tries once more at most.
func (s *session) relearn(ctx context.Context, gen int, err error) bool {
	if s.ac == nil || ctx.Err() != nil || !warmFailure(err, s.reg.RegistryStr()) {
		return false
	}
	select {
	case s.prep <- struct{}{}:
		defer func() { <-s.prep }()
	case <-ctx.Done():
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen {
		return true
	}
	if !s.warm {
		return false
	}
	s.ac.logf("auth cache: %s: what the cache kept led to %s; pinging the registry", s.reg.RegistryStr(), oneErr(s, err))
	s.ac.forget(s.reg.RegistryStr())
	if s.tk != nil {
		s.tk.mu.Lock()
		for _, t := range s.tk.tokens {
			s.tk.stale[t.Token] = true
		}
		s.tk.tokens = nil
		s.tk.mu.Unlock()
	}
	s.gen++
	s.warm = false
	s.challenge, s.prepAuth, s.realm = nil, nil, ""
	s.open, s.tokens, s.failed, s.loginOK = nil, nil, nil, false
	s.denied = map[string]bool{}
	return true
}

// oneErr is err as one masked line, for a log.
func oneErr(s *session, err error) string {
	return describe(context.Background(), err, s.red)
}

// generation returns how many times the session relearned.
func (s *session) generation() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}
