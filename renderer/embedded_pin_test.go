package renderer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/kindpath"
)

// TestPinEmbedded pins the images that an image path with "|" names
// inside a string's document: only the bytes of each value change, the
// rest of the text and of the document stays byte for byte, the image
// counts as any other (its workload names the string and the path in the
// text) and is no longer listed as unpinned, and the output is a fixed
// point. A string whose text cannot be mapped exactly onto the
// document's bytes is refused in one line naming the document, the line,
// the field and the image.
func TestPinEmbedded(t *testing.T) {
	t.Parallel()
	const pinned = "@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	cm := func(header, text string) string {
		return "# Source: chart/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: ns\ndata:\n  policy.yaml: " + header + "\n    " + strings.ReplaceAll(strings.TrimSuffix(text, "\n"), "\n", "\n    ") + "\n  other: x\n"
	}
	policy := "kind: PolicyServer\nspec:\n  image: registry.example/ps:1 # the server\n  sidecar: {image: \"registry.example/side:2\"}\n"
	field := func(inner string) Workload {
		return Workload{Kind: "ConfigMap", Namespace: "ns", Name: "cm", Container: FieldPrefix + `data["policy.yaml"]`, Field: EmbeddedPrefix + inner}
	}
	pin := func(s string, refs ...string) string {
		for _, r := range refs {
			s = strings.ReplaceAll(s, r, r+"@"+dg(r))
		}
		return s
	}
	for _, tc := range []struct {
		desc  string
		paths []string
		in    string
		mode  Mode
		want  string     // the output; "" for the input unchanged
		uses  []string   // each image's workloads, as Workload.String formats them
		left  []Unpinned // what is still listed as unpinned
		err   string     // the error, when refused
	}{
		{
			desc:  "a literal block scalar: the values alone change, a comment and flow style kept",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`, `/ConfigMap=data.policy\.yaml|spec.sidecar.image`},
			in:    cm("|", policy),
			want:  pin(cm("|", policy), "registry.example/ps:1", "registry.example/side:2"),
			uses:  []string{`registry.example/ps:1: ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image`, `registry.example/side:2: ConfigMap/ns/cm field data["policy.yaml"] embedded spec.sidecar.image`},
		},
		{
			desc:  "one path of two: the other image is still listed",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm("|", policy),
			want:  pin(cm("|", policy), "registry.example/ps:1"),
			uses:  []string{`registry.example/ps:1: ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image`},
			left:  []Unpinned{{Reference: "registry.example/side:2", Workload: field("spec.sidecar.image")}},
		},
		{
			desc:  "chomping and indentation indicators, a comment on the header, CRLF line breaks",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    strings.ReplaceAll(cm("|2- # policy", "  "+strings.ReplaceAll(policy, "\n", "\n  ")), "\n", "\r\n"),
			want:  pin(strings.ReplaceAll(cm("|2- # policy", "  "+strings.ReplaceAll(policy, "\n", "\n  ")), "\n", "\r\n"), "registry.example/ps:1"),
			uses:  []string{`registry.example/ps:1: ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image`},
			left:  []Unpinned{{Reference: "registry.example/side:2", Workload: field("spec.sidecar.image")}},
		},
		{
			desc:  "JSON in a literal block scalar, several documents, selectors and *",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.containers[name=c].image`, `ConfigMap=data.policy\.yaml|spec.initContainers.*.image`},
			in:    cm("|+", "{\"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"registry.example/c:1\"}, {\"name\": \"d\", \"image\": \"registry.example/d:1\"}]}}\n---\nspec:\n  initContainers:\n  - {name: i, image: 'registry.example/i:1'}\n"),
			want:  pin(cm("|+", "{\"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"registry.example/c:1\"}, {\"name\": \"d\", \"image\": \"registry.example/d:1\"}]}}\n---\nspec:\n  initContainers:\n  - {name: i, image: 'registry.example/i:1'}\n"), "registry.example/c:1", "registry.example/i:1"),
			uses:  []string{`registry.example/c:1: ConfigMap/ns/cm field data["policy.yaml"] embedded (1).spec.containers[name=c].image`, `registry.example/i:1: ConfigMap/ns/cm field data["policy.yaml"] embedded (2).spec.initContainers[0].image`},
			left:  []Unpinned{{Reference: "registry.example/d:1", Workload: field("(1).spec.containers[1].image")}},
		},
		{
			desc:  "characters of several bytes before the value, a tab, a blank line of fewer spaces",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm("|", "# é — ü\n\nspec: {name: \"é—x\",\timage: registry.example/ps:1}\n"),
			want:  pin(cm("|", "# é — ü\n\nspec: {name: \"é—x\",\timage: registry.example/ps:1}\n"), "registry.example/ps:1"),
			uses:  []string{`registry.example/ps:1: ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image`},
		},
		{
			desc:  "a byte order mark before the stream, a second document before this one",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    "\ufeff---\napiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\n" + cm("|", "spec:\n  image: registry.example/ps:1\n"),
			want:  pin("\ufeff---\napiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\n"+cm("|", "spec:\n  image: registry.example/ps:1\n"), "registry.example/ps:1"),
			uses:  []string{`registry.example/ps:1: ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image`},
		},
		{
			desc:  "a byte order mark before the document",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    "\ufeff" + cm("|", "spec:\n  image: registry.example/ps:1\n"),
			want:  pin("\ufeff"+cm("|", "spec:\n  image: registry.example/ps:1\n"), "registry.example/ps:1"),
			uses:  []string{`registry.example/ps:1: ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image`},
		},
		{
			desc:  "two paths to one field, and a selector to it: pinned once",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`, `/ConfigMap=data.policy\.yaml|spec.image`, `ConfigMap=data.policy\.yaml|*.image`},
			in:    cm("|", "spec:\n  image: registry.example/ps:1\n"),
			want:  pin(cm("|", "spec:\n  image: registry.example/ps:1\n"), "registry.example/ps:1"),
			uses:  []string{`registry.example/ps:1: ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image`},
		},
		{
			desc:  "pinned already: nothing changes",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm("|", "spec:\n  image: registry.example/ps:1"+pinned+"\n"),
			uses:  []string{`registry.example/ps:1` + pinned + `: ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image`},
		},
		{
			desc:  "digest mode",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			mode:  ModeDigest,
			in:    cm("|", "spec:\n  image: registry.example/ps:1\n"),
			want:  cm("|", "spec:\n  image: registry.example/ps@"+dg("registry.example/ps:1")+"\n"),
			uses:  []string{`registry.example/ps:1: ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image`},
		},
		{
			desc:  "annotate mode: the text stays",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			mode:  ModeAnnotate,
			in:    cm("|", "spec:\n  image: registry.example/ps:1\n"),
			uses:  []string{`registry.example/ps:1: ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image`},
		},
		{
			desc:  "no such field, empty, a placeholder: nothing to pin",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`, `ConfigMap=data.none|spec.image`},
			in:    cm("|", "spec:\n  other: 1\n---\nspec:\n  image: ''\n---\nspec:\n  image: '{{ .image }}'\n"),
		},
		// Refused: where the text's positions are not the document's.
		{
			desc:  "a folded block scalar",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm(">", "spec:\n\n  image: registry.example/ps:1\n"),
			err:   `document 1 (chart/templates/cm.yaml), line 8 (rendered line 7 of the template): ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image: cannot pin "registry.example/ps:1" inside the string exactly: the string is a folded block scalar (>), not a literal block scalar (|, |- or |+), whose every line is a line of the text`,
		},
		{
			desc:  "a JSON string with escapes",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": {"policy.yaml": "spec:\n  image: registry.example/ps:1\n"}}` + "\n",
			err:   `cannot pin "registry.example/ps:1" inside the string exactly: the string is double-quoted, not a literal block scalar`,
		},
		{
			desc:  "an escape in the value",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm("|", "spec:\n  image: \"registry.example/ps\\x3a1\"\n"),
			err:   `line 10 (rendered line 9 of the template): ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image: cannot pin "registry.example/ps:1" inside the string exactly: the image field's value is not the bytes it is written as`,
		},
		{
			desc:  "a value over two lines",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm("|", "spec:\n  image: registry.example/ps\n    :1\n"),
			err:   `line 10 (rendered line 9 of the template): ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image: parsing image "registry.example/ps :1": could not parse reference`,
		},
		{
			desc:  "a tagged value",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm("|", "spec:\n  image: !!str registry.example/ps:1\n"),
			err:   `cannot pin "registry.example/ps:1" inside the string exactly: the image field is tagged !!str; write it without a tag`,
		},
		{
			desc:  "an anchored value",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm("|", "spec:\n  image: &i registry.example/ps:1\nother: *i\n"),
			err:   `cannot pin "registry.example/ps:1" inside the string: an anchor or alias of the text is on the way to it`,
		},
		{
			desc:  "an alias on the way",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm("|", "base: &b {image: registry.example/ps:1}\nspec: *b\n"),
			err:   `line 9 (rendered line 8 of the template): ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image: cannot pin "registry.example/ps:1" inside the string: an anchor or alias of the text is on the way to it, and other fields may share it; write it out`,
		},
		{
			desc:  "a repeated key in the text",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm("|", "spec:\n  image: registry.example/ps:1\n  image: registry.example/ps:2\n"),
			err:   `line 11 (rendered line 10 of the template): ConfigMap/ns/cm field data["policy.yaml"]: in the text: image is given twice`,
		},
		{
			desc:  "an invalid reference",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm("|", "spec:\n  image: Registry.example/PS:1\n"),
			err:   `line 10 (rendered line 9 of the template): ConfigMap/ns/cm field data["policy.yaml"] embedded spec.image: parsing image "Registry.example/PS:1"`,
		},
		{
			desc:  "text that is no YAML",
			paths: []string{`ConfigMap=data.policy\.yaml|spec.image`},
			in:    cm("|", "spec: [\n"),
			err:   `line 8 (rendered line 7 of the template): ConfigMap/ns/cm field data["policy.yaml"]: reading the text for image path ConfigMap=data.policy\.yaml|spec.image: yaml: line 1: `,
		},
		{
			desc:  "a mapping, not a string",
			paths: []string{`ConfigMap=data|spec.image`},
			in:    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\n",
			err:   `document 1, line 6: ConfigMap/cm field data: the image path ConfigMap=data|spec.image leads to a mapping, want a string that holds a YAML or JSON document`,
		},
		{
			desc:  "a string that an alias shares",
			paths: []string{`ConfigMap=data.b|spec.image`},
			in:    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations:\n    a: &t |\n      spec:\n        image: registry.example/ps:1\ndata:\n  b: *t\n",
			err:   `ConfigMap/cm field data.b: cannot pin the images of image path ConfigMap=data.b|spec.image inside the string: it is shared through an anchor, an alias or a merge key; write it out`,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			paths := kindpath.DefaultImages[:len(kindpath.DefaultImages):len(kindpath.DefaultImages)]
			for _, s := range tc.paths {
				p, err := kindpath.ParseImage(s)
				if err != nil {
					t.Fatal(err)
				}
				paths = append(paths, p)
			}
			var mu sync.Mutex
			var warnings []string
			r := &Renderer{Resolver: newFixed(), Mode: tc.mode, ImagePaths: paths, Warnf: func(f string, _ ...any) {
				mu.Lock()
				defer mu.Unlock()
				warnings = append(warnings, f)
			}}
			res, err := r.Render(context.Background(), []byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("Render() = %v, want one line with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if diff := cmp.Diff(want, string(res.Bytes())); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
			var uses []string
			for _, im := range res.Images {
				for _, w := range im.Workloads {
					uses = append(uses, im.Written+": "+w.String())
				}
			}
			if diff := cmp.Diff(tc.uses, uses); diff != "" {
				t.Errorf("Render() images (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.left, res.Unpinned, cmpIgnoreWhere); diff != "" {
				t.Errorf("Render() unpinned (-want +got):\n%s", diff)
			}
			// The output is a fixed point.
			again, err := r.Render(context.Background(), res.Bytes())
			if err != nil {
				t.Fatalf("Render(output) = %v", err)
			}
			if string(again.Bytes()) != string(res.Bytes()) {
				t.Errorf("Render(output) changed it:\n%s", cmp.Diff(string(res.Bytes()), string(again.Bytes())))
			}
		})
	}
}

