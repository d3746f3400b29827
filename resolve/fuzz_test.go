package resolve

import (
	"encoding/base64"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-containerregistry/pkg/authn"
)

// FuzzRedact checks that a password the redactor was shown never comes
// out of it, alone, in a basic auth header, or in a message around it.
func FuzzRedact(f *testing.F) {
	f.Add("user", "SENTINEL-p4ssw0rd", "you sent ", " back")
	f.Add("u", "abcd", "Basic ", "\n")
	f.Fuzz(func(t *testing.T, user, password, before, after string) {
		secret := strings.TrimSpace(password)
		if len(secret) < minSecret || strings.Contains(secret, "\x00") {
			return // too short to mask, or holds the stand-in below
		}
		red := newRedactor()
		red.addAuth(&authn.AuthConfig{Username: user, Password: password})
		basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
		for _, msg := range []string{before + password + after, before + "Basic " + basic + after} {
			// The mask may spell the secret with the text around it
			// ("000" + "[REDACTED]" shows "000[" without showing the
			// password "000["): look for it outside the masks only.
			got := red.redact(msg)
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
			red := newRedactor()
			red.addAuth(&authn.AuthConfig{Username: tc.user, Password: tc.password})
			basic := base64.StdEncoding.EncodeToString([]byte(tc.user + ":" + tc.password))
			if got := red.redact("Authorization: Basic " + basic); got != "Authorization: Basic [REDACTED]" {
				t.Errorf("redact() = %q, want the header masked", got)
			}
		})
	}
}

// FuzzOneLine checks that a registry's words become one line of printable
// text of bounded length, whatever they are.
func FuzzOneLine(f *testing.F) {
	f.Add("<html>\n<body>error\r\n</body></html>", 160)
	f.Add("\x1b[31mred\x00\u2028", 0)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = max(0, min(limit, 1000))
		got := oneLine(s, limit)
		for _, r := range got {
			if unicode.IsControl(r) || (unicode.IsSpace(r) && r != ' ') {
				t.Fatalf("oneLine(%q) = %q holds %U", s, got, r)
			}
		}
		if n := utf8.RuneCountInString(got); limit > 0 && n > limit+1 {
			t.Fatalf("oneLine(%q, %d) has %d runes", s, limit, n)
		}
	})
}

// FuzzCutMasksFirst checks that a message cut to a length never shows the
// start of a credential it held, wherever the credential sat: the
// credential is masked before the message is cut.
func FuzzCutMasksFirst(f *testing.F) {
	// A registry that echoes the Authorization header after padding: the
	// cut at maxDetail falls inside the header for some paddings.
	for _, pad := range []int{0, 1, 100, 119, 120, 140, 159, 160, 200} {
		f.Add(strings.Repeat("x", pad)+"Authorization: Basic ", "ZWNoby11c2VyOlNFTlRJTkVM", " back", maxDetail)
	}
	f.Add(`{"errors":[{"code":"DENIED","message":"`, "SENTINEL-p4ssw0rd", `"}]}`, 2*maxDetail)
	f.Fuzz(func(t *testing.T, before, secret, after string, limit int) {
		limit = max(0, min(limit, 1000))
		if len(secret) < minSecret || strings.ContainsFunc(secret, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			return // too short to mask, or changed by oneLine itself
		}
		prefix := secret[:minSecret]
		first, _ := utf8.DecodeRuneInString(secret)
		if strings.ContainsRune(before+"[REDACTED]"+after+"…", first) {
			return // the text around could spell the start of it
		}
		red := newRedactor()
		red.add(secret)
		if got := cut(red, before+secret+after, limit); strings.Contains(got, prefix) {
			t.Fatalf("cut(%q, %d) = %q, which shows the start of the credential", before+secret+after, limit, got)
		}
	})
}
