// Package oneline makes the text of a message one line of bounded
// length: a server's own words (a registry's error body, an HTML page, a
// Sigstore service's answer) in errors and logs, masked before they are
// cut.
package oneline

import (
	"strings"
	"time"
	"unicode"

	"github.com/digestpin/digestpin/internal/redact"
)

// MaxDetail caps the registry's own words (an error body) in a message.
const MaxDetail = 160

// Cut masks the credentials red knows in s, then makes it one line of at
// most limit runes. A nil red masks nothing. Masking comes first: cutting first could leave the
// start of a credential, which no longer matches it, in the message.
func Cut(red *redact.Redactor, s string, limit int) string {
	if red != nil {
		s = red.Redact(s)
	}
	return Of(s, limit)
}

// Of collapses whitespace and control characters, and cuts s to max
// runes (0: no limit).
func Of(s string, limit int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); limit > 0 && len(r) > limit {
		s = string(r[:limit]) + "…"
	}
	return s
}

// Duration is d to the second (under a second, to the
// millisecond), without the zero units Go's Duration.String ends with:
// "24h", "1h30m", "5m", "45s", "5ms".
func Duration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
