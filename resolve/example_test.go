package resolve_test

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolve"
)

func ExampleResolver_Resolve() {
	f := &testregistry.Fatal{}
	defer f.Close()
	reg := testregistry.New(f)
	want := reg.PushImage(f, "app:1.0")

	r, err := resolve.New(resolve.WithKeychain(authn.DefaultKeychain), resolve.WithJobs(4))
	if err != nil {
		panic(err)
	}
	ref, err := name.ParseReference(reg.Ref("app:1.0"))
	if err != nil {
		panic(err)
	}
	got, err := r.Resolve(context.Background(), ref)
	fmt.Println(got.Digest == want, got.Source, err)
	// Output: true registry <nil>
}

// A mirror with a path prefix answers for a registry; the caller keeps
// the name it had. Here the mirror is the only place that has the image.
func ExampleWithMirror() {
	f := &testregistry.Fatal{}
	defer f.Close()
	mirror := testregistry.New(f)
	want := mirror.PushImage(f, "hub/library/nginx:1.27")

	r, err := resolve.New(
		resolve.WithMirror("docker.io", mirror.Host()+"/hub"),
		resolve.WithMirrorOnly(true),
	)
	if err != nil {
		panic(err)
	}
	ref, err := name.ParseReference("nginx:1.27")
	if err != nil {
		panic(err)
	}
	got, err := r.Resolve(context.Background(), ref)
	fmt.Println(got.Digest == want, got.Source, err)
	// Output: true registry <nil>
}
