package renderer

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/renderer/stream"
)

// bom is the byte order mark a JSON document may start with.
var bom = []byte("\ufeff")

// TestJSONGoldenStaysJSON checks the JSON golden files (TestGolden
// compares them and checks that they are fixed points): every document
// written as JSON is JSON in the output, and the output of kubectl's one
// JSON object is one JSON object.
func TestJSONGoldenStaysJSON(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"kubectl-json", "json-stream"} {
		t.Run(name, func(t *testing.T) {
			in := testfiles.Read(t, filepath.Join("testdata", name+".input.yaml"))
			res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), in)
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			inDocs, outDocs := mustSplit(t, in), mustSplit(t, res.Bytes())
			if len(inDocs) != len(outDocs) {
				t.Fatalf("%d documents in, %d out", len(inDocs), len(outDocs))
			}
			var docs int
			for i := range inDocs {
				if stream.JSONStart(inDocs[i].Body()) < 0 {
					continue
				}
				docs++
				if stream.JSONStart(outDocs[i].Body()) < 0 {
					t.Errorf("document %d is no longer JSON:\n%s", i+1, outDocs[i].Raw)
				}
			}
			if docs == 0 {
				t.Fatal("no JSON document in the input")
			}
			if name == "kubectl-json" && !json.Valid(res.Bytes()) {
				t.Errorf("the output is not JSON:\n%s", res.Bytes())
			}
		})
	}
}

// TestJSONDocuments renders small JSON documents: the image and the
// annotation are written in JSON syntax, in the document's layout, and
// the output is JSON that the API server reads as the input but for the
// images and the checksum.
func TestJSONDocuments(t *testing.T) {
	t.Parallel()
	img := "registry.example/app:1"
	pinned := img + "@" + dg(img)
	sum := Checksum([]string{"app=" + pinned})
	for _, tc := range []struct {
		desc, in, want string
		mode           Mode
	}{
		{
			desc: "compact, without metadata in the template",
			in:   `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"IMG"}]}}}}`,
			want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"annotations":{"checksum/images":"SUM"}},"spec":{"containers":[{"name":"app","image":"PIN"}]}}}}`,
		},
		{
			desc: "spaced, with empty metadata",
			in:   `{"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {"containers": [{"name": "app", "image": "IMG"}]}}` + "\n",
			want: `{"apiVersion": "v1", "kind": "Pod", "metadata": {"annotations": {"checksum/images": "SUM"}}, "spec": {"containers": [{"name": "app", "image": "PIN"}]}}` + "\n",
		},
		{
			desc: "empty annotations, in digest mode",
			in:   `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": { }}, "spec": {"containers": [{"name": "app", "image": "IMG"}]}}`,
			want: `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"checksum/images": "DSUM"}}, "spec": {"containers": [{"name": "app", "image": "registry.example/app@DG"}]}}`,
			mode: ModeDigest,
		},
		{
			desc: "a stale checksum, in annotate mode",
			in:   `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"a": "b", "checksum/images": "old"}}, "spec": {"containers": [{"name": "app", "image": "IMG"}]}}`,
			want: `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"a": "b", "checksum/images": "SUM"}}, "spec": {"containers": [{"name": "app", "image": "IMG"}]}}`,
			mode: ModeAnnotate,
		},
		{
			desc: "indented with tabs and CRLF",
			in:   "{\r\n\t\"apiVersion\": \"v1\",\r\n\t\"kind\": \"Pod\",\r\n\t\"metadata\": {\r\n\t\t\"name\": \"p\"\r\n\t},\r\n\t\"spec\": {\"containers\": [{\"name\": \"app\", \"image\": \"IMG\"}]}\r\n}\r\n",
			want: "{\r\n\t\"apiVersion\": \"v1\",\r\n\t\"kind\": \"Pod\",\r\n\t\"metadata\": {\r\n\t\t\"annotations\": {\r\n\t\t\t\"checksum/images\": \"SUM\"\r\n\t\t},\r\n\t\t\"name\": \"p\"\r\n\t},\r\n\t\"spec\": {\"containers\": [{\"name\": \"app\", \"image\": \"PIN\"}]}\r\n}\r\n",
		},
		{
			desc: "an escaped image, encoded again with the document's indentation",
			in:   "# Source: c/t.json\n{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"p\"},\n  \"spec\": {\"containers\": [{\"name\": \"app\", \"image\": \"registry.example\\u002fapp:1\", \"ports\": [], \"env\": {}}]}\n}\n",
			want: "# Source: c/t.json\n{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",\n  \"metadata\": {\n    \"name\": \"p\",\n    \"annotations\": {\n      \"checksum/images\": \"SUM\"\n    }\n  },\n  \"spec\": {\n    \"containers\": [\n      {\n        \"name\": \"app\",\n        \"image\": \"PIN\",\n        \"ports\": [],\n        \"env\": {}\n      }\n    ]\n  }\n}\n",
		},
		{
			desc: "a Tekton Task (an image path)",
			in:   `{"apiVersion": "tekton.dev/v1", "kind": "Task", "metadata": {"name": "t"}, "spec": {"steps": [{"name": "a", "image": "IMG"}]}}`,
			want: `{"apiVersion": "tekton.dev/v1", "kind": "Task", "metadata": {"name": "t"}, "spec": {"steps": [{"name": "a", "image": "PIN"}]}}`,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			digestLine := "app=registry.example/app@" + dg(img)
			r := strings.NewReplacer("IMG", img, "PIN", pinned, "DSUM", Checksum([]string{digestLine}), "SUM", sum, "DG", dg(img))
			in, want := r.Replace(tc.in), r.Replace(tc.want)
			rr := &Renderer{Resolver: newFixed(), Mode: tc.mode}
			res, err := rr.Render(context.Background(), []byte(in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(want, string(res.Bytes())); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
			if stream.JSONStart([]byte(want)) < 0 {
				t.Errorf("the wanted output is not JSON:\n%s", want)
			}
			if tc.mode == "" {
				checkAsAPIServer(t, []byte(in), res.Bytes())
			}
			again, err := rr.Render(context.Background(), res.Bytes())
			if err != nil || string(again.Bytes()) != string(res.Bytes()) {
				t.Errorf("Render() changed its own output (err %v):\n%s", err, cmp.Diff(string(res.Bytes()), string(again.Bytes())))
			}
		})
	}
}

