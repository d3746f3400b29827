package renderer

import (
	"context"
	"strings"
	"testing"
)

// listOf wraps documents (each a mapping in block style) as the items of
// a List.
func listOf(items ...string) string {
	out := "apiVersion: v1\nkind: List\nitems:\n"
	for _, it := range items {
		out += "- " + strings.ReplaceAll(strings.TrimSuffix(it, "\n"), "\n", "\n  ") + "\n"
	}
	return out
}

// sharedNodes are Lists whose items share nodes through anchors and
// aliases, and what the output (or the error, when refused) must hold.
// FuzzRender starts from them too.
var sharedNodes = func() []struct {
	desc, in string
	want     []string
	refused  bool
} {
	img := "registry.example/app:1"
	pinned := img + "@" + dg(img)
	cm := func(data string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n" + data
	}
	return []struct {
		desc, in string
		want     []string // substrings of the output, or of the error when refused
		refused  bool
	}{
		{
			desc: "an image that is an alias of a ConfigMap value",
			in:   listOf(cm("  note: &img "+img+"\n"), strings.Replace(dep, "image: "+img, "image: *img", 1)),
			want: []string{"note: &img " + img + "\n", "image: " + pinned + "\n"},
		},
		{
			desc: "an image that is an alias of a ConfigMap value, in flow style",
			in:   listOf(cm("  note: &img "+img+"\n"), "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: app, image: *img}]}\n"),
			want: []string{"note: &img " + img + "\n", pinned},
		},
		{
			desc:    "an image with an anchor that a ConfigMap uses",
			in:      listOf(strings.Replace(dep, "image: "+img, "image: &img "+img, 1), cm("  note: *img\n")),
			want:    []string{"document 1, line 19: *img shares &img (line 13) outside a pod spec's images"},
			refused: true,
		},
		{
			desc:    "a container that a ConfigMap uses as its data",
			in:      listOf(strings.Replace(dep, "- name: app", "- &c\n        name: app", 1), strings.Replace(cm("  x: y\n"), "data:\n  x: y\n", "data: *c\n", 1)),
			refused: true,
			want:    []string{"*c shares &c"},
		},
		{
			desc:    "a pod spec that sits outside the Deployment",
			in:      listOf("apiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: f\nspec: &s\n  containers:\n  - name: app\n    image: "+img+"\n", strings.Replace(dep, "    spec:\n      containers:\n      - name: app\n        image: "+img+"\n", "    spec: *s\n", 1)),
			refused: true,
			want:    []string{"&s is not on the way to a pod spec's images"},
		},
		// An item is on the way to images only as a mapping: a
		// container, a List item or a volume that is an alias of an
		// image field (or a container used as a volume) is not, and
		// pinning would change it (FuzzRender found the first).
		{
			desc:    "a container that is an alias of an image field",
			in:      "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - !0 {name: app, image: &i " + img + "}\n  - *i\n",
			refused: true,
			want:    []string{"document 1, line 7: *i shares &i (line 6) outside a pod spec's images"},
		},
		{
			desc:    "a List item that is an alias of an image field",
			in:      listOf(strings.Replace(dep, "image: "+img, "image: &i "+img, 1)) + "- *i\n",
			refused: true,
			want:    []string{"*i shares &i (line 13) outside a pod spec's images"},
		},
		{
			desc:    "a volume that is an alias of a container",
			in:      "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - &c {name: app, image: " + img + "}\n  volumes:\n  - *c\n",
			refused: true,
			want:    []string{"document 1, line 8: *c shares &c (line 6) outside a pod spec's images"},
		},
		{
			desc:    "a pod template that another kind uses",
			in:      listOf(strings.Replace(dep, "  template:\n", "  template: &t\n", 1), "apiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: f\nspec: *t\n"),
			refused: true,
			want:    []string{"*t shares &t"},
		},
	}
}()

// TestSharedNodesOutsidePodSpecs renders Lists whose items share nodes
// through anchors and aliases. Data outside pod specs must never change:
// an image field that is an alias is written out in its place; a change
// to a node that something outside a pod spec shares is refused.
func TestSharedNodesOutsidePodSpecs(t *testing.T) {
	t.Parallel()
	for _, tc := range sharedNodes {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{Resolver: newFixed()}
			res, err := r.Render(context.Background(), []byte(tc.in))
			if tc.refused {
				if err == nil {
					t.Fatalf("Render() = nil error, want one with %q; output:\n%s", tc.want, res.Bytes())
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") {
						t.Errorf("Render() error = %q, want one line with %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(res.Bytes()), w) {
					t.Errorf("output lacks %q:\n%s", w, res.Bytes())
				}
			}
			checkAsAPIServer(t, []byte(tc.in), res.Bytes())
			again, err := r.Render(context.Background(), res.Bytes())
			if err != nil || string(again.Bytes()) != string(res.Bytes()) {
				t.Errorf("Render(output) = %v; changed its own output:\n%s", err, again.Bytes())
			}
		})
	}
}
