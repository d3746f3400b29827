package resolve

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/digestpin/digestpin/internal/oneline"
	"github.com/digestpin/digestpin/internal/redact"
)

// maxScopes caps the repositories asked for in one token request. Both
// the request URL (about 50 bytes a scope) and the token, which travels in
// every request header and often lists its grants (about 100 bytes each),
// grow with it; 32 keeps both well within the 8 KiB that proxies accept.
const maxScopes = 32

// session is everything a Resolver shares for one registry: its
// credentials, the ping, and the bearer tokens.
//
// go-containerregistry asks the token server for a token per repository.
// A session asks for one token for all the repositories of the registry
// that are being resolved at the time: every Resolve call announces its
// repository (want) before it waits for a slot, so the first token
// request of a run carries all of them, and the registry costs one token
// exchange. A repository announced later gets a token of its own (with
// every other repository still waiting). Token servers grant the subset
// of the scopes the credentials allow (the distribution token spec), so
// asking for more never loses access. A server that refuses the whole
// request instead is asked again for the one repository; when it refuses
// that too, a token without a scope (what docker login asks for) tells
// whether it refuses the credentials, and every repository fails, or only
// this repository, which alone fails and is left out of later requests.
//
// A registry that fails as a whole (its ping, its credentials, its token
// server) is remembered for the session: later resolutions fail at once
// with that first cause, rather than ask again and wait.
type session struct {
	reg   name.Registry
	base  http.RoundTripper // the shared HTTP layer, with the ping cache
	kc    authn.Keychain
	red   *redact.Redactor
	popts []remote.Option

	creds chan struct{}       // held while looking up credentials
	auth  authn.Authenticator // nil until looked up; under creds
	cfg   *authn.AuthConfig   // nil until looked up; under creds

	prep      chan struct{}        // held while preparing
	challenge *transport.Challenge // nil until prepared
	prepAuth  authn.Authenticator  // with challenge
	prepGen   int                  // failed preparations so far; under mu
	prepErr   error                // the last one's error; under mu

	login chan struct{} // held while checking the credentials

	// The auth cache (WithAuthCache), nil without one; tap is base with
	// the layer that keeps tokens (base without one).
	ac  *authCache
	tap http.RoundTripper
	tk  *tokenKeeper // the kept tokens; under prep, and mu once set
	// tkDone says keeper ran; under prep.
	tkDone bool

	mu       sync.Mutex
	pending  map[string]int // repository → resolutions that may need it
	open     *remote.Puller // when the registry needs no token: serves all
	tokens   []*token
	inflight []*exchange
	denied   map[string]bool // repositories the token server refused alone
	loginOK  bool            // the token server granted a token without a scope
	failed   error           // the registry's failure as a whole, for good
	realm    string          // the token realm of the challenge, "" for none
	warm     bool            // a kept ping answer or token is in use
	gen      int             // times relearn forgot what the auth cache said
}

// token is a bearer token and the repositories it was asked for.
type token struct {
	repos  map[string]bool
	puller *remote.Puller
}

// exchange is a token request in flight; callers whose repository it
// covers wait for it instead of asking again.
type exchange struct {
	repos  map[string]bool // nil: every repository (not a bearer registry)
	done   chan struct{}
	err    error
	failed map[string]bool // repositories err applies to; nil: all
}

func (e *exchange) covers(repo string) bool { return e.repos == nil || e.repos[repo] }

func (e *exchange) failedFor(repo string) bool {
	return e.err != nil && (e.failed == nil || e.failed[repo])
}

// want announces that repo may be asked for soon.
func (s *session) want(repo string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[repo]++
}

// done withdraws an announcement of want.
func (s *session) done(repo string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[repo]--; s.pending[repo] <= 0 {
		delete(s.pending, repo)
	}
}