// TestJSONOddDocuments renders JSON documents written in the ways that
// JSON allows and a YAML reading could get wrong: escaped keys, a byte
// order mark, an existing checksum spelt with an escape, null or odd
// metadata, huge numbers, deep nesting. The output must be JSON (as
// encoding/json reads it), and read as the input but for the pinned
// image and the checksum.
func TestJSONOddDocuments(t *testing.T) {
	t.Parallel()
	img := "registry.example/app:1"
	deep := strings.Repeat(`{"a":`, 500) + "1" + strings.Repeat("}", 500)
	for _, tc := range []struct{ desc, in string }{
		{desc: "an escaped image key", in: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","im\u0061ge":"IMG"}]}}`},
		{desc: "an escaped spec key", in: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"sp\u0065c":{"containers":[{"name":"app","image":"IMG"}]}}`},
		{desc: "a byte order mark", in: "\ufeff" + `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","image":"IMG"}]}}`},
		{desc: "a byte order mark, indented", in: "\ufeff{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",\n  \"spec\": {\"containers\": [{\"name\": \"app\", \"image\": \"IMG\"}]}\n}\n"},
		{desc: "a stale checksum", in: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"annotations":{"checksum/images":"old"}},"spec":{"containers":[{"name":"app","image":"IMG"}]}}}}`},
		{desc: "a stale checksum with an escaped key", in: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"annotations":{"checksum\u002fimages":"old"}},"spec":{"containers":[{"name":"app","image":"IMG"}]}}}}`},
		{desc: "null annotations", in: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"annotations":null},"spec":{"containers":[{"name":"app","image":"IMG"}]}}}}`},
		{desc: "null metadata", in: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":null,"spec":{"containers":[{"name":"app","image":"IMG"}]}}}}`},
		{desc: "huge numbers", in: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":1E2,"x":12345678901234567890123456789,"y":-0.5e-3,"template":{"spec":{"containers":[{"name":"app","image":"IMG"}]}}}}`},
		{desc: "escapes elsewhere", in: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"yes","b":"0x10"}},"spec":{"containers":[{"name":"app","image":"IMG","args":["\"q\"","a\u0000b","\u00e9\t"]}]}}`},
		{desc: "deep nesting", in: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","image":"IMG"}],"x":` + deep + `}}`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := strings.ReplaceAll(tc.in, "IMG", img)
			r := &Renderer{Resolver: newFixed()}
			res, err := r.Render(context.Background(), []byte(in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			var got, want any
			if err := json.Unmarshal(bytes.TrimPrefix(res.Bytes(), bom), &got); err != nil {
				t.Fatalf("the output is not JSON: %v\n%s", err, res.Bytes())
			}
			if err := json.Unmarshal(bytes.TrimPrefix([]byte(in), bom), &want); err != nil {
				t.Fatalf("the input is not JSON: %v", err)
			}
			if bytes.HasPrefix([]byte(in), bom) != bytes.HasPrefix(res.Bytes(), bom) {
				t.Errorf("the byte order mark was not kept:\n%q", res.Bytes())
			}
			// What encoding/json reads is what the API server reads, but
			// for the pinned images and the checksum.
			checkAsAPIServer(t, []byte(in), res.Bytes())
			pinned := strings.ReplaceAll(string(res.Bytes()), img+"@"+dg(img), img)
			var unpinned any
			if err := json.Unmarshal(bytes.TrimPrefix([]byte(pinned), bom), &unpinned); err != nil {
				t.Fatal(err)
			}
			for _, s := range podSpecsOf(unpinned) {
				dropChecksum(s.holder)
			}
			for _, s := range podSpecsOf(want) {
				dropChecksum(s.holder)
			}
			if diff := cmp.Diff(want, unpinned); diff != "" {
				t.Errorf("encoding/json reads more than the image changed (-in +out):\n%s", diff)
			}
			again, err := r.Render(context.Background(), res.Bytes())
			if err != nil || !bytes.Equal(again.Bytes(), res.Bytes()) {
				t.Errorf("Render() changed its own output (err %v):\n%s", err, cmp.Diff(string(res.Bytes()), string(again.Bytes())))
			}
		})
	}
}

