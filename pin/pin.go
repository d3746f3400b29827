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
	// KeptPrevious says that Output is the previous output: byte for
	// byte, or, when the input comes from Helm 4's post-renderer, its
	// documents with Helm 4's file annotation, for Helm 4 to print the
	// previous output again (see steady.Keep).
	KeptPrevious bool
	files        []*atomicfile.Pending
	// choices are the tag policies' choices, by Image.Reference.
	choices map[string]ReportPolicy
	// put stores Output in Options.Store; nil when there is nothing to
	// store.
	put func() error
}

// Pin renders in through the resolver chain. It fails on whatever fails
// the render, on references missing from a Frozen lock file and on
// references the registry serves differently from a Check lock file. On
// success the lock file and the report are prepared beside their
// destinations, to be put in place by Commit. On error nothing is
// returned and no file changes.
func (p *Pinner) Pin(ctx context.Context, in []byte) (*Result, error) {
	o := p.o
	if o.KeelAnnotations {
		ps, err := p.keelPolicies(ctx, in)
		if err != nil {
			return nil, err
		}
		o.TagPolicies = ps
	}
	c, err := newChain(&o)
	if err != nil {
		return nil, err
	}
	r := p.o.Renderer
	r.Resolver = c
	out, err := r.Render(ctx, in)
	// A mirror no image is from is a typo, most likely: say so, all the
	// more when the render failed (its images went to their registries).
	for _, m := range c.unusedMirrors(out.Images) {
		p.o.warnf("registry mirror %s=%s: no image is from %s, so the mirror is never asked (registry hosts match in any case, with or without :443)", m.From, m.To, m.From)
	}
	if err != nil {
		return nil, err
	}
	// Each image once, with where its digest came from.
	for _, im := range out.Images {
		switch {
		case im.Digest == "":
		case im.Mirror != "":
			p.o.logf("%s: %s (mirror %s)", im.Written, im.Digest, im.Mirror)
		default:
			p.o.logf("%s: %s (%s)", im.Written, im.Digest, im.Source)
		}
	}
	if err := c.verdict(p.o.Lock); err != nil {
		return nil, err
	}
	res := &Result{Output: out.Output, Images: out.Images}
	if err := p.steady(ctx, in, res); err != nil {
		return nil, err
	}
	res.choices = c.choices(out.Images)
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

// steady applies VolatileFrom and the previous output (Previous or
// Store) to res: it finds the volatile fields and warns about them, keeps
// the previous output when nothing but volatile fields changed, and
// prepares the Store's next value for Commit.
func (p *Pinner) steady(ctx context.Context, in []byte, res *Result) error {
	if p.o.VolatileFrom == "" && p.o.Previous == "" && p.o.Store == nil {
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
	previous, where, found, err := p.previous(ctx)
	if err != nil || where == "" {
		return err
	}
	if found {
		d, err := steady.Keep(previous, res.Output, v, so)
		if err != nil {
			return fmt.Errorf("comparing with the previous output %s: %w", where, err)
		}
		p.o.logf("previous output %s: %s", where, d.Reason)
		res.Output, res.KeptPrevious = d.Output, d.Kept
	} else {
		p.o.logf("no previous output %s: a first render", where)
	}
	// The store's value changes only when the output does; Commit puts
	// it there once the caller has written the output.
	if p.o.Store != nil && !res.KeptPrevious {
		store, key, out := p.o.Store, p.o.StateKey, res.Output
		res.put = func() error { return store.Put(ctx, key, out) }
	}
	return nil
}

// previous reads the previous output from the Previous file or the Store.
// where names it for messages, "" when there is neither; found is false
// on a first render.
func (p *Pinner) previous(ctx context.Context) (b []byte, where string, found bool, err error) {
	switch {
	case p.o.Store != nil:
		where = fmt.Sprintf("of %q in the store", p.o.StateKey)
		b, found, err = p.o.Store.Get(ctx, p.o.StateKey)
		if err != nil {
			return nil, where, false, fmt.Errorf("reading the previous output: %w", err)
		}
		if found && int64(len(b)) > maxRender {
			return nil, where, false, fmt.Errorf("reading the previous output %s: larger than %d bytes", where, maxRender)
		}
		return b, where, found, nil
	case p.o.Previous != "":
		where = "at " + p.o.Previous
		b, err = readfile.Regular(p.o.Previous, maxRender)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, where, false, nil
		}
		if err != nil {
			return nil, where, false, fmt.Errorf("reading the previous output: %w", err)
		}
		return b, where, true, nil
	}
	return nil, "", false, nil
}

// prepare writes the lock file and the report beside their destinations.
func (p *Pinner) prepare(res *Result, platform string) error {
	if p.o.WriteLock != "" {
		l, err := newLock(res.Images, platform, res.choices)
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
		rep.addChoices(res.choices)
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
func newLock(images []renderer.Image, platform string, choices map[string]ReportPolicy) (*lockfile.Lock, error) {
	var entries []lockfile.Entry
	for _, im := range images {
		if im.Digest == "" || im.Source == resolution.Pinned || im.Source == resolution.Unresolved {
			continue
		}
		e := lockfile.Entry{Reference: im.Reference, Platform: platform, Digest: im.Digest}
		if ch, ok := choices[im.Reference]; ok {
			e.Policy, e.Tag = ch.Policy, ch.Chosen
		}
		entries = append(entries, e)
	}
	return lockfile.New(entries)
}

// Commit puts the prepared files in place and stores the Output in
// Options.Store, as the next run's previous output. It tries every file
// and the store and returns every failure.
func (r *Result) Commit() error {
	var errs []error
	for _, f := range r.files {
		if err := f.Commit(); err != nil {
			errs = append(errs, fmt.Errorf("writing %w", err))
		}
	}
	if r.put != nil {
		if err := r.put(); err != nil {
			errs = append(errs, err)
		}
	}
	r.files, r.put = nil, nil
	return errors.Join(errs...)
}

// Discard drops the prepared files and stores nothing; every destination
// stays as it was.
func (r *Result) Discard() {
	for _, f := range r.files {
		f.Discard()
	}
	r.files, r.put = nil, nil
}
