package stream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/gen"
)

// fullParse parses body as parseFull does: one yaml.v3 document, or an
// error (also for a second document).
func fullParse(body []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(body))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("a second document, or YAML after the first: %w", err)
	}
	return &root, nil
}

// sameTree returns where two trees differ, comments aside, or "".
func sameTree(want, got *yaml.Node, path string) string {
	switch {
	case want == nil || got == nil:
		if want != got {
			return fmt.Sprintf("%s: %v, want %v", path, got, want)
		}
		return ""
	case want.Kind != got.Kind, want.Style != got.Style, want.Tag != got.Tag, want.Value != got.Value,
		want.Anchor != got.Anchor, want.Line != got.Line, want.Column != got.Column,
		(want.Alias == nil) != (got.Alias == nil), len(want.Content) != len(got.Content):
		return fmt.Sprintf("%s: kind %v style %v tag %q value %q anchor %q at %d:%d, %d children; want kind %v style %v tag %q value %q anchor %q at %d:%d, %d children",
			path, got.Kind, got.Style, got.Tag, got.Value, got.Anchor, got.Line, got.Column, len(got.Content),
			want.Kind, want.Style, want.Tag, want.Value, want.Anchor, want.Line, want.Column, len(want.Content))
	}
	for i := range want.Content {
		if d := sameTree(want.Content[i], got.Content[i], fmt.Sprintf("%s/%d", path, i)); d != "" {
			return d
		}
	}
	return ""
}

// checkQuick holds quickParse to yaml.v3 on body: when it reads body,
// yaml.v3 reads one document into the same tree. It reports whether
// quickParse read body.
func checkQuick(t *testing.T, body []byte) bool {
	t.Helper()
	got, ok := quickParse(body, nil)
	if !ok {
		return false
	}
	want, err := fullParse(body)
	if err != nil {
		t.Fatalf("quickParse(%q) read a document that yaml.v3 refuses: %v", body, err)
	}
	if d := sameTree(want, got, ""); d != "" {
		t.Fatalf("quickParse(%q) differs from yaml.v3 at %s", body, d)
	}
	return true
}

