package renderer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/renderer/stream"
)

// use is one image field found in a document.
type use struct {
	image    string // as written
	ref      name.Reference
	workload Workload
	doc      *document
	line     int // the body line of the field
}

// where describes where the field is for messages, as document.at does.
func (u use) where() string { return u.doc.At(u.line) }

// refUses is what the later phases need of the image fields of one
// reference: its first field, whose spelling and place the messages
// name, and the workload of every field, in stream order (the image's
// Workloads). A use is kept once, not per field: a stream of thousands
// of workloads repeats a few references.
type refUses struct {
	first     use
	workloads []Workload
}

// collection is what the first phase of a Render found.
type collection struct {
	docs []*document
	// out holds each document's output; nil bytes while it waits for a
	// digest.
	out []stream.Piece
	// kept holds the parses of waiting documents kept for the last phase,
	// by index: few documents, and none in a huge stream.
	kept map[int]*stream.Parsed
	// waiting are the indexes of the documents that wait for a digest.
	waiting []int
	// pending are the image fields of each reference (by ref.Name()),
	// order the references in the order the stream first uses them.
	pending map[string]*refUses
	order   []string
	// budget bounds the nodes parsed at once, in both phases that parse.
	budget *stream.Budget
	// finished are the notes of the documents that were final after
	// collect, in stream order: such a document is dropped from docs
	// (nil) once merged, for its output piece is all that the later
	// phases need of it.
	finished []docNotes
}

// docNotes are the notes of document i (0-based).
type docNotes struct {
	i int
	n *notes
}

// warnings returns what the documents of c warn about, once every one is
// done, in stream order: the image-like values left as tags, and the
// warnings of image fields kept as written.
func (c *collection) warnings() ([]Unpinned, []string) {
	all := c.finished
	for _, i := range c.waiting {
		if n := c.docs[i].notes; n != nil {
			all = append(all, docNotes{i, n})
		}
	}
	if len(c.waiting) > 0 {
		slices.SortFunc(all, func(a, b docNotes) int { return a.i - b.i })
	}
	var unpinned []Unpinned
	var kept []string
	for _, dn := range all {
		unpinned = append(unpinned, dn.n.unpinned...)
		kept = append(kept, dn.n.kept...)
	}
	return unpinned, kept
}

