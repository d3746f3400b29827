package renderer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
)

// A Renderer pins every image of a pod template and annotates the
// template with the checksum of its images; a document without one is
// written back as it was read. Here the digests come from a fixed
// resolver: the SHA-256 of the reference's name.
func ExampleRenderer_Render() {
	fixed := resolution.Func(func(_ context.Context, ref name.Reference) (resolution.Resolution, error) {
		sum := sha256.Sum256([]byte(ref.Name()))
		return resolution.Resolution{Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}, Source: resolution.Registry}, nil
	})
	r := &renderer.Renderer{Resolver: fixed}
	res, err := r.Render(context.Background(), []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: c}
data: {image: "not/an-image:1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: web
        image: registry.example/web:1.4
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(res.Bytes()))
	for _, img := range res.Images {
		fmt.Println(img.Reference, img.Source)
	}
	// Output:
	// apiVersion: v1
	// kind: ConfigMap
	// metadata: {name: c}
	// data: {image: "not/an-image:1"}
	// ---
	// apiVersion: apps/v1
	// kind: Deployment
	// metadata: {name: web}
	// spec:
	//   template:
	//     metadata:
	//       annotations:
	//         checksum/images: 'b9aa988cf66d36bbeef03d1fb51c238ec1793c52b4701bd7e3f787072bb79aee'
	//     spec:
	//       containers:
	//       - name: web
	//         image: registry.example/web:1.4@sha256:1fa66503ccbedd63f6c947f899bce4ba45cc5fb2cdd12d6a8d601855c5e05132
	// registry.example/web:1.4 registry
}
