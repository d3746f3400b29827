package renderer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// configMap is the start of a ConfigMap from a Helm template, its data
// next: line 8 of the stream is its first entry (rendered line 6).
const configMap = "---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n"

// TestUnreadableRefused renders streams with a document that Kubernetes
// could not read and that holds no image field. Each is refused as a
// document with an image field is (parse): the one line that names the
// document, its template and the line, and no output; with quickValid
// and without it, and with the word "image" in a comment, which sends
// the document down the path of those that may hold an image.
func TestUnreadableRefused(t *testing.T) {
	t.Parallel()
	pinned := "---\n# Source: c/templates/web.yaml\n" + strings.Replace(deployment, "IMAGE", "registry.example/app:1@"+dg("x"), 1)
	for _, tc := range []struct {
		desc, in, want string
	}{
		{
			desc: "an unclosed flow sequence",
			in:   "foo: [\n",
			want: "document 1, line 1: malformed YAML: did not find expected node content",
		},
		{
			desc: "an unclosed flow sequence in a ConfigMap after a Deployment",
			in:   pinned + configMap + "  a: [\n",
			want: "document 2 (c/templates/cm.yaml), line 20 (rendered line 6 of the template): malformed YAML: did not find expected node content",
		},
		{
			desc: "an unclosed flow mapping",
			in:   configMap + "  a: {b: c\n",
			want: "document 1 (c/templates/cm.yaml), line 7 (rendered line 5 of the template): malformed YAML: did not find expected ',' or '}'",
		},
		{
			desc: "an unterminated double quote",
			in:   configMap + "  a: \"abc\n  b: c\n",
			want: "document 1 (c/templates/cm.yaml), line 8 (rendered line 6 of the template): malformed YAML: found unexpected end of stream",
		},
		{
			desc: "an unterminated single quote",
			in:   configMap + "  a: 'abc\n",
			want: "document 1 (c/templates/cm.yaml), line 8 (rendered line 6 of the template): malformed YAML: found unexpected end of stream",
		},
		{
			desc: "a key indented under a scalar",
			in:   configMap + "  a: b\n    c: d\n",
			want: "document 1 (c/templates/cm.yaml), line 9 (rendered line 7 of the template): malformed YAML: mapping values are not allowed in this context",
		},
		{
			desc: "a tab as indentation",
			in:   configMap + "\tb: c\n",
			want: "document 1 (c/templates/cm.yaml), line 8 (rendered line 6 of the template): malformed YAML: found character that cannot start any token",
		},
		{
			desc: "a tab as indentation in a block scalar",
			in:   configMap + "  a: |\n    x\n\ty\n",
			want: "document 1 (c/templates/cm.yaml), line 8 (rendered line 6 of the template): malformed YAML: found a tab character where an indentation space is expected",
		},
		{
			desc: "a block scalar's line less indented than its first",
			in:   configMap + "  a: |\n      x\n    y\n",
			want: "document 1 (c/templates/cm.yaml), line 7 (rendered line 5 of the template): malformed YAML: did not find expected key",
		},
		{
			desc: "CRLF line breaks",
			in:   "a: [\r\nb: c\r\n",
			want: "document 1, line 2: malformed YAML: did not find expected ',' or ']'",
		},
		{
			desc: "a byte order mark",
			in:   "\ufeffa: [\n",
			want: "document 1, line 1: malformed YAML: did not find expected node content",
		},
		{
			desc: "a scalar",
			in:   "---\n# Source: c/templates/notes.yaml\nhello\n",
			want: "document 1 (c/templates/notes.yaml), line 3 (rendered line 1 of the template): want a Kubernetes object (a mapping), found a scalar",
		},
		{
			desc: "a sequence",
			in:   "a: 1\n---\n- a\n- b\n",
			want: "document 2, line 3: want a Kubernetes object (a mapping), found a sequence",
		},
		{
			desc: "YAML after an end marker",
			in:   "a: 1\n...\nb: 2\n",
			want: "document 1, line 2: YAML after the end of the document, which Kubernetes (kubectl, Helm, Argo CD) never reads: it reads only the first YAML document between two lines that start with \"---\"",
		},
		{
			desc: "YAML after an end marker right after ---",
			in:   "---\n...\nb: 2\n",
			want: "document 1, line 3: YAML after the end of the document, which Kubernetes (kubectl, Helm, Argo CD) never reads: it reads only the first YAML document between two lines that start with \"---\"",
		},
		{
			desc: "an end marker alone after a separator",
			in:   "a: 1\n---\n...\n",
			want: "document 2: malformed YAML: did not find expected node content",
		},
		{
			desc: "more JSON after the object",
			in:   `{"apiVersion": "v1", "kind": "ConfigMap"} {"kind": "Secret"}`,
			want: "document 1: more JSON after the document's object: digestpin reads one object a document; put a \"---\" line between objects",
		},
		{
			desc: "a JSON escape that YAML lacks",
			in:   `{"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b\/c"}}`,
			want: `document 1, line 1: the JSON escape \/, which YAML decoders (the API server's sigs.k8s.io/yaml too) refuse; write the character itself`,
		},
		{
			desc: "nesting 20000 levels deep",
			in:   "a: " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n",
			want: "document 1: malformed YAML: exceeded max depth of 10000",
		},
		{
			desc: "bytes that are not UTF-8",
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\xff\xfe\n",
			want: "document 1, line 4: malformed YAML: byte 0xff is not UTF-8 (digestpin reads UTF-8 only)",
		},
		{
			desc: "a control character",
			in:   configMap + "  a: b\x01\n",
			want: "document 1 (c/templates/cm.yaml), line 8 (rendered line 6 of the template): malformed YAML: control character U+0001 is not allowed",
		},
		{
			desc: "an alias of no anchor",
			in:   "a: *x\n",
			want: "document 1: malformed YAML: unknown anchor 'x' referenced",
		},
		{
			desc: "an alias inside the node it names",
			in:   "a: &x [*x]\n",
			want: "document 1, line 1: alias *x is inside the node it names",
		},
		{
			// Not in the subset that quickValid reads without a tree,
			// which is never refused for its size: it leaves a "?"
			// (a key in a flow sequence) to yaml.v3.
			desc: "more nodes than a document may parse into",
			in:   "a: [?x," + strings.Repeat("x,", MaxNodes/3) + "x]\n",
			want: "document 1: the document may hold up to 1048592 YAML nodes (estimated from its 699060 bytes), more than digestpin parses in one document (MaxNodes 1048576)",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			for _, noQuick := range []bool{false, true} {
				res, err := (&Renderer{Resolver: newFixed(), noQuick: noQuick}).Render(context.Background(), []byte(tc.in))
				if err == nil || err.Error() != tc.want {
					t.Errorf("Render(%.60q) (noQuick %v) = %v, want %s", tc.in, noQuick, err, tc.want)
				}
				if res.Bytes() != nil {
					t.Errorf("Render(%.60q) returned output with its error", tc.in)
				}
			}
			// The documents as if they might hold an image field: parse
			// refuses them alike.
			var errs []error
			for _, d := range mustSplit(t, []byte(tc.in)) {
				d.holds = 1
				if _, err := (&Renderer{}).parse(d); err != nil {
					errs = append(errs, err)
				}
			}
			if err := errors.Join(errs...); err == nil || err.Error() != tc.want {
				t.Errorf("parse(%.60q) = %v, want %s", tc.in, err, tc.want)
			}
		})
	}
}