// collect parses every document and collects its images; it rewrites the
// documents whose images all carry digests. Documents are independent, so
// they are parsed on every core, a batch at a time; each batch's image
// fields are merged into pending in stream order as soon as the batches
// before it are done, so that a use of every field is never held at once.
// The parse of a document that waits is kept for the last phase while the
// kept documents are small (a chart's worth); beyond that they are parsed
// again, so that memory does not grow with a node tree for every document
// of a huge stream. Every document's errors are returned, joined.
func (r *Renderer) collect(ctx context.Context, docs []*document) (*collection, error) {
	c := &collection{
		docs:    docs,
		out:     make([]stream.Piece, len(docs)),
		kept:    map[int]*stream.Parsed{},
		pending: map[string]*refUses{},
		budget:  stream.NewBudget(MaxNodes),
	}
	m := &merger{c: c, done: map[int]*batchFound{}, names: map[string]string{}}
	var keptBytes, keptNodes atomic.Int64
	err := eachBatch(ctx, len(docs), func(start, end int) {
		b := &batchFound{start: start, end: end}
		for i := start; i < end; i++ {
			d := docs[i]
			p, err := r.collectDoc(c, i, b)
			if err != nil {
				b.errs = append(b.errs, err)
			}
			if p == nil {
				continue
			}
			if !c.out[i].Done() && err == nil && keptBytes.Add(int64(len(d.Raw))) <= maxKeptBytes &&
				keptNodes.Add(int64(d.Estimate())) <= maxKeptNodes {
				b.kept = append(b.kept, docParse{i, p})
			} else {
				p.Release()
			}
		}
		m.add(b)
	})
	if err != nil {
		return nil, err
	}
	if err := errors.Join(m.errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// collectDoc parses document i of c and finds its image fields, which it
// appends to b.uses; finding changes nothing. The resolver starts on each
// reference without a digest. A document whose digests the stream
// carries, all of them, needs no resolver: it is applied at once, into
// c.out[i]. A document that cannot hold an image field is only checked
// (check).
// It returns the parse (nil for a document that needs none), for collect
// to keep or release.
func (r *Renderer) collectDoc(c *collection, i int, b *batchFound) (*stream.Parsed, error) {
	d := c.docs[i]
	if !d.mayHold(r.keys) {
		// Nothing to pin: the document is written as it came, unless
		// Kubernetes could not read it.
		c.out[i] = stream.Unchanged(d.Document)
		return nil, r.check(d, c.budget)
	}
	defer c.budget.Give(takeFor(c.budget, d, r.keys))
	p, err := r.parse(d)
	if p == nil || err != nil {
		c.out[i] = stream.Unchanged(d.Document)
		return nil, err
	}
	f := &b.found
	f.uses = b.uses
	r.find(d, p, f)
	b.uses = f.uses
	c.out[i], err = r.applyFound(d, p, f, func(u use) (string, bool) {
		if dg, ok := u.ref.(name.Digest); ok {
			return dg.DigestStr(), true
		}
		r.inflight.start(u.ref)
		return "", false
	})
	return p, err
}

// batchFound is what collect found in the documents [start, end): their
// image fields and errors, in stream order.
type batchFound struct {
	start, end int
	uses       []use
	errs       []error
	kept       []docParse // the parses kept for the last phase
	// found is what the finder found in the document being collected,
	// its memory reused from one document to the next.
	found found
}

// docParse is the parse of document i (0-based).
type docParse struct {
	i int
	p *stream.Parsed
}

// merger merges the batches of collect into its collection in stream
// order, whichever core finished them. It is safe for concurrent use.
type merger struct {
	mu   sync.Mutex
	c    *collection
	next int                 // the start of the next batch to merge
	done map[int]*batchFound // batches done before the ones before them, by start
	errs []error             // the documents' errors, in stream order
	// names caches ref.Name() by the image as written, which it is a
	// function of: a stream repeats a few images in many fields.
	names map[string]string
}

// add merges b, and every batch done after it that it lets follow.
func (m *merger) add(b *batchFound) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done[b.start] = b
	for {
		b, ok := m.done[m.next]
		if !ok {
			return
		}
		delete(m.done, m.next)
		m.next = b.end
		m.errs = append(m.errs, b.errs...)
		for _, k := range b.kept {
			m.c.kept[k.i] = k.p
		}
		for _, u := range b.uses {
			k, ok := m.names[u.image]
			if !ok {
				k = u.ref.Name()
				m.names[u.image] = k
			}
			ru := m.c.pending[k]
			if ru == nil {
				ru = &refUses{first: u}
				m.c.pending[k] = ru
				m.c.order = append(m.c.order, k)
			}
			ru.workloads = append(ru.workloads, u.workload)
		}
		for i := b.start; i < b.end; i++ {
			if !m.c.out[i].Done() {
				m.c.waiting = append(m.c.waiting, i)
				continue
			}
			if n := m.c.docs[i].notes; n != nil {
				m.c.finished = append(m.c.finished, docNotes{i, n})
			}
			m.c.docs[i] = nil // done: its output is in out
		}
	}
}

// eachDoc calls fn(i) for every i in [0, n) on GOMAXPROCS goroutines. fn
// must touch only what belongs to index i. It checks ctx before each
// batch of documents, and returns its error (wrapped) when ctx is done;
// some documents are then left undone.
func eachDoc(ctx context.Context, n int, fn func(i int)) error {
	return eachBatch(ctx, n, func(start, end int) {
		for i := start; i < end; i++ {
			fn(i)
		}
	})
}

// eachBatch is eachDoc a batch at a time: it calls fn(start, end) for
// each batch of the indexes [0, n), which fn must take in turn.
func eachBatch(ctx context.Context, n int, fn func(start, end int)) error {
	// Workers take batches of documents: most documents cost next to
	// nothing, and one shared counter (or ctx check) per document would
	// cost more.
	const batch = 32
	var next atomic.Int64
	var stopped atomic.Bool
	work := func() {
		for !stopped.Load() {
			start := int(next.Add(batch) - batch)
			if start >= n {
				return
			}
			if ctx.Err() != nil {
				stopped.Store(true)
				return
			}
			fn(start, min(start+batch, n))
			// The workers take every core: between batches, let a
			// goroutine that became ready run (the resolver's requests,
			// started by the parse) instead of waiting for the
			// scheduler to preempt a worker.
			runtime.Gosched()
		}
	}
	if workers := min(runtime.GOMAXPROCS(0), n); workers <= 1 {
		work()
	} else {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(work)
		}
		wg.Wait()
	}
	if stopped.Load() {
		return fmt.Errorf("rendering %d documents: %w", n, context.Cause(ctx))
	}
	return nil
}

