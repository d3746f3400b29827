package resolve

import (
	"encoding/base64"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/digestpin/digestpin/internal/redact"
)

// A Resolver's *redact.Redactor remembers every credential it has handled
// (passwords and tokens from the keychain here, the Authorization headers
// it sent in its transport) and masks them in every message it writes:
// logs and errors. Messages are built without credentials in the first
// place; this is the second line, for a registry that echoes a request
// back in an error body. The masking is package redact's, which the Redis
// client uses too.

// addAuth shows red the credentials of an auth config.
func addAuth(red *redact.Redactor, c *authn.AuthConfig) {
	if c == nil {
		return
	}
	red.Add(c.Password, c.Auth, c.IdentityToken, c.RegistryToken)
	// The basic auth header, also for an empty user name (a token as
	// the password).
	if c.Password != "" {
		red.Add(base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Password)))
	}
}
