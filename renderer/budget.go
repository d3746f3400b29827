package renderer

import (
	"bytes"
	"sync"
)

// MaxNodes bounds the memory a Render takes for parsed documents. A
// document is parsed into a tree of YAML nodes, some 400 bytes each
// whatever the bytes that spelt them (a flow sequence "[a,a,…]" spends 2
// bytes of input on a node), so memory is bounded by nodes, not bytes:
// before a document is parsed its nodes are estimated from its bytes
// (an upper bound: see estimateNodes), a document that may hold more than
// MaxNodes is refused, and the workers that parse documents at once hold
// at most MaxNodes estimated nodes between them; parsing takes then at
// most some 400 MiB. The Kubernetes API server refuses a request body
// larger than 3 MiB, which holds fewer nodes than MaxNodes in any
// realistic spelling. A document without an image field is only checked
// (Kubernetes must be able to read it): in the plain block style Helm
// writes, without a tree, and then without bound; else parsed, and
// bounded alike.
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

// nodeBudget lets the workers of a Render hold at most max estimated
// nodes at once. A worker takes a document's estimate before parsing it
// and gives it back when it is done with the parse.
type nodeBudget struct {
	mu   sync.Mutex
	cond *sync.Cond
	left int
}

func newNodeBudget(size int) *nodeBudget {
	b := &nodeBudget{left: size}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// take waits until n nodes are left, and takes them. n must be at most
// the budget's max, or take never returns.
func (b *nodeBudget) take(n int) {
	b.mu.Lock()
	for b.left < n {
		b.cond.Wait()
	}
	b.left -= n
	b.mu.Unlock()
}

// takeFor takes the nodes document d may parse into (none when it cannot
// hold an image field, which check parses, if at all, within budget; at
// most the whole budget: parse refuses a larger one), and returns how
// many, for give.
func (b *nodeBudget) takeFor(d *document, keys [][]string) int {
	if !d.mayHold(keys) {
		return 0
	}
	n := min(d.estimate(), MaxNodes)
	b.take(n)
	return n
}

// give gives n nodes back.
func (b *nodeBudget) give(n int) {
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
	b.cond.Broadcast()
}
