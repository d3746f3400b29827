package helmsdk_test

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/digestpin/digestpin/examples/helmsdk"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/postrender"
)

func Example() {
	// A loopback registry stands in for a real one.
	f := &testregistry.Fatal{}
	defer f.Close()
	reg := testregistry.New(f)
	vals := map[string]any{"image": map[string]any{}}
	for _, img := range []string{"app", "db", "tools"} {
		reg.PushImage(f, img+":1.0")
		vals["image"].(map[string]any)[img] = reg.Ref(img + ":1.0")
	}

	// Render the test chart through digestpin, as a Go program would.
	manifest, err := helmsdk.Render("../../testdata/chart", "demo", vals, &postrender.PostRenderer{})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Print the image lines; the registry's port and the random images'
	// digests vary from run to run.
	digest := regexp.MustCompile(`[0-9a-f]{64}`)
	for _, line := range strings.Split(manifest, "\n") {
		if strings.Contains(line, "image: ") {
			line = strings.ReplaceAll(line, reg.Host(), "REGISTRY")
			fmt.Println(strings.TrimSpace(digest.ReplaceAllString(line, "…")))
		}
	}
	// Output:
	// image: "REGISTRY/app:1.0@sha256:…"
	// image: "REGISTRY/db:1.0@sha256:…"
}
