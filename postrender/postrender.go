package postrender

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/digestpin/digestpin/pin"
)

// DefaultTimeout bounds one Run unless PostRenderer.Timeout says otherwise;
// it is the digestpin command's default --timeout.
const DefaultTimeout = 2 * time.Minute

// TimeoutError is the cause of a Run that PostRenderer.Timeout stopped;
// the error Run returns then wraps it.
type TimeoutError struct {
	// Timeout is the PostRenderer's timeout.
	Timeout time.Duration
}

func (e *TimeoutError) Error() string { return fmt.Sprintf("timeout %s ran out", e.Timeout) }

// PostRenderer pins the images of the manifests Helm rendered. The zero
// value pins in renderer.ModePin with the default checksum annotation,
// resolving through the registries with the default keychain. Its fields
// must not change while a Run is in flight; with that, Run is safe for
// concurrent use.
type PostRenderer struct {
	// Options are what the digestpin command's flags set: the output
	// settings (Options.Renderer), the registry (Options.ResolveOptions,
	// Options.Platform), the lock file (Lock, Frozen, Check, WriteLock),
	// the resolution cache and the report, and the signature policies
	// (Options.Verify: package verify's Policies, which a program that
	// verifies sets itself). Each Run resolves through a new
	// registry resolver, so that every render sees the registries as they
	// are then, and reads the lock file as it is then.
	pin.Options
	// Timeout bounds one Run, registry requests included; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Keep, when not nil, receives the result of each successful Run,
	// with its lock file and report prepared but not written: the caller
	// commits them (pin.Result.Commit) once Helm has installed the
	// release, or discards them. Nil means Run writes them itself. Keep
	// is called from Run, so it must be safe for concurrent use when Run
	// is.
	Keep func(*pin.Result)

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
// moved, or the timeout. Run does not modify renderedManifests. With Keep,
// Run hands the files to Keep instead of writing them.
func (p *PostRenderer) Run(renderedManifests *bytes.Buffer) (*bytes.Buffer, error) {
	ctx := p.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, &TimeoutError{Timeout: timeout})
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
		// Say that the timeout stopped it, unless the error does.
		var te *TimeoutError
		if cause := context.Cause(ctx); errors.As(cause, &te) && !strings.Contains(err.Error(), te.Error()) {
			return nil, fmt.Errorf("pinning images: %w: %w", te, err)
		}
		return nil, fmt.Errorf("pinning images: %w", err)
	}
	if p.Keep != nil {
		p.Keep(res)
		return bytes.NewBuffer(res.Bytes()), nil
	}
	if err := res.Commit(); err != nil {
		return nil, fmt.Errorf("pinning images: %w", err)
	}
	return bytes.NewBuffer(res.Bytes()), nil
}