// puller returns a puller authorised for repo, exchanging a token first
// if none covers it.
func (s *session) puller(ctx context.Context, repo string) (*remote.Puller, error) {
	for {
		s.mu.Lock()
		if err := s.failed; err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if p := s.lookup(repo); p != nil {
			s.mu.Unlock()
			return p, nil
		}
		ex := s.inflightFor(repo)
		if ex == nil && s.open == nil && len(s.tokens) == 0 && len(s.inflight) > 0 {
			// Until a first token proves the credentials, one exchange
			// at a time: wrong credentials then cost one refusal, not
			// one per resolution in flight.
			ex = s.inflight[0]
		}
		if ex != nil {
			s.mu.Unlock()
			select {
			case <-ex.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if ex.failedFor(repo) {
				return nil, ex.err
			}
			continue
		}
		s.mu.Unlock()

		// Credentials and the ping first, once for all: while the ping
		// travels, the other resolutions announce their repositories, so
		// the token request below can carry them all.
		auth, ch, err := s.prepare(ctx)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.failed != nil || s.lookup(repo) != nil || s.inflightFor(repo) != nil ||
			(s.open == nil && len(s.tokens) == 0 && len(s.inflight) > 0) {
			s.mu.Unlock()
			continue
		}
		ex = &exchange{repos: s.scopesFor(repo), done: make(chan struct{})}
		var kept *cachedToken
		if !strings.EqualFold(ch.Scheme, "bearer") {
			ex.repos = nil // no token: every repository is served alike
		} else if t, ok := s.tk.lookup(s.realm, repo); ok {
			// A token kept from an earlier run: no request.
			kept, ex.repos, s.warm = &t, map[string]bool{}, true
			for _, r := range t.Repos {
				ex.repos[r] = true
			}
		}
		s.inflight = append(s.inflight, ex)
		s.mu.Unlock()

		p, granted, failed, err := s.exchange(ctx, auth, ch, repo, ex.repos, kept)
		s.mu.Lock()
		s.inflight = slices.DeleteFunc(s.inflight, func(e *exchange) bool { return e == ex })
		switch {
		case err != nil:
			ex.err, ex.failed = err, failed
			if failed == nil {
				s.failed = err
			}
			if failed[repo] && refused(err) {
				s.denied[repo] = true
			}
		case granted == nil:
			s.open = p
		default:
			s.tokens = append(s.tokens, &token{repos: granted, puller: p})
		}
		s.mu.Unlock()
		close(ex.done)
		if err != nil {
			return nil, err
		}
	}
}

// prepare resolves the registry's credentials and pings it, once for the
// session. Concurrent callers wait for one; when it fails, those that were
// waiting get its error, and the session remembers it (puller fails later
// callers with it at once): a registry that fails after its retries is
// not asked again in the run. A caller whose own deadline ran out
// remembers nothing, and the next caller tries again.
func (s *session) prepare(ctx context.Context) (authn.Authenticator, *transport.Challenge, error) {
	s.mu.Lock()
	gen := s.prepGen
	s.mu.Unlock()
	select {
	case s.prep <- struct{}{}:
		defer func() { <-s.prep }()
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if s.challenge != nil {
		return s.prepAuth, s.challenge, nil
	}
	s.mu.Lock()
	if s.prepGen != gen {
		err := s.prepErr
		s.mu.Unlock()
		return nil, nil, err
	}
	s.mu.Unlock()
	auth, ch, err := s.connect(ctx)
	if err != nil {
		if ctx.Err() == nil { // the registry's failure, not this caller's deadline
			s.mu.Lock()
			s.prepGen++
			s.prepErr = err
			s.failed = err
			s.mu.Unlock()
		}
		return nil, nil, err
	}
	s.prepAuth, s.challenge = auth, ch
	return auth, ch, nil
}

// connect looks up the registry's credentials and pings it (or the auth
// cache answers for it), and reads the tokens the auth cache keeps.
func (s *session) connect(ctx context.Context) (authn.Authenticator, *transport.Challenge, error) {
	auth, _, err := s.credentials(ctx)
	if err != nil {
		return nil, nil, err
	}
	ch, err := transport.Ping(ctx, s.reg, s.base)
	if err != nil {
		return nil, nil, err
	}
	if s.ac != nil {
		warm := s.ac.served(s.reg.RegistryStr())
		s.keeper(ctx)
		s.mu.Lock()
		s.realm, s.warm = realmOf(ch), warm
		s.mu.Unlock()
	}
	return auth, ch, nil
}

// lookup finds a puller that covers repo. s.mu is held.
func (s *session) lookup(repo string) *remote.Puller {
	if s.open != nil {
		return s.open
	}
	for _, t := range s.tokens {
		if t.repos[repo] {
			return t.puller
		}
	}
	return nil
}

// inflightFor finds a token request that covers repo. s.mu is held.
func (s *session) inflightFor(repo string) *exchange {
	for _, e := range s.inflight {
		if e.covers(repo) {
			return e
		}
	}
	return nil
}

// scopesFor picks the repositories of a new token request: repo, then the
// other announced ones that no token or request covers yet, in order, up
// to maxScopes. s.mu is held.
func (s *session) scopesFor(repo string) map[string]bool {
	repos := map[string]bool{repo: true}
	others := make([]string, 0, len(s.pending))
	for r := range s.pending {
		if r != repo && !s.denied[r] && s.lookup(r) == nil && s.inflightFor(r) == nil {
			others = append(others, r)
		}
	}
	slices.Sort(others)
	// Then those of the tokens the auth cache kept: an earlier run's,
	// likely this one's too.
	for _, r := range s.tk.hints() {
		if r != repo && s.pending[r] == 0 && !s.denied[r] && s.lookup(r) == nil && s.inflightFor(r) == nil {
			others = append(others, r)
		}
	}
	for _, r := range others {
		if len(repos) >= maxScopes {
			break
		}
		repos[r] = true
	}
	return repos
}

// exchange builds the registry's transport: with basic auth or none
// (repos is nil) it serves every repository; with bearer auth it holds a
// token for repos: kept, a token the auth cache kept for them, or one it
// asks the realm for. It returns the puller and the repositories it
// serves (nil: all of them); on error, the repositories the error
// applies to (nil: all of them, the registry as a whole).
func (s *session) exchange(ctx context.Context, auth authn.Authenticator, ch *transport.Challenge, repo string, repos map[string]bool, kept *cachedToken) (*remote.Puller, map[string]bool, map[string]bool, error) {
	if kept != nil {
		// go-containerregistry's handshake with the kept token as the
		// credentials: the ping is answered from the cache, and no
		// token asked for; once the registry refuses the token (the tap
		// drops it), the credentials ask the realm for another.
		t, err := transport.NewWithContext(ctx, s.reg, &keptAuth{creds: auth, tok: kept.Token, k: s.tk}, s.tap, scopeList(repo, repos))
		if err != nil {
			return nil, nil, map[string]bool{repo: true}, err
		}
		p, err := s.newPuller(t)
		return p, repos, nil, err
	}
	if repos == nil {
		t, err := transport.NewWithContext(ctx, s.reg, auth, s.tap, nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, map[string]bool{repo: true}, err
			}
			return nil, nil, nil, err
		}
		p, err := s.newPuller(t)
		return p, nil, nil, err
	}
	scopes := scopeList(repo, repos)
	t, err := transport.NewWithContext(ctx, s.reg, auth, s.tap, scopes)
	if err != nil && len(scopes) > 1 && refused(err) {
		// A token server that refuses the whole request for one scope it
		// will not grant: ask for this repository alone; the others ask
		// for themselves.
		repos = map[string]bool{repo: true}
		t, err = transport.NewWithContext(ctx, s.reg, auth, s.tap, scopes[:1])
		if err != nil && !refused(err) {
			return nil, nil, repos, err
		}
	}
	if err != nil && refused(err) {
		// Refused for this repository alone. The same answer means wrong
		// credentials (every repository fails) or a repository they do
		// not reach (only this one fails): a token without a scope tells
		// which. Whatever the order in which repositories get here, each
		// one's result is the same.
		if lerr := s.checkLogin(ctx, auth, ch); lerr != nil && refused(lerr) {
			return nil, nil, nil, err
		}
		return nil, nil, map[string]bool{repo: true}, err
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, map[string]bool{repo: true}, err // this caller's deadline: the others ask again
		}
		return nil, nil, nil, err
	}
	p, err := s.newPuller(t)
	return p, repos, nil, err
}

