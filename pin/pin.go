package pin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/digestpin/digestpin/internal/atomicfile"
	"github.com/digestpin/digestpin/internal/readfile"
	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/steady"
)

// Pinner pins manifest streams with one set of Options. It is safe for
// concurrent use: each Pin assembles its own resolver chain, with a new
// registry resolver, so every Pin sees the registries as they are then.
type Pinner struct {
	o Options
}

// New checks the options and returns a Pinner. It reads no file: the
// lock file is read by each Pin, as it is then.
func New(o Options) (*Pinner, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	// Options of the registry resolver are checked now, not at the first
	// Pin.
	if o.Registry == nil && !o.Frozen {
		if _, err := newChain(&Options{ResolveOptions: o.ResolveOptions, Platform: o.Platform}); err != nil {
			return nil, err
		}
	}
	return &Pinner{o: o}, nil
}

// Result is the outcome of a Pin. Its files are prepared, not written:
// call Commit once the Output is safely where it goes, or Discard.
type Result struct {
	// Output is the pinned stream.
	Output []byte
	// Images lists every distinct image, sorted by reference.
	Images []renderer.Image
	// Volatile lists the documents with fields that differ between the
	// input and Options.VolatileFrom; nil without VolatileFrom.
	Volatile []steady.Volatile
	// KeptPrevious says that Output is Options.Previous, byte for byte.
	KeptPrevious bool
	files        []*atomicfile.Pending
}

// Pin renders in through the resolver chain. It fails on whatever fails
// the render, on references missing from a Frozen lock file and on
// references the registry serves differently from a Check lock file. On
// success the lock file and the report are prepared beside their
// destinations, to be put in place by Commit. On error nothing is
// returned and no file changes.
func (p *Pinner) Pin(ctx context.Context, in []byte) (*Result, error) {
	c, err := newChain(&p.o)
	if err != nil {
		return nil, err
	}
	r := p.o.Renderer
	r.Resolver = c
	out, err := r.Render(ctx, in)
	if err != nil {
		return nil, err
	}
	for _, im := range out.Images {
		if im.Digest != "" {
			p.o.logf("%s: %s (%s)", im.Written, im.Digest, im.Source)
		}
	}
	if err := c.verdict(p.o.Lock); err != nil {
		return nil, err
	}
	res := &Result{Output: out.Output, Images: out.Images}
	if err := p.steady(in, res); err != nil {
		return nil, err
	}
	if err := p.prepare(res, c.platform); err != nil {
		res.Discard()
		return nil, err
	}
	return res, nil
}

// maxRender bounds the second render and the previous output: four times
// what the API server takes in one request, for each of a release's
// objects, is far beyond any chart.
const maxRender = 256 << 20

// steady applies VolatileFrom and Previous to res: it finds the volatile
// fields and warns about them, and keeps the previous output when nothing
// but volatile fields changed.
func (p *Pinner) steady(in []byte, res *Result) error {
	if p.o.VolatileFrom == "" && p.o.Previous == "" {
		return nil
	}
	so := steady.Options{ChecksumAnnotation: p.o.Renderer.ChecksumAnnotation, PodSpecPaths: p.o.Renderer.PodSpecPaths}
	var v *steady.Volatility
	if p.o.VolatileFrom != "" {
		second, err := readfile.Regular(p.o.VolatileFrom, maxRender)
		if err != nil {
			return fmt.Errorf("reading the second render: %w", err)
		}
		if v, err = steady.Diff(in, second, so); err != nil {
			return fmt.Errorf("comparing with the second render %s: %w", p.o.VolatileFrom, err)
		}
		for _, w := range v.Warnings() {
			p.o.warnf("%s", w)
		}
		res.Volatile = v.Volatile
		if res.Volatile == nil {
			res.Volatile = []steady.Volatile{}
		}
	}
	if p.o.Previous == "" {
		return nil
	}
	previous, err := readfile.Regular(p.o.Previous, maxRender)
	if errors.Is(err, fs.ErrNotExist) {
		p.o.logf("no previous output at %s: a first render", p.o.Previous)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the previous output: %w", err)
	}
	d, err := steady.Keep(previous, res.Output, v, so)
	if err != nil {
		return fmt.Errorf("comparing with the previous output %s: %w", p.o.Previous, err)
	}
	p.o.logf("previous output %s: %s", p.o.Previous, d.Reason)
	res.Output, res.KeptPrevious = d.Output, d.Kept
	return nil
}

// prepare writes the lock file and the report beside their destinations.
func (p *Pinner) prepare(res *Result, platform string) error {
	if p.o.WriteLock != "" {
		l, err := newLock(res.Images, platform)
		if err != nil {
			return fmt.Errorf("writing lock file %s: %w", p.o.WriteLock, err)
		}
		b, err := l.Marshal()
		if err != nil {
			return fmt.Errorf("writing lock file %s: %w", p.o.WriteLock, err)
		}
		f, err := atomicfile.Prepare(p.o.WriteLock, b, 0o644)
		if err != nil {
			return fmt.Errorf("writing lock file %w", err)
		}
		res.files = append(res.files, f)
		p.o.logf("lock file %s: %d entries", p.o.WriteLock, l.Len())
	}
	if p.o.Report != "" {
		rep := NewReport(res.Images, platform)
		rep.Volatile = res.Volatile
		b, err := rep.marshal()
		if err != nil {
			return err
		}
		f, err := atomicfile.Prepare(p.o.Report, b, 0o644)
		if err != nil {
			return fmt.Errorf("writing report %w", err)
		}
		res.files = append(res.files, f)
	}
	return nil
}

// newLock is the lock file of every image a run resolved: not those the
// manifests pinned already, nor those kept unresolved.
func newLock(images []renderer.Image, platform string) (*lockfile.Lock, error) {
	var entries []lockfile.Entry
	for _, im := range images {
		if im.Digest == "" || im.Source == resolution.Pinned || im.Source == resolution.Unresolved {
			continue
		}
		entries = append(entries, lockfile.Entry{Reference: im.Reference, Platform: platform, Digest: im.Digest})
	}
	return lockfile.New(entries)
}

// Commit puts the prepared files in place. It tries every file and
// returns every failure.
func (r *Result) Commit() error {
	var errs []error
	for _, f := range r.files {
		if err := f.Commit(); err != nil {
			errs = append(errs, fmt.Errorf("writing %w", err))
		}
	}
	r.files = nil
	return errors.Join(errs...)
}

// Discard drops the prepared files; every destination stays as it was.
func (r *Result) Discard() {
	for _, f := range r.files {
		f.Discard()
	}
	r.files = nil
}
