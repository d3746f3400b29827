package oneline

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/digestpin/digestpin/internal/redact"
)

// FuzzOf checks that a registry's words become one line of printable
// text of bounded length, whatever they are.
func FuzzOf(f *testing.F) {
	f.Add("<html>\n<body>error\r\n</body></html>", 160)
	f.Add("\x1b[31mred\x00\u2028", 0)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = max(0, min(limit, 1000))
		got := Of(s, limit)
		for _, r := range got {
			if unicode.IsControl(r) || (unicode.IsSpace(r) && r != ' ') {
				t.Fatalf("Of(%q) = %q holds %U", s, got, r)
			}
		}
		if n := utf8.RuneCountInString(got); limit > 0 && n > limit+1 {
			t.Fatalf("Of(%q, %d) has %d runes", s, limit, n)
		}
	})
}

// FuzzCutMasksFirst checks that a message cut to a length never shows the
// start of a credential it held, wherever the credential sat: the
// credential is masked before the message is cut.
func FuzzCutMasksFirst(f *testing.F) {
	// A registry that echoes the Authorization header after padding: the
	// cut at MaxDetail falls inside the header for some paddings.
	for _, pad := range []int{0, 1, 100, 119, 120, 140, 159, 160, 200} {
		f.Add(strings.Repeat("x", pad)+"Authorization: Basic ", "ZWNoby11c2VyOlNFTlRJTkVM", " back", MaxDetail)
	}
	f.Add(`{"errors":[{"code":"DENIED","message":"`, "SENTINEL-p4ssw0rd", `"}]}`, 2*MaxDetail)
	f.Fuzz(func(t *testing.T, before, secret, after string, limit int) {
		limit = max(0, min(limit, 1000))
		if len(secret) < redact.MinSecret || strings.ContainsFunc(secret, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			return // too short to mask, or changed by Of itself
		}
		prefix := secret[:redact.MinSecret]
		first, _ := utf8.DecodeRuneInString(secret)
		if strings.ContainsRune(before+"[REDACTED]"+after+"…", first) {
			return // the text around could spell the start of it
		}
		red := redact.New()
		red.Add(secret)
		if got := Cut(red, before+secret+after, limit); strings.Contains(got, prefix) {
			t.Fatalf("Cut(%q, %d) = %q, which shows the start of the credential", before+secret+after, limit, got)
		}
	})
}
