package resolve

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/digestpin/digestpin/internal/redact"
)

// FuzzRedact checks that a password the redactor was shown never comes
// out of it, alone, in a basic auth header, or in a message around it.
func FuzzRedact(f *testing.F) {
	f.Add("user", "SENTINEL-p4ssw0rd", "you sent ", " back")
	f.Add("u", "abcd", "Basic ", "\n")
	f.Fuzz(func(t *testing.T, user, password, before, after string) {
		secret := strings.TrimSpace(password)
		if len(secret) < redact.MinSecret || strings.Contains(secret, "\x00") {
			return // too short to mask, or holds the stand-in below
		}
		red := redact.New()
		addAuth(red, &authn.AuthConfig{Username: user, Password: password})
		basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
		for _, msg := range []string{before + password + after, before + "Basic " + basic + after} {
			// The mask may spell the secret with the text around it
			// ("000" + "[REDACTED]" shows "000[" without showing the
			// password "000["): look for it outside the masks only.
			got := red.Redact(msg)
			if shown := strings.ReplaceAll(got, "[REDACTED]", "\x00"); strings.Contains(shown, secret) || strings.Contains(shown, basic) {
				t.Fatalf("redact(%q) = %q, which shows the password", msg, got)
			}
		}
	})
}

// TestRedactBasicHeader checks that the basic auth header of a credential
// is masked before it is ever sent, whatever the user name.
func TestRedactBasicHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ desc, user, password string }{
		{desc: "a user and a password", user: "user", password: "SENTINEL-p4ss"},
		// Found by FuzzRedact (testdata/fuzz/FuzzRedact/389b2f31bf6ee072).
		{desc: "no user name", user: "", password: "0000"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			red := redact.New()
			addAuth(red, &authn.AuthConfig{Username: tc.user, Password: tc.password})
			basic := base64.StdEncoding.EncodeToString([]byte(tc.user + ":" + tc.password))
			if got := red.Redact("Authorization: Basic " + basic); got != "Authorization: Basic [REDACTED]" {
				t.Errorf("redact() = %q, want the header masked", got)
			}
		})
	}
}
