// Package redact masks credentials in messages. It is the one masker of
// digestpin: the registry resolver shows it every password, token and
// Authorization header it handles, the Redis client its password, and
// each masks every message it writes with it. Messages are built without
// credentials in the first place; this is the second line, for a server
// that echoes a request back in an error.
package redact

import (
	"cmp"
	"slices"
	"strings"
	"sync"
)

// MinSecret is the shortest credential that is masked: masking every "a"
// of a one-letter password would garble messages and hide nothing.
const MinSecret = 4

// Mask is what a credential becomes in a message.
const Mask = "[REDACTED]"

// Redactor remembers credentials and masks them in messages. The zero
// value is not ready: use New. It is safe for concurrent use.
type Redactor struct {
	mu      sync.RWMutex
	secrets map[string]bool
}

// New returns a Redactor that knows no credential yet.
func New() *Redactor { return &Redactor{secrets: map[string]bool{}} }

// Add remembers secrets, without the blanks around them; those shorter
// than MinSecret are ignored.
func (r *Redactor) Add(secrets ...string) {
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) < MinSecret {
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

// Redact masks every known credential in s, the longest first: a
// credential that holds a shorter one (a basic auth header holds its
// password's bytes only encoded, but a token may hold a password) would
// otherwise keep its other parts in plain sight.
func (r *Redactor) Redact(s string) string {
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
		s = strings.ReplaceAll(s, secret, Mask)
	}
	return s
}
