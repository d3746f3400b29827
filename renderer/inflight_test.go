package renderer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/resolution"
)

// TestRenderResolvesEachReferenceOnceAcrossCores: the parse starts the
// resolution of each reference it meets, on every core at once; each
// distinct reference is still resolved exactly once.
func TestRenderResolvesEachReferenceOnceAcrossCores(t *testing.T) {
	t.Parallel()
	var in strings.Builder
	for i := range 400 { // many batches of documents, so every worker meets every reference
		fmt.Fprintf(&in, "---\n%s", strings.Replace(deployment, "IMAGE", fmt.Sprintf("registry.example/app%d:1", i%25), 1))
	}
	f := newFixed()
	res, err := (&Renderer{Resolver: f}).Render(context.Background(), []byte(in.String()))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	if len(f.calls) != 25 || len(res.Images) != 25 {
		t.Fatalf("%d references resolved, %d images; want 25 of each", len(f.calls), len(res.Images))
	}
	for ref, n := range f.calls {
		if n != 1 {
			t.Errorf("%s resolved %d times, want once", ref, n)
		}
	}
}

// blocking is a Resolver that holds every call until its context is
// done, and counts the calls begun and still running.
type blocking struct {
	begun, running atomic.Int32
}

func (b *blocking) Resolve(ctx context.Context, ref name.Reference) (resolution.Resolution, error) {
	b.begun.Add(1)
	b.running.Add(1)
	defer b.running.Add(-1)
	<-ctx.Done()
	return resolution.Resolution{}, fmt.Errorf("resolving %s: %w", ref, ctx.Err())
}

// TestRenderCancelsResolutionsOfAFailedStream: a reference met before a
// document that fails (an image field, or one without any that
// Kubernetes could not read) is being resolved while the parse goes on;
// the render fails with the document's error, not the resolver's, and
// cancels and waits for that resolution, so that none outlives it.
func TestRenderCancelsResolutionsOfAFailedStream(t *testing.T) {
	t.Parallel()
	first := strings.Replace(deployment, "IMAGE", "registry.example/app:1", 1) + "---\n"
	for _, tc := range []struct {
		name, in string
		r        *Renderer
	}{
		{"quick reader", strings.Replace(deployment, "IMAGE", "registry.example/App:1", 1), &Renderer{}}, // no capitals in a repository
		{"yaml.v3", strings.Replace(deployment, "IMAGE", "registry.example/App:1", 1), &Renderer{noQuick: true}},
		{"malformed YAML without an image field", "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: [\n", &Renderer{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := new(blocking)
			r := *tc.r
			r.Resolver = b
			// A render that waited for the resolver would wait until
			// this deadline, and fail with it.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := r.Render(ctx, []byte(first+tc.in))
			if err == nil || !strings.Contains(err.Error(), "document 2") || strings.Contains(err.Error(), "context canceled") {
				t.Fatalf("Render() = %v, want the error of document 2 alone", err)
			}
			if b.begun.Load() != 1 || b.running.Load() != 0 {
				t.Errorf("resolutions begun %d, still running when Render returned %d; want 1 and 0", b.begun.Load(), b.running.Load())
			}
		})
	}
}

// TestInflightStop: stop cancels every call in flight and returns only
// when each has returned; a reference with a digest, or an inflight
// without a resolver, starts nothing.
func TestInflightStop(t *testing.T) {
	t.Parallel()
	b := new(blocking)
	f := newInflight(context.Background(), b)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { f.start(parseRef(t, fmt.Sprintf("registry.example/app%d:1", i%5))) })
	}
	wg.Wait()
	if c := f.start(parseRef(t, "registry.example/app@sha256:"+strings.Repeat("a", 64))); c != nil {
		t.Error("start() of a reference with a digest began a call")
	}
	f.stop()
	if b.begun.Load() != 5 || b.running.Load() != 0 {
		t.Errorf("calls begun %d, running after stop %d; want 5 and 0", b.begun.Load(), b.running.Load())
	}
	if c := newInflight(context.Background(), nil).start(name.MustParseReference("registry.example/app:1")); c != nil {
		t.Error("start() without a resolver began a call")
	}
	var none *inflight
	if c := none.start(name.MustParseReference("registry.example/app:1")); c != nil {
		t.Error("start() on a nil inflight began a call")
	}
}

func parseRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatalf("ParseReference(%q) = %v", s, err)
	}
	return ref
}
