package renderer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

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

// TestDashKeyDeployment renders a ConfigMap key "---#" before an indented
// Deployment: Kubernetes reads a Deployment there, which must be pinned.
func TestDashKeyDeployment(t *testing.T) {
	t.Parallel()
	r := &Renderer{Resolver: newFixed()}
	res, err := r.Render(context.Background(), []byte(configMapDashKey))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	if want := "registry.example/app:1@" + dg("registry.example/app:1"); !strings.Contains(string(res.Bytes()), want) {
		t.Errorf("Render() left the Deployment unpinned:\n%s", res.Bytes())
	}
	if len(res.Images) != 1 || len(res.Images[0].Workloads) != 1 || res.Images[0].Workloads[0].Kind != "Deployment" {
		t.Errorf("Render() images = %+v, want the Deployment's", res.Images)
	}
	checkAsAPIServer(t, []byte(configMapDashKey), res.Bytes())
	again, err := r.Render(context.Background(), res.Bytes())
	if err != nil || !bytes.Equal(again.Bytes(), res.Bytes()) {
		t.Errorf("Render(output) = %v, changed its own output:\n%s", err, cmp.Diff(string(res.Bytes()), string(again.Bytes())))
	}
}

// TestSeparatorRefused renders streams that Kubernetes' YAML reader
// refuses, or reads only part of: each must fail with a line naming where.
func TestSeparatorRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, in string
		want     []string // substrings of the error
	}{
		{
			desc: "--- !!map",
			in:   "apiVersion: v1\nkind: ConfigMap\n--- !!map\n" + strings.Replace(pod, "IMAGE", "registry.example/app:1", 1),
			want: []string{"document 2, line 3: ", `"--- !!map"`, "refuses one followed by anything but a comment"},
		},
		{
			desc: "--- {json}",
			in:   "apiVersion: v1\nkind: ConfigMap\n--- {\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"spec\": {\"containers\": [{\"name\": \"a\", \"image\": \"a:1\"}]}}\n",
			want: []string{"document 2, line 3: ", `"--- {\"apiVersion\": \"v1\"`},
		},
		{
			desc: "a Pod after an end marker right after ---",
			in:   "---\n...\n" + strings.Replace(pod, "IMAGE", "registry.example/app:1", 1),
			want: []string{"document 1, line 3: YAML after the end of the document, which Kubernetes (kubectl, Helm, Argo CD) never reads"},
		},
		{
			desc: "--- | in a document without images",
			in:   "apiVersion: v1\nkind: ConfigMap\n--- |\n  text\n",
			want: []string{"document 2, line 3: ", `"--- |"`},
		},
		{
			desc: "a key that starts with ---",
			in:   "# Source: c/templates/a.yaml\n---x: 1\n",
			// The comment is content: the line would start document 2.
			want: []string{"document 2, line 2: ", `"---x: 1"`},
		},
		{
			desc: "a Pod after an end marker",
			in:   "apiVersion: v1\nkind: ConfigMap\n...\n" + strings.Replace(pod, "IMAGE", "registry.example/app:1", 1),
			want: []string{"document 1, line 3: YAML after the end of the document", "reads only the first"},
		},
		{
			desc: "a Pod after --- and a lone CR",
			in:   "apiVersion: v1\nkind: ConfigMap\r---\r" + strings.Replace(pod, "IMAGE", "registry.example/app:1", 1),
			want: []string{"document 1, line 3: a second YAML document starts here"},
		},
		{
			// kubectl reads a stream that starts with "{" as JSON
			// objects, one after the other; digestpin refuses them.
			desc: "two JSON objects in a row",
			in:   `{"apiVersion": "v1", "kind": "ConfigMap"}` + "\n" + `{"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "a", "image": "a:1"}]}}` + "\n",
			want: []string{"document 1, line 1: more JSON after the document's object", `put a "---" line between objects`},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			res, err := renderWithin(t, &Renderer{Resolver: newFixed()}, tc.in)
			if err == nil {
				t.Fatalf("Render() = nil error, want %q; output:\n%s", tc.want, res.Bytes())
			}
			if res.Bytes() != nil {
				t.Errorf("Render() returned output with error %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Render() = %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("Render() = %q, want one line", err)
			}
		})
	}
}

// mustSplit is documents for streams that it must split.
func mustSplit(t testing.TB, in []byte) []*document {
	t.Helper()
	docs, err := documents(in)
	if err != nil {
		t.Fatalf("documents(%q) = %v", in, err)
	}
	return docs
}

func ExampleSplit() {
	docs, err := Split([]byte("---\n# Source: c/templates/a.yaml\nkind: ConfigMap\n---# b\nkind: Secret\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range docs {
		fmt.Printf("%q\n", d)
	}
	_, err = Split([]byte("kind: ConfigMap\n--- !!map\nkind: Secret\n"))
	fmt.Println(err)
	// Output:
	// "---\n# Source: c/templates/a.yaml\nkind: ConfigMap\n"
	// "---# b\nkind: Secret\n"
	// document 2, line 2: the line "--- !!map" starts with "---": Kubernetes' YAML reader (kubectl, Helm, Argo CD) takes it for a document separator, and refuses one followed by anything but a comment
}
