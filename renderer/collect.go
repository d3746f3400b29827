package renderer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/kustomize/kyaml/yaml"
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
func (u use) where() string { return u.doc.at(u.line) }

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
	out []piece
	// kept holds the parses of waiting documents kept for the last phase,
	// by index: few documents, and none in a huge stream.
	kept map[int]*parsed
	// waiting are the indexes of the documents that wait for a digest.
	waiting []int
	// pending are the image fields of each reference (by ref.Name()),
	// order the references in the order the stream first uses them.
	pending map[string]*refUses
	order   []string
	// budget bounds the nodes parsed at once, in both phases that parse.
	budget *nodeBudget
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
		out:     make([]piece, len(docs)),
		kept:    map[int]*parsed{},
		pending: map[string]*refUses{},
		budget:  newNodeBudget(MaxNodes),
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
			if c.out[i].b == nil && err == nil && keptBytes.Add(int64(len(d.raw))) <= maxKeptBytes &&
				keptNodes.Add(int64(d.estimate())) <= maxKeptNodes {
				b.kept = append(b.kept, docParse{i, p})
			} else {
				p.release()
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

// collectDoc parses document i of c and rewrites it when every digest is
// known, into c.out[i]; it appends the document's image fields to b.uses.
// A document that cannot hold an image field is only checked (check).
// It returns the parse (nil for a document that needs none), for collect
// to keep or release.
func (r *Renderer) collectDoc(c *collection, i int, b *batchFound) (*parsed, error) {
	d := c.docs[i]
	if !d.mayHold(r.keys) {
		// Nothing to pin: the document is written as it came, unless
		// Kubernetes could not read it.
		c.out[i] = piece{b: d.raw}
		return nil, r.check(d, c.budget)
	}
	from := len(b.uses) // where the document's fields start
	defer c.budget.give(c.budget.takeFor(d, r.keys))
	p, err := r.parse(d)
	if p == nil || err != nil {
		c.out[i] = piece{b: d.raw}
		return nil, err
	}
	c.out[i], err = r.rewriteDoc(d, p, func(u use) (string, bool) {
		b.uses = append(b.uses, u)
		if dg, ok := u.ref.(name.Digest); ok {
			return dg.DigestStr(), true
		}
		r.inflight.start(u.ref)
		return "", false
	}, func() { b.uses = b.uses[:from] })
	return p, err
}

// batchFound is what collect found in the documents [start, end): their
// image fields and errors, in stream order.
type batchFound struct {
	start, end int
	uses       []use
	errs       []error
	kept       []docParse // the parses kept for the last phase
}

// docParse is the parse of document i (0-based).
type docParse struct {
	i int
	p *parsed
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
			if m.c.out[i].b == nil {
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

// wideEncoding names the encoding of a stream in UTF-16 or UTF-32, told
// by its byte order mark or, as YAML does without one, by the zero bytes
// of its first ASCII character; it returns "" for UTF-8.
func wideEncoding(in []byte) string {
	switch {
	case bytes.HasPrefix(in, []byte{0, 0, 0xfe, 0xff}), bytes.HasPrefix(in, []byte{0xff, 0xfe, 0, 0}),
		len(in) >= 4 && in[0] == 0 && in[1] == 0 && in[2] == 0, len(in) >= 4 && in[1] == 0 && in[2] == 0 && in[3] == 0:
		return "UTF-32"
	case bytes.HasPrefix(in, []byte{0xfe, 0xff}), bytes.HasPrefix(in, []byte{0xff, 0xfe}),
		len(in) >= 2 && (in[0] == 0) != (in[1] == 0):
		return "UTF-16"
	}
	return ""
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

// parsed is a parsed document that may hold images.
type parsed struct {
	root    yaml.Node
	obj     *yaml.Node                  // the object: a mapping
	crlf    bool                        // the document's line breaks are CRLF
	aliases map[*yaml.Node][]*yaml.Node // anchored node → its aliases; nil: none
	// quick says that quickParse read the document: the tree has no
	// comments, and is not to be encoded (see rewriteDoc).
	quick bool
	// blk holds the nodes of a tree from quickParse, for release.
	blk *quickBlock
}

// release gives the memory of p's tree to the next quickParse. Nothing may
// use p or its nodes after: call it once the document's output is made
// (its pieces refer to no node).
func (p *parsed) release() {
	if p != nil && p.blk != nil {
		quickBlocks.Put(p.blk)
		p.blk = nil
	}
}

// parse parses document d. It returns nil and no error for a document
// that cannot hold an image field: no "image" in it, only comments, null.
func (r *Renderer) parse(d *document) (*parsed, error) {
	if !d.mayHold(r.keys) {
		return nil, nil
	}
	if err := d.tooLarge(); err != nil {
		return nil, err
	}
	// Most documents are in the plain block style that quickParse reads
	// in a fraction of yaml.v3's time: it gives the same tree (comments
	// aside), or gives up.
	if !r.noQuick {
		blk := quickBlocks.Get().(*quickBlock)
		if root, ok := quickParse(d.body(), blk); ok {
			// quickParse reads no anchor, alias or merge key: there is
			// nothing for checkAliases to refuse.
			p := &parsed{root: *root, quick: true, blk: blk}
			p.obj = p.root.Content[0]
			return p, nil
		}
		quickBlocks.Put(blk) // nothing refers to a tree it gave up on
	}
	return r.parseFull(d)
}

// check refuses document d, which cannot hold an image field, where
// parse would refuse it if it could: a document that Kubernetes could not
// read (malformed YAML, more than one YAML document, anything but a
// mapping or null). Comments and blank lines alone are a document too,
// an empty one. quickValid checks the plain block style without a tree,
// whatever its size; yaml.v3 parses the rest within the node budget,
// refusing as parse does one that could take more than MaxNodes, and the
// tree is dropped.
func (r *Renderer) check(d *document, budget *nodeBudget) error {
	if !r.noQuick && quickValid(d.body()) {
		return nil
	}
	if err := d.tooLarge(); err != nil {
		return err
	}
	n := d.estimate()
	budget.take(n)
	defer budget.give(n)
	_, err := r.parseFull(d)
	return err
}

// tooLarge refuses a document whose tree could take more memory than a
// Render may, before the parser builds it.
func (d *document) tooLarge() error {
	if n := d.estimate(); n > MaxNodes {
		return fmt.Errorf("%s: the document may hold up to %d YAML nodes (estimated from its %d bytes), more than digestpin parses in one document (MaxNodes %d)", d.where(), n, len(d.body()), MaxNodes)
	}
	return nil
}

// parseFull parses document d with yaml.v3, for parse and check.
func (r *Renderer) parseFull(d *document) (*parsed, error) {
	// CRLF line breaks are parsed as LF, so that comments carry no CR
	// into a re-encoded document; lines and columns stay the same.
	body, crlf := d.body(), bytes.Contains(d.body(), []byte("\r\n"))
	if crlf {
		body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	}
	// The stream was split where Kubernetes' YAML reader splits it; a
	// second YAML document in this one (after a "..." end marker, or a
	// "---" after a lone CR) is one that the API server never reads: it
	// decodes the first document of each, and ignores what follows.
	const unread = "which Kubernetes (kubectl, Helm, Argo CD) never reads: it reads only the first YAML document between two lines that start with \"---\""
	// A "---" line kept out of the body (plainMarker) starts the document
	// for the parser, and a "..." right after it ends it, empty: without
	// that line the parser would find no content before the "...".
	if d.head > d.sep {
		if at := contentStart(body); isEndMarker(body[at:]) {
			rest := at + len("...")
			if more := rest + contentStart(body[rest:]); more < len(body) {
				return nil, fmt.Errorf("%s: YAML after the end of the document, %s", d.at(1+bytes.Count(body[:more], newline)), unread)
			}
			return nil, nil
		}
	}
	p := &parsed{crlf: crlf}
	dec := yaml.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&p.root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // only comments
		}
		return nil, yamlError(d, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, fmt.Errorf("%s: a second YAML document starts here, %s", d.at(next.Line), unread)
	} else if !errors.Is(err, io.EOF) {
		line := 0
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		if at := contentStart(body); at < len(body) && body[at] == '{' {
			// kubectl reads a stream that begins with "{" as JSON
			// objects one after the other; digestpin reads one a document.
			return nil, fmt.Errorf("%s: more JSON after the document's object: digestpin reads one object a document; put a \"---\" line between objects", d.at(line))
		}
		return nil, fmt.Errorf("%s: YAML after the end of the document, %s", d.at(line), unread)
	}
	// Refuse aliases that would never end or cost more than the document.
	aliases, line, err := checkAliases(&p.root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.at(line), err)
	}
	p.aliases = aliases
	p.obj = deref(rootContent(&p.root))
	if p.obj == nil || (p.obj.Kind == yaml.ScalarNode && p.obj.Tag == "!!null") {
		return nil, nil
	}
	if p.obj.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a Kubernetes object (a mapping), found %s", d.at(p.obj.Line), kindName(p.obj))
	}
	return p, nil
}

// isEndMarker reports whether b starts with a "..." document end marker.
func isEndMarker(b []byte) bool {
	return bytes.HasPrefix(b, []byte("...")) && (len(b) == 3 || bytes.IndexByte([]byte(" \t\r\n"), b[3]) >= 0)
}

// maxKeptBytes and maxKeptNodes bound the documents (in input bytes and
// estimated nodes) whose parse is kept between the first and the last
// phase of a Render: a parsed document takes some 30 times its size in
// block style, and more in flow style.
const (
	maxKeptBytes = 1 << 20
	maxKeptNodes = MaxNodes / 4
)

// rootContent returns the top node of a parsed document.
func rootContent(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		return doc.Content[0]
	}
	return doc
}
