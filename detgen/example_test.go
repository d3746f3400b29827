package detgen_test

import (
	"fmt"
	"os"
	"text/template"
	"time"

	"github.com/digestpin/digestpin/detgen"
)

// Rewrite a chart's template, render it with the Generator's functions, and
// get the same password on every render with the same seed and release.
func Example() {
	var seed detgen.Seed // from detgen.ReadSeedFile in real use
	copy(seed[:], "an example seed of thirty-two b.")
	const name = "mychart/templates/secret.yaml"
	src, err := detgen.Rewrite(name, `password: {{ randAlphaNum 16 }}`+"\n")
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		g := detgen.New(seed, detgen.Release{Name: "demo", Namespace: "apps"}, time.Now)
		t := template.Must(template.New(name).Funcs(g.Funcs()).Parse(src))
		if err := t.Execute(os.Stdout, nil); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// password: aYPkET1kg5nYx3kO
	// password: aYPkET1kg5nYx3kO
}
