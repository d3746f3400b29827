package resolve_test

import (
	"context"
	"fmt"
	"os"
	"time"

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

// When was the image of a digest built: the registry's word, from the
// manifest's annotation or the image config.
func ExampleResolver_Built() {
	f := &testregistry.Fatal{}
	defer f.Close()
	reg := testregistry.New(f)
	h := reg.PushCreated(f, "app:1.0", time.Date(2026, 12, 1, 14, 3, 0, 0, time.UTC))

	r, err := resolve.New()
	if err != nil {
		panic(err)
	}
	repo, err := name.NewRepository(reg.Ref("app"))
	if err != nil {
		panic(err)
	}
	built, err := r.Built(context.Background(), repo.Digest(h.String()))
	fmt.Println(built.UTC().Format(time.RFC3339), err)
	// Output: 2026-12-01T14:03:00Z <nil>
}

// The last digest a cache recorded for a reference, past its TTL too:
// what the previous run pinned.
func ExampleCachingResolver_Last() {
	f := &testregistry.Fatal{}
	defer f.Close()
	reg := testregistry.New(f)
	first := reg.PushImage(f, "app:1.0")
	dir, err := os.MkdirTemp("", "example-cache-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	cache, err := resolve.NewDirCache(dir)
	if err != nil {
		panic(err)
	}
	ref, err := name.ParseReference(reg.Ref("app:1.0"))
	if err != nil {
		panic(err)
	}
	// A run: a new registry resolver behind the cache, whose entries are
	// answers for a millisecond.
	run := func() *resolve.CachingResolver {
		r, err := resolve.New()
		if err != nil {
			panic(err)
		}
		cr := resolve.NewCachingResolver(r, cache, time.Millisecond, r.CacheKey, nil)
		if _, err := cr.Resolve(context.Background(), ref); err != nil {
			panic(err)
		}
		return cr
	}
	run()
	now := reg.PushImage(f, "app:1.0")
	time.Sleep(2 * time.Millisecond)
	cr := run()
	last, ok := cr.Last(context.Background(), ref)
	fmt.Println(last.Digest == first, last.Digest == now, ok)
	// Output: true false true
}