// TestQuickParse holds quickParse to yaml.v3 on small documents: those it
// must read (what Helm writes) and those it must leave to yaml.v3.
func TestQuickParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		quick bool
	}{
		{"a: b\n", true},
		{"# Source: x/y.yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {}\n", true},
		{"a:\n- b\n- c: d\n  e: f\n-\n- 'g'\n- \"h\" # c\nk: [\"--port\", '9090', 1, x.y]\nl: []\nm:\nn: ~\n", true},
		{"a:\n  b:\n    - c: 1\n      d: true\n  e: 2.5 # x\n\n  f: 'x y'\n", true},
		{"a: b:c\nd: e,f\ng: h#i\nj: -1\nk: --x\n", true},
		{"\"a b\": 1\n'c': 2\n", true},
		{"a: 0x1F\nb: 2024-01-01\nc: null\nd: .inf\ne: 1e3\nf: 010\n", true},
		{"  a: b\n  c: d\n", true},
		// Flow collections on one line, as charts write resources,
		// selectors and arguments.
		{"a: {b: c}\n", true},
		{"limits: {cpu: 500m, memory: 256Mi}\nl: {app.kubernetes.io/name: x-1, \"k.io/os\": 'linux'}\n", true},
		{"a: { b: 1 , c: true }\nd: { }\ne: [ ]\n", true},
		{"a:\n- {name: http, containerPort: 8080}\n- {}\n", true},
		{"a: {drop: [ALL], add: []}\nb: [[a, b], {c: d}, []]\n", true},
		{"args: [--port, \"8080\", -1, -.5, --x.y]\n", true},
		{"a: [/bin/app, ./x, .5, ..., /]\nb: {mountPath: /tls, c: .inf}\n", true},
		{"a: {b: {c: {d: e}}} # c\n", true},
		{"a: {1: x, true: y, null: z, ~x: w}\n", false}, // ~x is no word
		{"a: {1: x, true: y, null: z}\n", true},
		// Literal block scalars, as toYaml writes text over several
		// lines (configuration files in ConfigMaps).
		{"a: |\n  b\n", true},
		{"a: |-\n  b\n\n  c\n\n\nd: e\n", true},
		{"a: |\n\n  b\n    c\n      \n  \n  d\n", true},
		{"a:\n- |\n  b\n- |- # c\n  d\n", true},
		{"a:\n- b: |\n    c\n  d: e\n", true},
		{"a: |\n  # not a comment\n  b\n# c\nd: e\n", true},
		{"a: |  \n  {\"b\": \"c \\\"d\\\"\"}\n", true},
		{"a: |\r\n  b\r\n\r\n  c\r\n", true},
		{"a: |+\n  b\n", false},
		{"a: |2\n  b\n", false},
		{"a: |\n  b", false},
		{"a: |\nb: c\n", false},
		{"a: |\n\nb: c\n", false},
		{"a: |\n    \n  b\n", false},
		{"a: |\n  b\n c\n", false},
		{"a: |\n  b\n\tc\n", false},
		// CRLF line breaks.
		{"a: b\r\n", true},
		{"# c\r\na:\r\n  - b: c # d\r\n    e: [f, 'g']\r\n\r\nh: {i: j}\r\n", true},
		// Left to yaml.v3.
		{"a: &x b\nc: *x\n", false},
		{"a: !!str b\n", false},
		{"<<: {a: b}\n", false},
		{"a: >\n  b\n", false},
		{"a: b\n  c\n", false},
		{"a:\tb\n", false},
		{"a: \"\\x41\"\n", false},
		{"a: 'it''s'\n", false},
		{"a: é\n", false},
		{"a: b\n...\n", false},
		{"a: b\n---\nc: d\n", false},
		{"%YAML 1.2\n---\na: b\n", false},
		{"- a\n- b\n", false},
		{"a: b: c\n", false},
		{"a: [b,\n  c]\n", false},
		{"a: b\na: c\n", true}, // yaml.v3 reads it; get refuses it
		{"a:\n  - b\n  c: d\n", false},
		{"? a\n: b\n", false},
		{"a: b\n c: d\n", false},
		{"a: [b, ]\n", false},
		{"a: '\n", false},
		{"a: - b\n", false},
		{"a: b\r", false},
		{"a: b\rc: d\n", false},
		{"a: b\r\r\n", false},
		{"a: {b}\n", false},
		{"a: {b: }\n", false},
		{"a: {b:c}\n", false},
		{"a: {\"b\":c}\n", false},
		{"a: {b: c,}\n", false},
		{"a: {b: c d}\n", false},
		{"a: [b: c]\n", false},
		{"a: {b: c\n  , d: e}\n", false},
		{"a: {b: c}}\n", false},
		{"a: {b: c} d\n", false},
		{"a: {b: c}#d\n", false},
		{"a: {b: c #d}\n", false},
		{"a: {? b: c}\n", false},
		{"a: {b: &x c, d: *x}\n", false},
		{"a: {b: !!str c}\n", false},
		{"a: {<<: {b: c}}\n", false},
		{"a: {b: 'it''s'}\n", false},
		{"a: {b: \"\\n\"}\n", false},
		{"a: [- b]\n", false},
		{"a: [-]\n", false},
		{"a: [a, -]\n", false},
		{"a: {b: c}: d\n", false},
		{"{a: b}\n", false},
		{"a: {b: c}\n  d: e\n", false},
		{"a: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n", false}, // deeper than maxQuickDepth
		{"a: " + strings.Repeat("[", 60) + strings.Repeat("]", 60) + "\n", true},
		{"a: <<\n", false}, // yaml.v3 tags a plain << as a merge key
	} {
		if got := checkQuick(t, []byte(tc.in)); got != tc.quick {
			t.Errorf("quickParse(%q) read it: %v, want %v", tc.in, got, tc.quick)
		}
	}
}

// TestQuickParseStreams holds quickParse to yaml.v3 on every document of
// the test streams, and checks that it reads Helm's usual output: every
// Deployment of the benchmark stream.
func TestQuickParseStreams(t *testing.T) {
	t.Parallel()
	read, all := 0, 0
	for _, b := range testStreams(t) {
		docs, err := Split(b)
		if err != nil {
			continue
		}
		for _, d := range docs {
			all++
			if checkQuick(t, d.Body()) {
				read++
			}
		}
	}
	t.Logf("quickParse read %d of %d documents", read, all)
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 30, Pinned: true}); err != nil {
		t.Fatal(err)
	}
	for _, d := range mustSplit(t, buf.Bytes()) {
		if bytes.Contains(d.Raw, []byte("kind: Deployment")) && !checkQuick(t, d.Body()) {
			t.Fatalf("quickParse does not read the benchmark's Deployment:\n%s", d.Body())
		}
	}
}