// TestUnreadableRefusedEach refuses every document that Kubernetes could
// not read, each on its line of the error.
func TestUnreadableRefusedEach(t *testing.T) {
	t.Parallel()
	in := configMap + "  a: [\n" + configMap + "  b: c\n" + configMap + "  d: 'e\n"
	_, err := (&Renderer{}).Render(context.Background(), []byte(in))
	want := "document 1 (c/templates/cm.yaml), line 8 (rendered line 6 of the template): malformed YAML: did not find expected node content\n" +
		"document 3 (c/templates/cm.yaml), line 24 (rendered line 22 of the template): malformed YAML: found unexpected end of stream"
	if err == nil || err.Error() != want {
		t.Errorf("Render() = %v, want\n%s", err, want)
	}
}

// TestReadablePassThrough renders documents without an image field that
// Kubernetes reads, odd ones too, and YAML that is no Kubernetes object:
// each comes out as it came in, with quickValid and without it.
func TestReadablePassThrough(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ desc, in string }{
		{"empty", ""},
		{"blank lines", "\n\n  \n"},
		{"a separator alone", "---\n"},
		{"separators alone", "---\n---\n\n---\n"},
		{"comments alone", "# a\n  # b\n"},
		{"a template that rendered nothing", "---\n# Source: c/templates/off.yaml\n---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\n"},
		{"an end marker right after ---", "---\n...\n"},
		{"an end marker right after --- with comments", "a: 1\n---\n---\n# c\n... # d\n# e\n"},
		{"an end marker at the end", "a: 1\n...\n# c\n"},
		{"null", "null\n---\n~\n"},
		{"a mapping that is no Kubernetes object", "foo: bar\nbaz: [1, 2]\n"},
		{"an indented mapping", "  a: b\n  c: d\n"},
		{"block scalars", configMap + "  a: |\n    x\n\n      y\n    # not a comment\n  b: >-\n    folded\n    text\n  c: |+\n\n    kept\n\n  d: |\n  e: |-\n\n\n  f: 1\n"},
		{"block scalars in a sequence", "a:\n- |\n  x\n- b: |\n    y\n  c: >\n    z\n"},
		{"a block scalar with a header comment", "a: | # c\n  x\n"},
		{"a block scalar with an indentation indicator", "a: |2\n    x\n"},
		{"a block scalar with tabs and Unicode", "a: |\n  x\ty\n  ünïcödé ✓ \U0001F600\n"},
		{"Unicode", "a: ünïcödé\n\"b\": 'ç'\n# ✓\n"},
		{"CRLF", configMap + "  a: b\r\n  c: |\r\n    d\r\n"},
		{"a byte order mark", "\ufeffapiVersion: v1\nkind: ConfigMap\n"},
		{"tabs", "a: {b: c,\tc: d}\t# x\ne: \"x\ty\"\n"},
		{"JSON", `{"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b/c\u00e9"}}`},
		{"anchors, aliases and merge keys", "a: &a {x: 1}\nb: *a\nc:\n  <<: *a\n  y: 2\n"},
		{"a repeated key", configMap + "  a: b\n  a: c\n"},
		{"tags", "a: !!str 1\nb: !custom x\n"},
		// A tree of it would be too large (MaxNodes), but quickValid
		// builds none.
		{"a large document in block style", configMap + "  a: |\n" + strings.Repeat("    {\"a\": [1, 2, 3], \"b\": {\"c\": \"d\"}},\n", 30000)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			for _, noQuick := range []bool{false, true} {
				res, err := (&Renderer{Resolver: newFixed(), noQuick: noQuick}).Render(context.Background(), []byte(tc.in))
				if err != nil {
					t.Fatalf("Render(%q) (noQuick %v) = %v", tc.in, noQuick, err)
				}
				if diff := cmp.Diff(tc.in, string(res.Bytes())); diff != "" {
					t.Errorf("Render(%q) (noQuick %v) changed it (-in +out):\n%s", tc.in, noQuick, diff)
				}
			}
		})
	}
}