// TestPinEmbeddedMany pins thousands of images inside one string, each in
// its own bytes, in time that grows with the text, not its square.
func TestPinEmbeddedMany(t *testing.T) {
	t.Parallel()
	var text, want strings.Builder
	text.WriteString("items:\n")
	want.WriteString("items:\n")
	for i := range 3000 {
		ref := fmt.Sprintf("registry.example/i:%d", i)
		fmt.Fprintf(&text, "    - {name: n%d, image: %s}\n", i, ref)
		fmt.Fprintf(&want, "    - {name: n%d, image: %s@%s}\n", i, ref, dg(ref))
	}
	head := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  list: |\n    "
	p, err := kindpath.ParseImage("ConfigMap=data.list|items.*.image")
	if err != nil {
		t.Fatal(err)
	}
	r := &Renderer{Resolver: newFixed(), ImagePaths: []kindpath.Image{p}}
	res, err := r.Render(context.Background(), []byte(head+text.String()))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	if got := string(res.Bytes()); got != head+want.String() {
		t.Errorf("Render() = %.500q…, want each image pinned", got)
	}
	if len(res.Images) != 3000 || len(res.Unpinned) != 0 {
		t.Errorf("Render() = %d images, %d unpinned, want 3000 and none", len(res.Images), len(res.Unpinned))
	}
}
