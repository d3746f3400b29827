package postrender

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolve"
)

// DefaultTimeout bounds one Run unless PostRenderer.Timeout says otherwise;
// it is the digestpin command's default --timeout.
const DefaultTimeout = 2 * time.Minute

// PostRenderer pins the images of the manifests Helm rendered. The zero
// value pins in renderer.ModePin with the default checksum annotation,
// resolving through the registries with the default keychain. Its fields
// must not change while a Run is in flight; with that, Run is safe for
// concurrent use.
type PostRenderer struct {
	// Renderer holds the output settings: Mode, ChecksumAnnotation,
	// PodSpecPaths, KeepUnresolved and Warnf. When its Resolver is nil,
	// each Run resolves through a new registry Resolver made with
	// ResolveOptions, so that every render sees the registry as it is then
	// (a Resolver remembers what it resolved for its lifetime).
	Renderer renderer.Renderer
	// ResolveOptions configure the registry Resolver of each Run, e.g.
	// resolve.WithKeychain or resolve.WithPlatform. They are ignored when
	// Renderer.Resolver is set.
	ResolveOptions []resolve.Option
	// Timeout bounds one Run, registry requests included; zero means
	// DefaultTimeout.
	Timeout time.Duration

	ctx context.Context
}

// New returns a PostRenderer with the default output settings that
// resolves with opts. Unlike a PostRenderer literal, it reports invalid
// options now rather than at the first Run.
func New(opts ...resolve.Option) (*PostRenderer, error) {
	if _, err := resolve.New(opts...); err != nil {
		return nil, err
	}
	return &PostRenderer{ResolveOptions: opts}, nil
}

// WithContext returns a shallow copy of p whose Runs end when ctx ends.
// Helm's interface passes no context to Run; without WithContext, Run uses
// context.Background.
func (p *PostRenderer) WithContext(ctx context.Context) *PostRenderer {
	c := *p
	c.ctx = ctx
	return &c
}

// Run pins the images of renderedManifests and returns the rewritten
// stream. It satisfies Helm's PostRenderer interfaces. On error it returns
// a nil buffer: an image that cannot be resolved (unless
// Renderer.KeepUnresolved), malformed YAML, or the timeout. Run does not
// modify renderedManifests.
func (p *PostRenderer) Run(renderedManifests *bytes.Buffer) (*bytes.Buffer, error) {
	ctx := p.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// A fresh registry Resolver for every Run: digests are what the
	// registry serves now, not what it served at an earlier render.
	r := p.Renderer
	if r.Resolver == nil {
		res, err := resolve.New(p.ResolveOptions...)
		if err != nil {
			return nil, err
		}
		r.Resolver = res
	}
	var in []byte
	if renderedManifests != nil {
		in = renderedManifests.Bytes()
	}
	res, err := r.Render(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("pinning images: %w", err)
	}
	return bytes.NewBuffer(res.Output), nil
}
