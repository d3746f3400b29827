package postrender_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/postrender"
	"github.com/digestpin/digestpin/renderer"
)

func ExamplePostRenderer() {
	// A loopback registry with one image stands in for a real one.
	f := &testregistry.Fatal{}
	defer f.Close()
	reg := testregistry.New(f)
	reg.PushImage(f, "app:1.0")

	// What Helm hands a post-renderer; with the Helm SDK, set the
	// PostRenderer as action.Install.PostRenderer instead of calling Run.
	manifests := bytes.NewBufferString(fmt.Sprintf(deployment, reg.Ref("app:1.0")))
	pr := &postrender.PostRenderer{Options: pin.Options{Renderer: renderer.Renderer{Mode: renderer.ModeDigest}}}
	out, err := pr.Run(manifests)
	if err != nil {
		fmt.Println(err)
		return
	}

	// The registry's port and the random image's digest vary.
	s := strings.ReplaceAll(out.String(), reg.Host(), "REGISTRY")
	fmt.Print(regexp.MustCompile(`[0-9a-f]{64}`).ReplaceAllString(s, "…"))
	// Output:
	// ---
	// # Source: chart/templates/deployment.yaml
	// apiVersion: apps/v1
	// kind: Deployment
	// metadata:
	//   name: web
	// spec:
	//   template:
	//     metadata:
	//       annotations:
	//         checksum/images: '…'
	//     spec:
	//       containers:
	//         - name: web
	//           image: REGISTRY/app@sha256:…
}