// testStreams returns the test streams: the renderer's inputs and golden
// files, and the end-to-end tests' helm template output.
func testStreams(t *testing.T) [][]byte {
	t.Helper()
	files, _ := filepath.Glob("../testdata/*.yaml")
	more, _ := filepath.Glob("../testdata/*/*.yaml")
	top, _ := filepath.Glob("../../testdata/*/*.yaml")
	var out [][]byte
	for _, p := range append(append(files, more...), top...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestQuickChars holds quickChars, which reads eight bytes at a time, to
// its rule read a character at a time, on every byte value at every
// offset of a word and on random text near the edges of the rule.
func TestQuickChars(t *testing.T) {
	t.Parallel()
	ok := func(b []byte) bool {
		for _, r := range string(b) {
			switch {
			case r == '\n', r >= 0x20 && r < 0x7f:
			case r < 0xa0, r == 0x2028, r == 0x2029, r == 0xfeff, r == 0xfffe, r == 0xffff, r == utf8.RuneError:
				return false
			}
		}
		return true
	}
	check := func(b []byte) {
		t.Helper()
		if got, want := quickChars(b), ok(b); got != want {
			t.Fatalf("quickChars(%q) = %v, want %v", b, got, want)
		}
	}
	for c := range 256 {
		for at := range 17 {
			b := bytes.Repeat([]byte("a"), 17)
			b[at] = byte(c)
			check(b)
		}
	}
	rnd := rand.New(rand.NewPCG(28, 3))
	alphabet := []string{"a", " ", "~", "\n", "\t", "\r", "\x00", "\x1f", "\x7f", "\xff", "\xc2\x85", "\xc2\xa0", "é", "\u2028", "\ufeff", "\U0001F600", "\xed\xa0\x80"}
	for range 20000 {
		var b []byte
		for range rnd.IntN(40) {
			b = append(b, alphabet[rnd.IntN(len(alphabet))]...)
		}
		check(b)
	}
}

// FuzzQuickValid holds quickValid to yaml.v3 on arbitrary documents.
func FuzzQuickValid(f *testing.F) {
	addSeeds(f)
	for _, s := range []string{
		"a: |\n  b\n\n  # c\nd: >-\n    e\n",
		"a:\n- |+\n  b\n- c: |\n    d\n  e: f\n",
		"a: |\n\n   \n  b\n",
		"a: é ✓ \U0001F600\n",
		"a: 'x\n\ty'\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		docs, err := Split(in)
		if err != nil {
			checkQuickValid(t, in)
			return
		}
		for _, d := range docs {
			checkQuickValid(t, d.Body())
		}
	})
}

// checkQuickValid holds quickValid to yaml.v3 on body: when it says body
// is valid, yaml.v3 reads one document that is a mapping, or nothing. It
// reports what quickValid said.
func checkQuickValid(t *testing.T, body []byte) bool {
	t.Helper()
	if !quickValid(body) {
		return false
	}
	root, err := fullParse(body)
	if errors.Is(err, io.EOF) {
		return true
	}
	if err != nil {
		t.Fatalf("quickValid(%q) = true, but yaml.v3 refuses it: %v", body, err)
	}
	if obj := rootContent(root); obj == nil || obj.Kind != yaml.MappingNode {
		t.Fatalf("quickValid(%q) = true, but yaml.v3 reads no mapping", body)
	}
	return true
}

// TestQuickValid holds quickValid to yaml.v3 on small documents: those
// it must read (what Helm writes) and those it must leave to yaml.v3.
func TestQuickValid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		quick bool
	}{
		{"", true},
		{"# c\n\n", true},
		{"a: b\n", true},
		{"a:\n- b\n- c: d\n  e: [f, 'g']\n", true},
		{"a: |\n  b\n", true},
		{"a: >-\n  b\n\n  c\n# c\nd: e\n", true},
		{"a: |+\n\n  b\n", true},
		{"a: |\nb: c\n", true},
		{"a:\n  b: |\n    # c\n     d\n  e: f\n", true},
		{"a:\n- |\n  b\n- c\n", true},
		{"a: é ✓\n", true},
		{"a: b: c\n", false},
		{"a: |\n    b\n  c\n", false},
		{"a: |\n    \n  b\n", false}, // a blank line more indented than the first content
		{"a: |2\n  b\n", false},
		{"a: |-+\n  b\n", false},
		{"a: |x\n", false},
		{"a: |#c\n  b\n", false},
		{"a: |\n  b\n\tc\n", false},
		{"a: b\n...\n", false},
		{"...\n", false},
		{"- a\n", false},
		{"a\n", false},
		{"a: b\r\n", true},
		{"a: |\r\n  b\r\n\r\n  c\r\nd: {e: [f]}\r\n", true},
		{"a: b\r", false},
		{"a: b\rc\n", false},
		{"a: é\r\n", true},
		{"a: {b: c, d: [e, 'f']}\n", true},
		{"a: {b: c\n", false},
		{"a: \u2028\n", false},
		{"a: \u0085\n", false},
		{"a: \ufeff\n", false},
		{"\ufeffa: b\n", false},
		{"a: b\xff\n", false},
	} {
		if got := checkQuickValid(t, []byte(tc.in)); got != tc.quick {
			t.Errorf("quickValid(%q) = %v, want %v", tc.in, got, tc.quick)
		}
	}
}

