package resolve

import (
	"cmp"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
)

// minSecret is the shortest credential that is masked in messages: masking
// every "a" of a one-letter password would garble them and hide nothing.
const minSecret = 4

// redactor remembers every credential the Resolver has handled (passwords
// and tokens from the keychain, Authorization headers it sent) and masks
// them in every message it writes: logs and errors. Messages are built
// without credentials in the first place; this is the second line, for a
// registry that echoes a request back in an error body. It is safe for
// concurrent use.
type redactor struct {
	mu      sync.RWMutex
	secrets map[string]bool
}

func newRedactor() *redactor { return &redactor{secrets: map[string]bool{}} }

// add remembers secrets.
func (r *redactor) add(secrets ...string) {
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) < minSecret {
			continue
		}
		r.mu.RLock()
		known := r.secrets[s]
		r.mu.RUnlock()
		if known {
			continue
		}
		r.mu.Lock()
		r.secrets[s] = true
		r.mu.Unlock()
	}
}

// addAuth remembers the credentials of an auth config.
func (r *redactor) addAuth(c *authn.AuthConfig) {
	if c == nil {
		return
	}
	r.add(c.Password, c.Auth, c.IdentityToken, c.RegistryToken)
	// The basic auth header, also for an empty user name (a token as
	// the password).
	if c.Password != "" {
		r.add(base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Password)))
	}
}

// addHeader remembers the credential of an Authorization header.
func (r *redactor) addHeader(h string) {
	if h == "" {
		return
	}
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok {
		r.add(h)
		return
	}
	r.add(cred)
	if strings.EqualFold(scheme, "basic") {
		if b, err := base64.StdEncoding.DecodeString(cred); err == nil {
			if _, pass, ok := strings.Cut(string(b), ":"); ok {
				r.add(pass)
			}
		}
	}
}

// redact masks every known credential in s, the longest first: a
// credential that holds a shorter one (a basic auth header holds its
// password's bytes only encoded, but a token may hold a password) would
// otherwise keep its other parts in plain sight.
func (r *redactor) redact(s string) string {
	r.mu.RLock()
	found := make([]string, 0, len(r.secrets))
	for secret := range r.secrets {
		if strings.Contains(s, secret) {
			found = append(found, secret)
		}
	}
	r.mu.RUnlock()
	slices.SortFunc(found, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	for _, secret := range found {
		s = strings.ReplaceAll(s, secret, "[REDACTED]")
	}
	return s
}

// redactingTransport shows the redactor every Authorization header sent.
type redactingTransport struct {
	next http.RoundTripper
	red  *redactor
}

// RoundTrip implements http.RoundTripper.
func (t *redactingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.red.addHeader(req.Header.Get("Authorization"))
	return t.next.RoundTrip(req)
}
