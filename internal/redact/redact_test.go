package redact

import (
	"strings"
	"testing"
)

// FuzzRedact checks that a credential the Redactor knows never comes out
// of it, wherever it sits in a message, beside the other credentials it
// knows.
func FuzzRedact(f *testing.F) {
	f.Add("SENTINEL-p4ssw0rd", "word", "you sent ", " back")
	f.Add("abcd", "abcdabcd", "ERR unknown command 'AUTH', with args beginning with: '", "' ")
	f.Fuzz(func(t *testing.T, secret, other, before, after string) {
		secret = strings.TrimSpace(secret)
		if len(secret) < MinSecret || strings.Contains(secret+other+before+after, "\x00") {
			return // too short to mask, or holds the stand-in below
		}
		r := New()
		r.Add(other, secret)
		got := r.Redact(before + secret + after)
		// The mask may spell the secret with the text around it: look
		// for it outside the masks only.
		if shown := strings.ReplaceAll(got, Mask, "\x00"); strings.Contains(shown, secret) {
			t.Fatalf("Redact(%q) = %q, which shows %q", before+secret+after, got, secret)
		}
	})
}

// TestRedactNestedSecrets checks that a credential holding a shorter one
// is masked whole, whatever order the Redactor keeps them in.
func TestRedactNestedSecrets(t *testing.T) {
	for range 50 {
		r := New()
		r.Add("1234", "pass1234word", "word")
		if got := r.Redact("token pass1234word sent"); got != "token [REDACTED] sent" {
			t.Fatalf("Redact() = %q, want the token masked whole", got)
		}
	}
}

// TestRedactShortAndBlank checks what is not masked: credentials too
// short to mask, and the blanks around one.
func TestRedactShortAndBlank(t *testing.T) {
	r := New()
	r.Add("abc", "  s3cret\n")
	if got, want := r.Redact("abc s3cret abc"), "abc [REDACTED] abc"; got != want {
		t.Errorf("Redact() = %q, want %q", got, want)
	}
}
