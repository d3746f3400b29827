package renderer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/digestpin/digestpin/renderer/stream"
)

// rewriteWaiting rewrites the documents of c that waited for a digest,
// on every core, from their kept parse or parsing them again. It returns
// the first document's error in stream order.
func (r *Renderer) rewriteWaiting(ctx context.Context, c *collection, digests map[string]string) error {
	known := func(u use) (string, bool) { return digests[u.ref.Name()], true }
	docErrs := make([]error, len(c.waiting))
	err := eachDoc(ctx, len(c.waiting), func(j int) {
		i := c.waiting[j]
		// Workers only read kept while this phase goes on.
		if p := c.kept[i]; p != nil {
			c.out[i], docErrs[j] = r.rewrite(c.docs[i], p, known)
			p.Release()
			return
		}
		defer c.budget.Give(takeFor(c.budget, c.docs[i], r.keys))
		c.out[i], docErrs[j] = r.edit(c.docs[i], known)
	})
	c.kept = nil // released, each by the worker that used it
	if err != nil {
		return err
	}
	for _, err := range docErrs {
		if err != nil {
			return err
		}
	}
	return nil
}

// edit parses document d and rewrites its image fields and checksums. It
// calls digest for each image field; digest returns the digest to pin to
// ("" to keep the image as written) and false when it is not known yet.
// edit returns the document's output (its raw bytes when nothing
// changed), or a Piece not done when a digest is not known yet.
func (r *Renderer) edit(d *document, digest func(use) (string, bool)) (stream.Piece, error) {
	p, err := r.parse(d)
	if p == nil || err != nil {
		return stream.Unchanged(d.Document), err
	}
	defer p.Release()
	return r.rewrite(d, p, digest)
}

// rewrite finds the image fields of parsed document p and applies them,
// as edit does.
func (r *Renderer) rewrite(d *document, p *stream.Parsed, digest func(use) (string, bool)) (stream.Piece, error) {
	f := founds.Get().(*found)
	f.uses = f.uses[:0]
	r.find(d, p, f)
	out, err := r.applyFound(d, p, f, digest)
	founds.Put(f) // the output and the notes refer to nothing of it
	return out, err
}

// founds holds the memory of what the last phase found in a document
// (its uses, sites and sums) for the next: the first phase keeps one a
// batch.
var founds = sync.Pool{New: func() any { return new(found) }}

// applyFound applies f, found in p, and when p is a tree from the quick
// reader that only the encoder can change (stream.ErrEncode) parses d
// again in full, finds again in that tree, and applies that. The uses
// found again are those of f, not reported again: digest is asked again
// for each.
func (r *Renderer) applyFound(d *document, p *stream.Parsed, f *found, digest func(use) (string, bool)) (stream.Piece, error) {
	b, err := r.apply(d, p, f, digest)
	if !errors.Is(err, stream.ErrEncode) {
		return b, err
	}
	if p, err = stream.ParseFull(d.Document); p == nil || err != nil {
		// The quick reader read it, so yaml.v3 reads it too: not reached.
		return stream.Piece{}, fmt.Errorf("%s: parsing again: %w", d.Where(), cmpOr(err, stream.ErrEncode))
	}
	var again found
	r.find(d, p, &again)
	return r.apply(d, p, &again, digest)
}

// cmpOr returns err, or def when err is nil.
func cmpOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}
