package stream

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/testfiles"
)

// TestEstimateNodesIsAnUpperBound checks estimateNodes against the nodes
// that the test inputs and a few dense spellings parse into.
func TestEstimateNodesIsAnUpperBound(t *testing.T) {
	t.Parallel()
	inputs, _ := filepath.Glob("../testdata/*.input.yaml")
	odd, _ := filepath.Glob("../testdata/oddinput/*.input.yaml")
	docs := []string{"a", "a: b", "[a,b]", "{a, b, c}", "[a: b, c: d]", "- - - a", "? a", "? \n? \n", "a:\nb:\n", "[[[]]]", "{? : }", "&a [*a, *a, *a]"}
	for _, p := range append(inputs, odd...) {
		for _, d := range mustSplit(t, testfiles.Read(t, p)) {
			docs = append(docs, string(d.Body()))
		}
	}
	for _, d := range docs {
		if n, est := countNodes([]byte(d)), estimateNodes([]byte(d)); n > est {
			t.Errorf("estimateNodes(%.60q) = %d, but it parses into %d nodes", d, est, n)
		}
	}
}

// countNodes returns the nodes a document parses into, the document node
// and aliases included, or 0 when it does not parse.
func countNodes(body []byte) int {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(body)).Decode(&root); err != nil {
		return 0
	}
	n, stack := 0, []*yaml.Node{&root}
	for len(stack) > 0 {
		top := stack[len(stack)-1]
		stack = append(stack[:len(stack)-1], top.Content...)
		n++
	}
	return n
}

// TestParseTextGuards refuses text beyond its node bound and merge keys
// that expand past the bound, and leaves plain aliases unexpanded.
func TestParseTextGuards(t *testing.T) {
	t.Parallel()
	merges := "m0: &m0 {a: 1}\n"
	for i := 1; i <= 40; i++ {
		merges += fmt.Sprintf("m%d: &m%d {<<: [*m%d, *m%d]}\n", i, i, i-1, i-1)
	}
	if _, err := ParseText(merges, MaxNodes); err == nil {
		t.Errorf("ParseText(merge bomb) = nil error, want one")
	}
	if _, err := ParseText("a:\n- 1\n- 2\n", 4); err == nil {
		t.Errorf("ParseText(text over its bound) = nil error, want one")
	}
	laughs := "a: &a [lol, lol]\nb: &b [*a, *a]\nc: [*b, *b]\n---\nx: 1\n"
	roots, err := ParseText(laughs, MaxNodes)
	if err != nil || len(roots) != 2 {
		t.Fatalf("ParseText(laughs) = %d documents, %v; want 2, nil", len(roots), err)
	}
	if c := roots[0].Content[5].Content[0]; c.Kind != yaml.AliasNode {
		t.Errorf("ParseText(laughs) expanded an alias: %v", c.Kind)
	}
}
