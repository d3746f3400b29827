package stream

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/digestpin/digestpin/internal/gen"
)

// addSeeds adds the renderer's golden inputs (../testdata, which the
// stream layer reads for the renderer), a few small documents,
// separatorCases and a stream of each shape that internal/gen writes to
// a fuzz corpus (testdata/fuzz/ holds the crashers found so far).
func addSeeds(f *testing.F) {
	f.Helper()
	inputs, _ := filepath.Glob("../testdata/*.input.yaml")
	odd, _ := filepath.Glob("../testdata/oddinput/*.input.yaml")
	for _, p := range append(inputs, odd...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"",
		"---\n",
		"apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: nginx}]}\n...\nkind: Pod\n",
		"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - &c {name: a, image: &i x:1}\n  - *c\n",
		"\ufeff" + `{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"app","im\u0061ge":"registry.example/app:1"}]}}`,
	} {
		f.Add([]byte(s))
	}
	for _, tc := range separatorCases {
		f.Add([]byte(tc.in))
	}
	// The shapes charts write: flow collections, CRLF, comments, block
	// scalars.
	for _, sh := range gen.Shapes() {
		var b bytes.Buffer
		if err := gen.Stream(&b, gen.Options{Deployments: 1, Shape: sh}); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	for _, s := range []string{
		"a: {b: c, d: [e, 'f'], g: {}}\r\nh: [--x, -1, \"i\"]\r\n",
		"a:\n- {name: http, containerPort: 8080}\n- [[], {}]\n",
		"a: {b: c,}\nd: {e}\nf: [g: h]\n",
	} {
		f.Add([]byte(s))
	}
}