// TestJSONRefused checks the JSON documents that digestpin refuses, with
// the line and what to do: escapes that YAML has not (which the parser
// would name without a line), keys given twice however they are spelt.
func TestJSONRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, in string
		want     []string
	}{
		{
			desc: "an escaped slash",
			in:   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","image":"registry.example\/app:1"}]}}`,
			want: []string{`document 1, line 1: the JSON escape \/`, "write the character itself"},
		},
		{
			desc: "an escaped slash on line 3, after a comment",
			in:   "# Source: c/t.json\n{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"a\\\\\"},\n \"spec\": {\"containers\": [{\"name\": \"app\", \"image\": \"registry.example\\/app:1\"}]}}\n",
			want: []string{`document 1 (c/t.json), line 3 (rendered line 2 of the template): the JSON escape \/`},
		},
		{
			desc: "a surrogate pair",
			in:   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","image":"registry.example/app:1","args":["\ud83d\ude00"]}]}}`,
			want: []string{`document 1, line 1: the JSON escape \ud83d`},
		},
		{
			desc: "an image key given twice, once escaped",
			in:   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","image":"registry.example/app:1","im\u0061ge":"registry.example/other:1"}]}}`,
			want: []string{`document 1, line 1: Pod/p container "app": image is given twice`},
		},
		{
			desc: "a spec given twice, once escaped",
			in:   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"sp\u0065c":{"containers":[{"name":"app","image":"registry.example/app:1"}]},"spec":{"containers":[]}}`,
			want: []string{`document 1, line 1: Pod/p: spec is given twice`},
		},
		{
			desc: "annotations that are a list",
			in:   `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"annotations":[]},"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}}}`,
			want: []string{`document 1, line 1: Deployment/d: cannot write the checksum/images annotation: annotations is a sequence, want a mapping`},
		},
		{
			desc: "annotations that are a string",
			in:   `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"annotations":"x"},"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}}}`,
			want: []string{`annotations is str x, want a mapping`},
		},
		{
			desc: "metadata that is a number",
			in:   `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":0,"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}}}`,
			want: []string{`document 1, line 1: Deployment/d: cannot write the checksum/images annotation: metadata is int 0, want a mapping`},
		},
		{
			desc: "a checksum given twice",
			in:   `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"annotations":{"checksum/images":"a","checksum\u002fimages":"b"}},"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}}}`,
			want: []string{`document 1, line 1: Deployment/d: checksum/images is given twice`},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			wantRefused(t, &Renderer{Resolver: newFixed()}, tc.in, tc.want)
		})
	}
}

