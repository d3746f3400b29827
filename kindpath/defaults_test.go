package kindpath

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestDefaultPathsParse checks that every built-in path reads back from
// the form the flags take: a table entry that no flag could spell would
// be a path the walker may not follow as written.
func TestDefaultPathsParse(t *testing.T) {
	for _, p := range DefaultPodSpecs {
		got, err := ParsePodSpec(p.String())
		if err != nil {
			t.Errorf("ParsePodSpec(%q) = %v", p, err)
			continue
		}
		got.NoChecksum = p.NoChecksum
		if diff := cmp.Diff(p, got); diff != "" {
			t.Errorf("ParsePodSpec(%q) (-want +got):\n%s", p, diff)
		}
	}
	for _, p := range DefaultImages {
		got, err := ParseImage(p.String())
		if err != nil {
			t.Errorf("ParseImage(%q) = %v", p, err)
			continue
		}
		if diff := cmp.Diff(p, got, cmpopts.IgnoreFields(Image{}, "Tagged", "Qualified")); diff != "" {
			t.Errorf("ParseImage(%q) (-want +got):\n%s", p, diff)
		}
	}
}