// checkLogin asks the token server for a token without a repository
// scope, once for the session, as docker login does to check credentials.
// It returns the refusal, if any; a failure that is not a refusal (or the
// caller's deadline) is returned but not remembered.
func (s *session) checkLogin(ctx context.Context, auth authn.Authenticator, ch *transport.Challenge) error {
	select {
	case s.login <- struct{}{}:
		defer func() { <-s.login }()
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	ok, failed := s.loginOK, s.failed
	s.mu.Unlock()
	if ok {
		return nil
	}
	if failed != nil {
		return failed
	}
	_, err := transport.Exchange(ctx, s.reg, auth, s.base, nil, ch)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.loginOK = true
	case refused(err):
		s.failed = err
	}
	return err
}

func (s *session) newPuller(t http.RoundTripper) (*remote.Puller, error) {
	return remote.NewPuller(append([]remote.Option{remote.WithTransport(t)}, s.popts...)...)
}

// scopeList lists the pull scopes of repos, repo first: some token servers
// look at the first scope only.
func scopeList(repo string, repos map[string]bool) []string {
	scopes := []string{pullScope(repo)}
	rest := make([]string, 0, len(repos))
	for r := range repos {
		if r != repo {
			rest = append(rest, pullScope(r))
		}
	}
	slices.Sort(rest)
	return append(scopes, rest...)
}

func pullScope(repo string) string { return "repository:" + repo + ":" + transport.PullScope }

// refused reports whether err is a 401 or 403 answer.
func refused(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden)
}

// credentialError is a keychain that failed (a credential helper that
// exited non-zero, say).
type credentialError struct {
	registry string
	err      error
	red      *redact.Redactor
}

func (e credentialError) Error() string {
	return "reading credentials for " + e.registry + ": " + oneline.Cut(e.red, e.err.Error(), oneline.MaxDetail)
}

func (e credentialError) Unwrap() error { return e.err }
