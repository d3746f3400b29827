package renderer

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestKeepUnresolvedKeepsWhatIsNoReference checks that KeepUnresolved
// keeps an image field that holds no reference (blank, as OpenShift's
// image triggers leave it, or unparseable) as written, in the checksum as
// written, with one warning, while the pod's other images are pinned.
// Without KeepUnresolved such a field is an error (TestRenderErrors), and
// a value that is not a string is one either way.
func TestKeepUnresolvedKeepsWhatIsNoReference(t *testing.T) {
	t.Parallel()
	const doc = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: app\n    image: IMAGE\n  - name: side\n    image: registry.example/side:1\n"
	for _, tc := range []struct {
		desc, image, written, warning, err string
	}{
		{desc: "blank", image: "' '", written: " ", warning: `keeping image " " unpinned: document 1, line 8: Pod/p container "app": image is empty, want a reference such as registry/name:tag`},
		{desc: "uppercase repository", image: "Nginx:1", written: "Nginx:1", warning: `keeping image "Nginx:1" unpinned: document 1, line 8: Pod/p container "app": parsing image "Nginx:1": `},
		{desc: "a control character", image: `"app\u0007:1"`, written: "app\a:1", warning: `keeping image "app\a:1" unpinned: document 1, line 8: Pod/p container "app": image "app\a:1" holds a control character`},
		{desc: "a boolean", image: "true", err: `document 1, line 8: Pod/p container "app": image is bool true`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var warnings []string
			r := &Renderer{Resolver: newFixed(), KeepUnresolved: true, Warnf: func(f string, args ...any) { warnings = append(warnings, fmt.Sprintf(f, args...)) }}
			in := strings.Replace(doc, "IMAGE", tc.image, 1)
			res, err := r.Render(context.Background(), []byte(in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Render() = %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			out := string(res.Bytes())
			side := "registry.example/side:1@" + dg("registry.example/side:1")
			sum := Checksum([]string{"app=" + tc.written, "side=" + side})
			for _, want := range []string{"image: " + tc.image + "\n", "image: " + side + "\n", "checksum/images: '" + sum + "'"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if len(warnings) != 1 || !strings.HasPrefix(warnings[0], tc.warning) {
				t.Errorf("warnings = %q, want one starting %q", warnings, tc.warning)
			}
			// Idempotent: the kept field stays, the checksum too.
			again, err := r.Render(context.Background(), res.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(out, string(again.Bytes())); diff != "" {
				t.Errorf("Render() changed its own output (-want +got):\n%s", diff)
			}
		})
	}
}
