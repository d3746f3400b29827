package stream

import (
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// splitDocuments splits a stream with Split and returns its
// documents in the form kubeDocuments does: without the separator, CRLF
// read as LF, a line break after the last line, and without the documents
// that are empty then (which that reader skips).
func splitDocuments(in []byte) ([][]byte, error) {
	split, err := Split(in)
	if err != nil {
		return nil, err
	}
	var docs [][]byte
	for _, d := range split {
		var b []byte
		for l := range bytes.Lines(d.Raw[d.Sep:]) {
			if t, ok := bytes.CutSuffix(l, []byte("\n")); ok {
				l = append(bytes.TrimSuffix(t, []byte("\r")), '\n')
			} else {
				l = append(l, '\n')
			}
			b = append(b, l...)
		}
		if len(b) > 0 {
			docs = append(docs, b)
		}
	}
	return docs, nil
}

// checkSplitAsKubernetes fails the test unless Split cuts in where
// Kubernetes' YAML reader does, and refuses what it refuses.
func checkSplitAsKubernetes(t *testing.T, in []byte) {
	t.Helper()
	want, wantErr := kubeDocuments(in)
	got, err := splitDocuments(in)
	switch {
	case wantErr != nil && err == nil:
		t.Fatalf("Split(%q) split a stream that Kubernetes' YAML reader refuses (%v)", in, wantErr)
	case wantErr == nil && err != nil:
		t.Fatalf("Split(%q) = %v, which Kubernetes' YAML reader splits into %q", in, err, want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Split documents (-Kubernetes' YAML reader +Split):\n%s", diff)
	}
}

// TestSplitStreamAsKubernetes checks that Split cuts every golden
// file and odd input, and each of separatorCases, where Kubernetes' YAML
// reader does, and refuses what that reader refuses.
func TestSplitStreamAsKubernetes(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"oddinput", "tags"} {
		more, err := filepath.Glob(filepath.Join("..", "testdata", dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, more...)
	}
	if len(files) < 60 {
		t.Fatalf("found %d golden and input files, want them all", len(files))
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			checkSplitAsKubernetes(t, b)
		})
	}
	for _, tc := range separatorCases {
		t.Run(tc.desc, func(t *testing.T) {
			checkSplitAsKubernetes(t, []byte(tc.in))
		})
	}
}

// FuzzSplitAsKubernetes checks that Split cuts any stream where
// Kubernetes' YAML reader does, refuses what it refuses, and loses no
// byte (testdata/fuzz/FuzzSplitAsKubernetes holds the hostile seeds).
func FuzzSplitAsKubernetes(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		t.Parallel() // the seed corpus in parallel (no effect when fuzzing)
		checkSplitAsKubernetes(t, in)
		docs, err := Split(in)
		if err != nil {
			return
		}
		var joined []byte
		for _, d := range docs {
			joined = append(joined, d.Raw...)
		}
		if !bytes.Equal(joined, in) {
			t.Fatalf("Split(%q): the documents do not add up to the input", in)
		}
	})
}

// mustSplit is Split for streams that it must split.
func mustSplit(t testing.TB, in []byte) []*Document {
	t.Helper()
	docs, err := Split(in)
	if err != nil {
		t.Fatalf("Split(%q) = %v", in, err)
	}
	return docs
}

// FuzzSplitStream checks that splitting a stream loses no byte, that
// each document knows its number, its first line and its head, and that
// Estimate bounds the nodes of each document.
func FuzzSplitStream(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		docs, err := Split(in)
		if err != nil {
			return // FuzzSplitAsKubernetes checks the refusals
		}
		var joined []byte
		for i, d := range docs {
			if n, est := countNodes(d.Body()), d.Estimate(); n > est {
				t.Fatalf("Estimate(%q) = %d, but it parses into %d nodes", d.Body(), est, n)
			}
			if d.Index != i+1 || d.Sep > d.Head || d.Head > len(d.Raw) {
				t.Fatalf("document %d: index %d, separator %d and head %d of %d bytes", i+1, d.Index, d.Sep, d.Head, len(d.Raw))
			}
			if want := 1 + bytes.Count(joined, []byte("\n")); d.Line != want {
				t.Fatalf("document %d starts at line %d, want %d", d.Index, d.Line, want)
			}
			// Every document but the first starts with the separator
			// that ended the one before, a whole line.
			sep := d.Raw[:d.Sep]
			nl := bytes.IndexByte(sep, '\n')
			switch {
			case i == 0 && d.Sep != 0:
				t.Fatalf("the first document starts with separator %q", sep)
			case i > 0 && (!bytes.HasPrefix(sep, []byte("---")) || (nl >= 0 && nl != len(sep)-1) || (nl < 0 && d.Sep != len(d.Raw))):
				t.Fatalf("document %d starts with separator %q, not one line that starts with ---: %q", d.Index, sep, d.Raw)
			}
			joined = append(joined, d.Raw...)
		}
		if !bytes.Equal(joined, in) {
			t.Fatalf("documents do not add up to the input")
		}
	})
}

