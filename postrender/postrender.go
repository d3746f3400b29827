package postrender

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/digestpin/digestpin/pin"
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
	// Options are what the digestpin command's flags set: the output
	// settings (Options.Renderer), the registry (Options.ResolveOptions,
	// Options.Platform), the lock file (Lock, Frozen, Check, WriteLock),
	// the resolution cache and the report. Each Run resolves through a new
	// registry resolver, so that every render sees the registries as they
	// are then, and reads the lock file as it is then.
	pin.Options
	// Timeout bounds one Run, registry requests included; zero means
	// DefaultTimeout.
	Timeout time.Duration

	ctx context.Context
}

// New returns a PostRenderer with options o. Unlike a PostRenderer
// literal, it reports invalid options now rather than at the first Run.
func New(o pin.Options) (*PostRenderer, error) {
	if _, err := pin.New(o); err != nil {
		return nil, err
	}
	return &PostRenderer{Options: o}, nil
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
// stream. It satisfies Helm's PostRenderer interfaces. The lock file and
// the report, when asked for, are written only when everything else
// succeeded. On error it returns a nil buffer and writes no file: an image
// that cannot be resolved (unless Renderer.KeepUnresolved), malformed YAML,
// a Frozen lock file that lacks an image, a Check that finds the registry
// moved, or the timeout. Run does not modify renderedManifests.
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

	pinner, err := pin.New(p.Options)
	if err != nil {
		return nil, err
	}
	var in []byte
	if renderedManifests != nil {
		in = renderedManifests.Bytes()
	}
	res, err := pinner.Pin(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("pinning images: %w", err)
	}
	if err := res.Commit(); err != nil {
		return nil, fmt.Errorf("pinning images: %w", err)
	}
	return bytes.NewBuffer(res.Output), nil
}