// TestJSONLayouts renders JSON documents laid out in many ways (blanks,
// tabs, line breaks and CRLF between tokens, a "# Source:" comment or a
// byte order mark before them), of the kinds of pod specs, of image paths
// with checksum paths, and Lists. Every output must be JSON, read by the
// API server as the input but for images and checksums, and render to
// itself. The layouts are random with a fixed seed; those that the API
// server's decoder refuses are not counted.
func TestJSONLayouts(t *testing.T) {
	t.Parallel()
	testfiles.Slow(t)
	docs := []string{
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{},"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"annotations":{"x":"y"}},"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"metadata":{"annotations":{}},"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]},"metadata":{"annotations":{"checksum/images":"x"}}}}}`,
		`{"apiVersion":"example.com/v1","kind":"Runner","metadata":{"name":"r"},"spec":{"runnerRef":"registry.example/r:1","jobs":[{"tool":"registry.example/a:1"},{"metadata":{"labels":{}},"tool":"registry.example/b:1"},{"metadata":{"annotations":{"z":"1"}},"tool":"registry.example/c:1"}]}}`,
		`{"apiVersion":"example.com/v1","kind":"Runner","spec":{"jobs":{"x":{"tool":"registry.example/a:1"}}}}`,
		`{"kind":"List","apiVersion":"v1","items":[{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"a","image":"registry.example/app:1"}]}},{"apiVersion":"tekton.dev/v1","kind":"Task","spec":{"steps":[{"image":"registry.example/b:1"}]}}]}`,
	}
	r := &Renderer{Resolver: newFixed(), ImagePaths: append(slices.Clip(kindpath.DefaultImages), fuzzImagePaths...), ChecksumPaths: fuzzChecksumPaths}
	rng := rand.New(rand.NewSource(1))
	blanks := []string{"", " ", "  ", "\t", "\n", "\n  ", "\n\t\t", " \n "}
	blank := func(crlf bool) string {
		b := blanks[rng.Intn(len(blanks))]
		if crlf {
			b = strings.ReplaceAll(b, "\n", "\r\n")
		}
		return b
	}
	counted := 0
	for i := range 600 {
		// Blanks after "{", "[" and ",", before "}" and "]", a space
		// around ":" and before ",", never inside strings.
		crlf := rng.Intn(3) == 0
		var b strings.Builder
		inString, escaped := false, false
		for _, c := range docs[i%len(docs)] {
			switch {
			case inString:
				inString = escaped || c != '"'
				escaped = !escaped && c == '\\'
				b.WriteRune(c)
				continue
			case strings.ContainsRune("}]", c) && rng.Intn(2) == 0:
				b.WriteString(blank(crlf))
			case strings.ContainsRune(",:", c) && rng.Intn(3) == 0:
				b.WriteString(" ")
			}
			b.WriteRune(c)
			switch {
			case c == '"':
				inString = true
			case c == ':' && rng.Intn(2) == 0:
				b.WriteString(" ")
			case strings.ContainsRune("{[,", c) && rng.Intn(2) == 0:
				b.WriteString(blank(crlf))
			}
		}
		var head string
		switch rng.Intn(4) {
		case 0:
			head = "# Source: c/t.json\n"
		case 1:
			head = "\ufeff"
		}
		doc := head + b.String()
		if !json.Valid([]byte(b.String())) {
			t.Fatalf("the test wrote a document that is not JSON: %q", doc)
		}
		if _, err := k8syaml.YAMLToJSON([]byte(doc)); err != nil {
			continue
		}
		counted++
		res, err := r.Render(context.Background(), []byte(doc))
		if err != nil {
			t.Fatalf("Render(%q) = %v", doc, err)
		}
		if !json.Valid(bytes.TrimPrefix(res.Bytes(), []byte(head))) {
			t.Fatalf("Render(%q) = %q, which is not JSON after %q", doc, res.Bytes(), head)
		}
		checkAsAPIServerWith(t, r, []byte(doc), res.Bytes())
		again, err := r.Render(context.Background(), res.Bytes())
		if err != nil || !bytes.Equal(again.Bytes(), res.Bytes()) {
			t.Fatalf("Render(%q) changed its own output %q (err %v):\n%q", doc, res.Bytes(), err, again.Bytes())
		}
	}
	if counted < 500 {
		t.Errorf("only %d of 600 layouts counted", counted)
	}
}