// imageKey is the cheap test for a document that may hold an image field:
// one without the word cannot, and is only checked, unless it holds a
// backslash (a double-quoted key may spell the word with escapes:
// "\x69mage") or a tag that could be !!binary (a key "!!binary aW1hZ2U="
// decodes to "image"; a tag is written "!!…", "!<…>", or with a handle
// that a %TAG directive names). An alias key names a node that spells
// the word in one of these ways.
var imageKey = []byte("image")

// mayHoldImage reports whether a document body may hold an image field:
// one named "image", or one that ImagePaths declare without the word,
// in a document that holds every word of one of keys (imageKeys).
func mayHoldImage(body []byte, keys [][]string) bool {
	return bytes.Contains(body, imageKey) || bytes.IndexByte(body, '\\') >= 0 ||
		bytes.Contains(body, []byte("!!")) || bytes.Contains(body, []byte("!<")) || bytes.Contains(body, []byte("%TAG")) ||
		slices.ContainsFunc(keys, func(words []string) bool {
			return !slices.ContainsFunc(words, func(w string) bool { return !bytes.Contains(body, []byte(w)) })
		})
}

// parse parses document d. It returns nil and no error for a document
// that cannot hold an image field: no "image" in it, only comments, null.
func (r *Renderer) parse(d *document) (*stream.Parsed, error) {
	if !d.mayHold(r.keys) {
		return nil, nil
	}
	return stream.Parse(d.Document, !r.noQuick)
}

// check refuses document d, which cannot hold an image field, where
// parse would refuse it if it could (stream.Check).
func (r *Renderer) check(d *document, budget *stream.Budget) error {
	return stream.Check(d.Document, budget, !r.noQuick)
}

// maxKeptBytes and maxKeptNodes bound the documents (in input bytes and
// estimated nodes) whose parse is kept between the first and the last
// phase of a Render: a parsed document takes some 30 times its size in
// block style, and more in flow style.
const (
	maxKeptBytes = 1 << 20
	maxKeptNodes = MaxNodes / 4
)

// document is a document of the stream, with what the renderer notes of
// it.
type document struct {
	*stream.Document
	// notes are what the pass that finishes the document found to warn
	// about; nil for none, as for most documents.
	notes *notes
	// holds caches mayHold: 0 not asked yet, 1 yes, 2 no.
	holds int8
}

// documents splits the stream in into its documents (stream.Split).
func documents(in []byte) ([]*document, error) {
	split, err := stream.Split(in)
	if err != nil {
		return nil, err
	}
	docs := make([]document, len(split))
	out := make([]*document, len(split))
	for i, d := range split {
		docs[i].Document = d
		out[i] = &docs[i]
	}
	return out, nil
}

// notes are the warnings of one document.
type notes struct {
	// kept are the warnings of the document's image fields kept as
	// written (KeepUnresolved).
	kept []string
	// unpinned are the image-like values of the document that no image
	// field reached.
	unpinned []Unpinned
}

// mayHold returns mayHoldImage of the document's body, asked once: the
// node budget and the parse both ask. Only the worker that owns the
// document may call it, with the keys of one Render.
func (d *document) mayHold(keys [][]string) bool {
	if d.holds == 0 {
		d.holds = 2
		if mayHoldImage(d.Body(), keys) {
			d.holds = 1
		}
	}
	return d.holds == 1
}

// takeFor takes from b the nodes document d may parse into (none when it
// cannot hold an image field, which check parses, if at all, within
// budget; at most the whole budget: parse refuses a larger one), and
// returns how many, for b.Give.
func takeFor(b *stream.Budget, d *document, keys [][]string) int {
	if !d.mayHold(keys) {
		return 0
	}
	n := min(d.Estimate(), MaxNodes)
	b.Take(n)
	return n
}
