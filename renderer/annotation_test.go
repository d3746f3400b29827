package renderer

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// apiServerTakes reports whether the API server takes key as an annotation
// key: apimachinery's ValidateAnnotations lowers the case, then checks a
// qualified name.
func apiServerTakes(key string) bool {
	return len(validation.IsQualifiedName(strings.ToLower(key))) == 0
}

// annotationNames are names on both sides of every rule of a qualified
// name.
var annotationNames = []string{
	"checksum/images", "example.com/images", "images", "a", "a.b_c-d", "x/a",
	"UPPER/x", "Checksum/Images", "Example.COM/x",
	"", "bad name", "a/b/c", "/x", "x/", "-x", "x-", "_x", "x.", "a b/x",
	"under_score.com/x", "a..b/x", "-a.com/x", "a-.com/x", "a.com./x", "é/x", "x/é",
	strings.Repeat("n", 63), strings.Repeat("n", 64),
	"p/" + strings.Repeat("n", 63), "p/" + strings.Repeat("n", 64),
	strings.Repeat("a.", 126) + "a/x", strings.Repeat("a.", 126) + "ab/x",
	"checksum/images\n", "checksum/images ", "\x00",
}

// TestCheckAnnotationName checks the names a checksum annotation may have
// against the API server's own rule.
func TestCheckAnnotationName(t *testing.T) {
	t.Parallel()
	for _, name := range annotationNames {
		if got, want := CheckAnnotationName(name) == nil, apiServerTakes(name); got != want {
			t.Errorf("CheckAnnotationName(%q) = %v, the API server takes it: %v", name, CheckAnnotationName(name), want)
		}
	}
	// The messages say what is wrong.
	for name, want := range map[string]string{
		"bad name":                      "the name may hold letters, digits",
		"a/b/c":                         "at most one '/'",
		strings.Repeat("n", 64):         "64 characters, more than 63",
		strings.Repeat("a", 254) + "/x": "254 characters, more than 253",
		"under_score.com/x":             `the prefix "under_score.com" is not a DNS subdomain`,
	} {
		if err := CheckAnnotationName(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckAnnotationName(%q) = %v, want %q", name, err, want)
		}
	}
}

// FuzzCheckAnnotationName checks that a name is taken exactly when the API
// server takes it.
func FuzzCheckAnnotationName(f *testing.F) {
	for _, name := range annotationNames {
		f.Add(name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := CheckAnnotationName(name) == nil, apiServerTakes(name); got != want {
			t.Fatalf("CheckAnnotationName(%q) = %v, the API server takes it: %v", name, CheckAnnotationName(name), want)
		}
	})
}
