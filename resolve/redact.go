package resolve

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/digestpin/digestpin/internal/redact"
)

// minSecret is the shortest credential that is masked in messages.
const minSecret = redact.MinSecret

// redactor remembers every credential the Resolver has handled (passwords
// and tokens from the keychain, Authorization headers it sent) and masks
// them in every message it writes: logs and errors. Messages are built
// without credentials in the first place; this is the second line, for a
// registry that echoes a request back in an error body. The masking is
// package redact's, which the Redis client uses too. It is safe for
// concurrent use.
type redactor struct {
	r *redact.Redactor
}

func newRedactor() *redactor { return &redactor{r: redact.New()} }

// add remembers secrets.
func (r *redactor) add(secrets ...string) { r.r.Add(secrets...) }

// redact masks every known credential in s.
func (r *redactor) redact(s string) string { return r.r.Redact(s) }

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
