package hosts

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzKey checks that two spellings of one registry host get one key:
// in any case, with or without :443, and a key is its own key.
func FuzzKey(f *testing.F) {
	for _, h := range []string{"Registry.Example:443", "docker.io:443", "REGISTRY-1.DOCKER.IO", "index.docker.io", "[::1]:443", "localhost:5000", "registry.example:4430"} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, h string) {
		if !utf8.ValidString(h) || strings.ContainsAny(h, "/\x00") {
			return // not a host; ToUpper would change invalid bytes
		}
		k := Key(h)
		if got := Key(k); got != k {
			t.Fatalf("Key(%q) = %q, but Key(%q) = %q", h, k, k, got)
		}
		// Only where upper case lowers back to h's lower case (not "ς",
		// whose upper case "Σ" lowers to "σ"): strings.EqualFold folds
		// those together, Key must not.
		upper := strings.ToUpper(h)
		lower, upperLowered := strings.ToLower(h), strings.ToLower(upper)
		if got := Key(upper); lower == upperLowered && got != k {
			t.Fatalf("Key(%q) = %q, but Key(%q) = %q", strings.ToUpper(h), got, h, k)
		}
		if _, _, hasPort := strings.Cut(h, ":"); !hasPort {
			if got := Key(h + ":443"); got != k {
				t.Fatalf("Key(%q) = %q, but Key(%q) = %q", h+":443", got, h, k)
			}
		}
	})
}
