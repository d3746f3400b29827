package renderer

import (
	"context"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/resolution"
)

// inflight resolves the references of one Render as the parse meets
// them, each distinct reference once, so that the registry's round trips
// (a ping, then the manifests) overlap the parse of the rest of the stream
// instead of waiting for it. Each reference is validated before its
// request; a stream that fails later has its requests cancelled, and
// stop waits for them, so that no Resolve outlives the Render.
type inflight struct {
	ctx      context.Context
	cancel   context.CancelFunc
	resolver resolution.Resolver
	calls    sync.Map // ref.Name() to *call
	wg       sync.WaitGroup
}

// call is one reference's resolution; res and err are set when done is
// closed.
type call struct {
	done chan struct{}
	res  resolution.Resolution
	err  error
}

// newInflight returns an inflight that resolves with resolver under ctx;
// a nil resolver resolves nothing.
func newInflight(ctx context.Context, resolver resolution.Resolver) *inflight {
	ctx, cancel := context.WithCancel(ctx)
	return &inflight{ctx: ctx, cancel: cancel, resolver: resolver}
}

// start begins resolving ref unless it has begun already, and returns its
// call; it returns nil for a reference with a digest, which needs no
// resolver, and when there is no resolver (or no inflight: a walk that
// only reads the stream).
func (f *inflight) start(ref name.Reference) *call {
	if _, ok := ref.(name.Digest); ok || f == nil || f.resolver == nil {
		return nil
	}
	k := ref.Name()
	if c, ok := f.calls.Load(k); ok {
		return c.(*call)
	}
	c := &call{done: make(chan struct{})}
	if prev, loaded := f.calls.LoadOrStore(k, c); loaded {
		return prev.(*call)
	}
	f.wg.Go(func() {
		defer close(c.done)
		c.res, c.err = f.resolver.Resolve(f.ctx, ref)
	})
	return c
}

// wait returns the resolution of ref, starting it if it has not begun.
func (f *inflight) wait(ref name.Reference) (resolution.Resolution, error) {
	c := f.start(ref)
	<-c.done
	return c.res, c.err
}

// stop cancels the resolutions still in flight and waits for them.
func (f *inflight) stop() {
	f.cancel()
	f.wg.Wait()
}
