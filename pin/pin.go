package pin

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/digestpin/digestpin/internal/atomicfile"
	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/verification"
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
	// The renderer's settings too, now rather than at the first Pin.
	if err := o.Renderer.Validate(); err != nil {
		return nil, &OptionError{Field: "Renderer", Err: err}
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
// call Commit once the output is safely where it goes, or Discard. The
// pinned stream is kept in pieces that share memory with the input
// (renderer.Result): WriteTo writes it, Bytes returns it as one slice;
// keep the input as it is while the Result is in use.
type Result struct {
	out renderer.Result
	// Images lists every distinct image, sorted by reference.
	Images []renderer.Image
	// Unpinned lists the values that look like image references left as
	// tags (renderer.Result.Unpinned).
	Unpinned []renderer.Unpinned
	files    []*atomicfile.Pending
	// choices are the tag policies' choices, by Image.Reference.
	choices map[string]ReportPolicy
	// Verified are the signature verifications of the images a policy
	// covers (Options.Verify), by Image.Reference; nil without policies.
	Verified map[string]*verification.Record
	// Changes is what the run changes against the previous state it
	// knows (Options.DiffAgainst, Lock, WriteLock or the cache); nil
	// unless Report, Summary, SummaryText or Changes asked for it.
	Changes *ChangeSet
	// previous are the previous digests, by Image.Reference.
	previous map[string]*Previous
	// waiting are the digests that waiting periods hold back, by
	// waitKey.
	waiting map[string]Pending
}

// Pin renders in through the resolver chain. It fails on whatever fails
// the render, on references missing from a Frozen lock file and on
// references the registry serves differently from a Check lock file. On
// success the lock file and the report are prepared beside their
// destinations, to be put in place by Commit. On error nothing is
// returned and no file changes.
func (p *Pinner) Pin(ctx context.Context, in []byte) (*Result, error) {
	if p.o.OptionNames != nil {
		ctx = resolution.WithOptionNames(ctx, p.o.OptionNames)
	}
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
	if c.progress != nil {
		// Render waits for every resolution it began.
		c.progress.finish()
	}
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
	// What waits, and what was pinned at once for being seen first.
	c.minAge.say(ctx)
	// Then the signatures of the digests about to be pinned: a render
	// that pins an image its policy does not hold for fails.
	recs, err := p.verifyImages(ctx, c, out.Images)
	if err != nil {
		return nil, err
	}
	verr := c.verdict(ctx, p.o.Lock)
	var differs *DiffersError
	if verr != nil && !errors.As(verr, &differs) {
		return nil, verr
	}
	res := &Result{out: out, Images: out.Images, Unpinned: out.Unpinned, Verified: recs, waiting: c.minAge.waits()}
	res.choices = c.choices(out.Images)
	// What changed against the previous state, only when asked: reading
	// it costs a file and, for an output, a render.
	if p.o.wantsChanges() {
		prev, err := p.previousState(ctx, c, out.Images, res.choices)
		if err != nil {
			return nil, err
		}
		res.Changes, res.previous = changes(out.Images, out.Unpinned, res.choices, prev)
		res.Changes.addWaiting(out.Images, res.choices, res.waiting)
		if err := p.compareObjects(res.Changes, prev, out); err != nil {
			return nil, err
		}
		// When the images that roll were built: a request or two per
		// new digest, none for those unchanged.
		p.addBuilt(ctx, c, res.Changes)
	}
	if differs != nil {
		// A Check that found differences: the report and the summaries
		// say which, for the caller to write (WriteFiles); the lock file
		// is not written.
		differs.Changes = res.Changes
		if differs.files, err = p.outputs(res, c.platform); err != nil {
			return nil, err
		}
		return nil, differs
	}
	if err := p.prepare(res, c.platform); err != nil {
		res.Discard()
		return nil, err
	}
	return res, nil
}

// prepare writes the lock file and the report beside their destinations.
func (p *Pinner) prepare(res *Result, platform string) error {
	if p.o.WriteLock != "" {
		l, err := newLock(res.Images, platform, res.choices, res.Verified, res.waiting)
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
	outs, err := p.outputs(res, platform)
	if err != nil {
		return err
	}
	for _, o := range outs {
		f, err := atomicfile.Prepare(o.path, o.data, 0o644)
		if err != nil {
			return fmt.Errorf("writing %s %w", o.what, err)
		}
		res.files = append(res.files, f)
	}
	return nil
}

// output is a file of the run besides the lock file: what it is (for
// messages), where it goes and its bytes.
type output struct {
	what, path string
	data       []byte
}

// outputs returns the report and the summaries that the options ask for.
func (p *Pinner) outputs(res *Result, platform string) ([]output, error) {
	var outs []output
	if p.o.Report != "" {
		rep := NewReport(res.Images, platform)
		rep.Unpinned = res.Unpinned
		if p.o.Generated != nil {
			rep.Generated = p.o.Generated()
		}
		rep.addChoices(res.choices)
		rep.addVerified(res.Verified)
		rep.addChanges(res.Changes, res.previous)
		rep.addWaiting(res.choices, res.waiting)
		b, err := rep.marshal()
		if err != nil {
			return nil, err
		}
		outs = append(outs, output{"report", p.o.Report, b})
	}
	if p.o.Summary != "" {
		outs = append(outs, output{"summary", p.o.Summary, res.Changes.Markdown()})
	}
	if p.o.SummaryText != "" {
		outs = append(outs, output{"summary", p.o.SummaryText, res.Changes.Text()})
	}
	return outs, nil
}

// newLock is the lock file of every image a run resolved: not those the
// manifests pinned already, nor those kept unresolved.
func newLock(images []renderer.Image, platform string, choices map[string]ReportPolicy, verified map[string]*verification.Record, waiting map[string]Pending) (*lockfile.Lock, error) {
	var entries []lockfile.Entry
	for _, im := range images {
		if im.Digest == "" || im.Source == resolution.Pinned || im.Source == resolution.Unresolved {
			continue
		}
		e := lockfile.Entry{Reference: im.Reference, Platform: platform, Digest: im.Digest, MediaType: im.MediaType, Verified: toLock(verified[im.Reference])}
		if ch, ok := choices[im.Reference]; ok {
			e.Policy, e.Tag = ch.Policy, ch.Chosen
		}
		if w, ok := waiting[waitKey(im.Reference, e.Policy)]; ok && im.Source == resolution.Held {
			e.Pending = toLockPending(w)
		}
		entries = append(entries, e)
	}
	return lockfile.New(entries)
}

// Len returns the length of the pinned stream in bytes.
func (r *Result) Len() int { return r.out.Len() }

// Bytes returns the pinned stream as one slice: the input itself when
// nothing in it changed, else a new slice each call
// (renderer.Result.Bytes).
func (r *Result) Bytes() []byte { return r.out.Bytes() }

// WriteTo writes the pinned stream to w, implementing io.WriterTo, without
// a copy of the whole (renderer.Result.WriteTo). It stops at the first
// error; w then holds the first n bytes of the stream.
func (r *Result) WriteTo(w io.Writer) (int64, error) { return r.out.WriteTo(w) }

var _ io.WriterTo = (*Result)(nil)

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
