package stream

import (
	"bytes"
	"sync"
)

// MaxNodes bounds the YAML nodes of one parsed document, estimated from
// its bytes before it is parsed (Estimate, an upper bound): TooLarge, and
// so Parse and Check, refuse a document that may hold more. A node takes
// some 400 bytes whatever the bytes that spelt it, so a Budget of
// MaxNodes holds parsing at some 400 MiB.
const MaxNodes = 1 << 20

// estimateNodes returns an upper bound of the nodes a YAML document body
// parses into, counted without parsing it. Every node but the document
// and its root starts on a line of its own or after an indicator (":", "-", ",", "[",
// "{", "?"), and a line or an indicator starts at most a collection, a
// key and a value: three nodes. The bound is far above the nodes of
// block-style YAML, where keys and values share a line, and tight for
// flow sequences, the cheapest spelling.
func estimateNodes(body []byte) int {
	n := 2 + 3*bytes.Count(body, []byte("\n"))
	for _, c := range []byte(":-,[{?") {
		n += 3 * bytes.Count(body, []byte{c})
	}
	return n
}

// Budget lets the workers that parse documents hold at most a given
// number of estimated nodes at once (Document.Estimate): a worker takes a
// document's estimate before parsing it and gives it back when it is done
// with the parse. It is safe for concurrent use.
type Budget struct {
	mu   sync.Mutex
	cond *sync.Cond
	left int
}

// NewBudget returns a budget of size nodes.
func NewBudget(size int) *Budget {
	b := &Budget{left: size}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// Take waits until n nodes are left, and takes them. n must be at most
// the budget's size, or Take never returns.
func (b *Budget) Take(n int) {
	b.mu.Lock()
	for b.left < n {
		b.cond.Wait()
	}
	b.left -= n
	b.mu.Unlock()
}

// Give gives n nodes back.
func (b *Budget) Give(n int) {
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
	b.cond.Broadcast()
}
