package kindpath

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseImage parses arbitrary image paths: ParseImage must
// not panic, and a path it accepts must read back from its String.
func FuzzParseImage(f *testing.F) {
	for _, s := range []string{
		"Runner=spec.image",
		"apps/Deployment=spec.template.spec.containers.*.env[name=AGENT_IMAGE].value",
		"Deployment=spec.template.spec.containers[name=m].args[flag=--x]",
		"Runner=spec.env[name=a.b[c]].value",
		"Runner=spec.args[flag=-x=y]",
		"Runner=spec.[=].x",
		`ConfigMap=data.policy\.yaml|spec.containers[name=c].image`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseImage(s)
		if err != nil {
			return
		}
		again, err := ParseImage(p.String())
		if err != nil {
			t.Fatalf("ParseImage(%q) = %v, but ParseImage(%q) = %v", s, p, p.String(), err)
		}
		if diff := cmp.Diff(p, again); diff != "" {
			t.Fatalf("ParseImage(%q).String() reads back as another path (-first +again):\n%s", s, diff)
		}
		for _, f := range p.Fields {
			if strings.ContainsAny(f, "[]") {
				if _, ok := ParseSelector(f); !ok {
					t.Fatalf("ParseImage(%q) accepted the field %q, which is no selector", s, f)
				}
			}
		}
	})
}
