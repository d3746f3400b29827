package renderer

import (
	"fmt"

	"github.com/digestpin/digestpin/renderer/stream"
)

// A document may have at most maxPartsFactor·(its nodes, as
// stream.Document.Estimate bounds them) + maxPartsBase parts read in
// all by the walks that follow aliases (Render's finder, in a document
// with aliases; Snapshot), counting those that an alias names again.
// Estimate counts some three times the nodes of block-style YAML, and
// a document written out reads each part once for each path that
// passes it.
const (
	maxPartsFactor = 1
	maxPartsBase   = 1 << 16
)

// fanOut bounds the work of reading one document through its aliases.
// The walks step into an object, a pod spec or an anchored node once,
// so nested aliases cannot make them grow exponentially (stream's guards
// refuse cycles and merge-key bombs); but an alias that names a large
// node again in many places (a pod spec of 10,000 containers that 20,000
// Pods of a List share) would make the work, and the images' uses
// recorded, grow with the square of the document. Each walk spends the
// parts it reads; a document that needs more than its bound is refused,
// with the line where the bound ran out. A nil *fanOut spends nothing.
type fanOut struct {
	left, limit int
	// at is the body line of the object being read, which its reader
	// sets; line is at when spend first ran out, 0 before.
	at, line int
	// what the reader reads, for the error: "its pod templates".
	what string
}

// newFanOut returns the bound of document d, for a reader of what.
func newFanOut(d *stream.Document, what string) *fanOut {
	limit := maxPartsFactor*d.Estimate() + maxPartsBase
	return &fanOut{left: limit, limit: limit, what: what}
}

// spend takes n parts, and reports whether there were as many left;
// once they run out, it keeps reporting false.
func (b *fanOut) spend(n int) bool {
	if b == nil {
		return true
	}
	if b.left -= n; b.left < 0 {
		if b.line == 0 {
			b.line = max(b.at, 1)
		}
		return false
	}
	return true
}

// over reports whether spend ran out.
func (b *fanOut) over() bool { return b != nil && b.line > 0 }

// keyError is the error of a document that b ran out on, at the line of
// the object it ran out at, as a stream.KeyError for keyError to name the
// document, the line and the object.
func (b *fanOut) keyError() *stream.KeyError {
	return &stream.KeyError{Line: b.line, Msg: fmt.Sprintf("%s hold more than %d entries to read, counting those that aliases name again (the document's nodes plus %d): an alias names a large node in too many places", b.what, b.limit, maxPartsBase)}
}
