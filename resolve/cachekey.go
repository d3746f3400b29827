package resolve

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// CacheKey returns what, besides ref itself, decides the digest the
// Resolver gives for ref, as a hex SHA-256: a cache of resolutions must
// key each entry on it, or a run with other options reads another run's
// answers. It covers the mode of resolution (the index, or one platform's
// manifest), and each registry asked for ref in order: mirrors (host,
// path prefix, plain HTTP or not), whether the registry itself is asked
// (mirror-only), and whose credentials are sent to each.
//
// Credentials count by identity, never by secret: the user name the
// keychain gives for the host, or anonymous. A registry answers per
// repository, not per password; one that serves other content to another
// user knows users by name, so two users get two entries, and a changed
// password keeps its entries. Credentials without a user name (a bare
// token) have no identity apart from their secret, which is not written
// to disk, not even hashed: for those, ok is false and ref is not to be
// cached. The user name is hashed with the rest, not written as such.
//
// It looks up credentials once per registry for the Resolver's lifetime
// (the same lookup Resolve uses), so it may run a credential helper; an
// error is the keychain's. It is safe for concurrent use.
func (r *Resolver) CacheKey(ctx context.Context, ref name.Reference) (key string, ok bool, err error) {
	cands, err := r.candidates(ref)
	if err != nil {
		return "", false, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", cacheFormat)
	if r.o.platform != nil {
		fmt.Fprintf(h, "mode platform %s\n", platformString(r.o.platform))
	} else {
		fmt.Fprintf(h, "mode index\n")
	}
	// The candidates are the mirrors in order, then the registry unless
	// mirror-only: their names hold the mirrors' hosts and prefixes.
	for _, c := range cands {
		id, ok, err := c.sess.identity(ctx)
		if err != nil || !ok {
			return "", false, err
		}
		fmt.Fprintf(h, "ask %s://%s mirror=%t identity=%s\n", c.ref.Context().Scheme(), c.ref.Context().Name(), c.mirror, id)
	}
	return hex.EncodeToString(h.Sum(nil)), true, nil
}

// identity names whose credentials the keychain gives for the registry:
// "anonymous", or the user name; ok is false for credentials without one.
func (s *session) identity(ctx context.Context) (string, bool, error) {
	_, cfg, err := s.credentials(ctx)
	if err != nil {
		return "", false, err
	}
	user := cfg.Username
	if user == "" && cfg.Auth != "" {
		if b, err := base64.StdEncoding.DecodeString(cfg.Auth); err == nil {
			user, _, _ = strings.Cut(string(b), ":")
		}
	}
	switch {
	case user != "":
		return "user " + user, true, nil
	case cfg.Password == "" && cfg.Auth == "" && cfg.IdentityToken == "" && cfg.RegistryToken == "":
		return "anonymous", true, nil
	}
	return "", false, nil
}

// credentials looks up the registry's credentials in the keychain, once
// for the session: a credential helper runs once per registry and run.
// A failure is not remembered here (prepare remembers the registry's).
func (s *session) credentials(ctx context.Context) (authn.Authenticator, *authn.AuthConfig, error) {
	select {
	case s.creds <- struct{}{}:
		defer func() { <-s.creds }()
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if s.cfg != nil {
		return s.auth, s.cfg, nil
	}
	// A credential helper is a program that go-containerregistry runs
	// without the context: one that hangs must not hold the run past its
	// deadline. The lookup goes on in the background and is dropped.
	type found struct {
		auth authn.Authenticator
		cfg  *authn.AuthConfig
		err  error
	}
	ch := make(chan found, 1)
	go func() {
		auth, err := authn.Resolve(ctx, s.kc, s.reg)
		if err != nil {
			ch <- found{err: err}
			return
		}
		cfg, err := authn.Authorization(ctx, auth)
		ch <- found{auth: auth, cfg: cfg, err: err}
	}()
	var f found
	select {
	case f = <-ch:
	case <-ctx.Done():
		return nil, nil, credentialError{s.reg.RegistryStr(), ctx.Err(), s.red}
	}
	if f.err != nil {
		return nil, nil, credentialError{s.reg.RegistryStr(), f.err, s.red}
	}
	addAuth(s.red, f.cfg)
	s.auth, s.cfg = f.auth, f.cfg
	return f.auth, f.cfg, nil
}