// TestQuickValidStreams holds quickValid to yaml.v3 on every document of
// the test streams, and checks that it reads the documents without an
// image of the benchmark stream (Services, ConfigMaps with a block
// scalar): checking them must cost little.
func TestQuickValidStreams(t *testing.T) {
	t.Parallel()
	for _, b := range testStreams(t) {
		docs, err := Split(b)
		if err != nil {
			continue
		}
		for _, d := range docs {
			checkQuickValid(t, d.Body())
		}
	}
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 30}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range mustSplit(t, buf.Bytes()) {
		if !bytes.Contains(d.Body(), []byte("image")) {
			n++
			if !checkQuickValid(t, d.Body()) {
				t.Errorf("quickValid does not read the benchmark's document:\n%s", d.Body())
			}
		}
	}
	if n < 20 {
		t.Fatalf("the benchmark stream has %d documents without an image, want its Services and ConfigMaps", n)
	}
}

// FuzzQuickParse holds quickParse to yaml.v3 on arbitrary documents.
func FuzzQuickParse(f *testing.F) {
	addSeeds(f)
	for _, s := range []string{"a: b\n", "a:\n- b: c\n  d: [e, 'f']\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		docs, err := Split(in)
		if err != nil {
			checkQuick(t, in)
			return
		}
		for _, d := range docs {
			checkQuick(t, d.Body())
		}
	})
}

// TestQuickParseRandom holds quickParse to yaml.v3 on documents made of
// random lines near the subset it reads: keys, entries, indentations and
// values, with the characters where readings part (":", "#", quotes,
// brackets, indicators, blanks, tabs, non-ASCII). Mutating bytes (the
// fuzz target) rarely builds such lines; this builds thousands a second.
func TestQuickParseRandom(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(28, 1))
	pick := func(s ...string) string { return s[rnd.IntN(len(s))] }
	value := func() string {
		switch rnd.IntN(4) {
		case 0:
			return pick("", " ", "  ", "#c", " # c", "\t")
		case 1:
			return pick("a", "b c", "1", "-1", "0x1F", "1e3", ".5", "true", "False", "null", "~", "y", "no", "2024-01-01", "<<", "-", "--x", "a:b", "a: b", "a:", "a #b", "a#b", "...", "---", "é", "\"a\"", "'a'", "\"a\\\"b\"", "'it''s'", "\"a #b\"", "'a: b'", "[a, b]", "[\"--port\", \"9090\"]", "[]", "[ ]", "[a,]", "[a, [b]]", "{}", "{ }", "{a: b}", "{a: b, c: [d, 'e']}", "{a: {b: c}}", "{a: /x, .b: -1}", "{a:b}", "{a: b c}", "{a}", "[/x, --y, -]", "[{a: b}, []]", "|-", "| #c", "|+", "|2", "&x a", "*x", "!!str a", "|", ">-", "@a", "`a", "%a", "?", "? a", ":", ": a", "a,b", "a]", "}", "\"", "'", "\"a", "a\"", "a'b", "a  b", "a ", "nginx:1.27@sha256:0123")
		case 2:
			return pick("a", "x.y/z", "app.kubernetes.io/name", "1", "true", "\"k\"", "'k'", "k k", "-k", "k-", "_k", ".k", "/k", "k:k", "\"k\\\"\"")
		}
		return ""
	}
	line := func() string {
		indent := strings.Repeat(" ", []int{0, 0, 0, 1, 2, 2, 2, 3, 4, 4, 6, 8}[rnd.IntN(12)])
		switch rnd.IntN(9) {
		case 0:
			return indent + "- " + value()
		case 1:
			return indent + "- " + pick("a", "name", "k") + ": " + value()
		case 2:
			return indent + "-"
		case 3:
			return indent + pick("# c", "", "---", "...", "%YAML 1.2", "\t")
		case 4:
			return indent + pick("a", "b", "name", "image", "\"q\"", "'s'") + ":"
		}
		return indent + pick("a", "b", "c", "name", "image", "spec", "1", "true", "\"q\"", "'s'", "k.x/y") + pick(": ", ":", ":  ") + value()
	}
	read := 0
	const docs = 20000
	for range docs {
		var b strings.Builder
		for range 1 + rnd.IntN(8) {
			b.WriteString(line())
			b.WriteString(pick("\n", "\n", "\n", "\r\n", ""))
		}
		if checkQuick(t, []byte(b.String())) {
			read++
		}
	}
	// Holding quickParse to yaml.v3 on documents it leaves alone proves
	// nothing: enough must be read for the test to mean something.
	if read < docs/30 {
		t.Fatalf("quickParse read %d of %d random documents, want at least %d", read, docs, docs/30)
	}
	t.Logf("quickParse read %d of %d random documents", read, docs)
}