// kubeDocuments splits a stream as Kubernetes' YAML reader does: the
// YAMLReader of k8s.io/apimachinery, through which kubectl, Helm's kube
// client and Argo CD read manifests. Each document is as that reader
// returns it: without its "---" line, every line ending in LF.
func kubeDocuments(in []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(in)))
	var docs [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, bytes.Clone(d))
	}
}

// separatorCases are streams whose lines start with "---", or that hold
// what some other reader takes for the end or the start of a document,
// each as Kubernetes' YAML reader must cut it.
var separatorCases = []struct {
	desc, in string
}{
	{"a ConfigMap key ---#: before an indented Deployment", configMapDashKey},
	{"--- # Source:", "--- # Source: c/templates/a.yaml\nkind: A\n--- # Source: c/templates/b.yaml\nkind: B\n"},
	{"---#", "kind: A\n---#\nkind: B\n---# x\nkind: C\n"},
	{"--- then a tab", "kind: A\n---\t\nkind: B\n---\t# c\nkind: C\n"},
	{"--- then Unicode blanks", "kind: A\n---\u00a0\nkind: B\n---\u3000#\nkind: C\n---\v\fkind: D\n"},
	{"CRLF", "---\r\nkind: A\r\n---\r\nkind: B\r\n--- # c\r\nkind: C\r\n"},
	{"a byte order mark", "\ufeff---\nkind: A\n---\nkind: B\n"},
	{"a byte order mark before a later ---", "kind: A\n\ufeff---\nkind: B\n"},
	{"--- |", "kind: A\n--- |\n  text\n"},
	{"--- !!map", "kind: A\n--- !!map\nkind: B\n"},
	{"--- {json}", "kind: A\n--- {\"kind\": \"B\"}\n"},
	{"----", "kind: A\n----\nkind: B\n"},
	{"a key that starts with ---", "---x: 1\n"},
	{"...", "kind: A\n...\nkind: B\n"},
	{"... then ---", "kind: A\n...\n---\nkind: B\n... # c\n"},
	{"--- after a lone CR", "kind: A\r---\rkind: B\n"},
	{"--- at the end without a line break", "kind: A\n---"},
	{"--- then a comment at the end", "kind: A\n--- # c"},
	{"only separators", "---\n---\n\n---\n"},
	{"indented ---", "kind: A\n  ---\nkind: B\n ---#\n"},
	{"--- inside a block scalar", "kind: A\ndata:\n  x: |\n    ---\n    y\n---\nkind: B\n"},
	{"a long ---# line", "kind: A\n---#" + strings.Repeat("x", 9000) + "\nkind: B\n"},
	{"a long line, then ---", strings.Repeat("y", 4095) + "\r\n---\r\nkind: B\n"},
	{"invalid UTF-8 after ---", "kind: A\n---\xff\nkind: B\n"},
	{"two JSON objects in a row", `{"kind": "A"}{"kind": "B"}` + "\n" + `{"kind": "C"}`},
	{"empty", ""},
}

// configMapDashKey is a ConfigMap whose key "---#" holds, indented, a
// Deployment: one object to a YAML parser, a ConfigMap and a Deployment
// to Kubernetes' YAML reader, which cuts at "---" followed by "#".
var configMapDashKey = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n---#:\n" +
	"  apiVersion: apps/v1\n  kind: Deployment\n  metadata:\n    name: web\n  spec:\n    template:\n      spec:\n        containers:\n        - name: app\n          image: registry.example/app:1\n"
