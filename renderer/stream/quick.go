package stream

import (
	"bytes"
	"encoding/binary"
	"strings"
	"sync"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// quickParse parses a document body written in the plain block style that
// Helm's templates and toYaml write, into the node tree that yaml.v3's
// decoder makes of it, comments aside (the tree is never encoded: a
// document whose change needs the encoder is parsed again in full). It is
// a shortcut, not a second meaning: it reports false for anything outside
// the small subset of YAML it reads, and the caller then parses the
// document with yaml.v3. The subset, line by line after blank and comment
// lines: block mappings whose keys are plain words or quoted strings
// without escapes, block sequences ("- " items, compact mappings in
// them), and scalars that are plain, quoted without escapes, or flow
// collections on one line: sequences and mappings of plain words, such
// quoted scalars and flow collections, as charts write resources,
// selectors and arguments ("{cpu: 500m}", "[--port, "80"]"), or literal
// block scalars ("|", "|-", as toYaml writes text over several lines).
// CRLF line breaks read as LF, as ParseFull reads them. Outside it: any
// byte but printable ASCII, LF and the CR of a CRLF (tabs, Unicode),
// anchors, aliases, tags, merge keys, folded and keeping block scalars
// (">", "|+") and those with an indentation indicator, plain scalars over
// several lines or with blanks in a flow collection, flow collections
// over several lines, directives and document markers. Nodes carry
// the line and column yaml.v3 gives them and the tag it resolves (through
// yaml.Node.ShortTag, yaml.v3's own resolver). FuzzQuickParse holds it to
// yaml.v3 on arbitrary input.
//
// The tree's first nodes come from blk when it is not nil (they are
// cleared first): the caller gives blk back to quickBlocks once nothing
// refers to the tree, so that the next document reuses them.
func quickParse(body []byte, blk *quickBlock) (*yaml.Node, bool) {
	crlf := false
	for i, c := range body {
		if (c < 0x20 || c > 0x7e) && c != '\n' {
			if c != '\r' || i+1 == len(body) || body[i+1] != '\n' {
				return nil, false
			}
			crlf = true
		}
	}
	q := quickParser{src: string(body), line: 1}
	if crlf {
		q.src = withoutCR(body)
	}
	// Block style spends a line on a key and its value, or on a
	// collection, a key and a value: about two nodes a line; flow style
	// spends more, which the block learns from the documents before (a
	// stream's documents are alike). A huge document gets its nodes as it
	// goes, so that one this leaves to yaml.v3 has not cost a tree's
	// worth first.
	if blk == nil {
		blk = new(quickBlock)
	}
	estimate := 2*bytes.Count(body, newline) + 16
	q.nodes, q.ptrs = blk.take(min(estimate+blk.more, maxQuickBlock))
	q.stack = blk.stack[:0]
	doc, ok := q.document()
	// The stack holds nothing after a tree, and the children of a parse
	// given up: cleared for the next.
	clear(q.stack)
	blk.stack = q.stack[:0]
	blk.more = min(max(q.used-estimate, 0), maxQuickBlock)
	return doc, ok
}

// maxQuickBlock bounds the nodes a quickBlock holds: a larger tree takes
// the rest as it goes.
const maxQuickBlock = 4096

// document reads the document node and its content, a mapping.
func (q *quickParser) document() (*yaml.Node, bool) {
	l, ok := q.peek()
	if !ok {
		return nil, false
	}
	doc := q.node(yaml.DocumentNode, l.line, l.indent)
	root, ok := q.block(l, 0)
	if !ok {
		return nil, false
	}
	if root.Kind != yaml.MappingNode {
		return nil, false // the parse says what is wrong with it
	}
	if _, more := q.peek(); more || q.failed {
		return nil, false
	}
	doc.Content = []*yaml.Node{root}
	return doc, true
}

// quickValid reports whether yaml.v3 reads body as one document that is
// a mapping, or as nothing (blank and comment lines), without building a
// tree: for the documents without an image field, which are only
// checked. It reads what quickParse reads, and block scalars ("|", ">-",
// without an indentation indicator) and characters beyond ASCII that are
// no line break; false says only that it cannot tell, and yaml.v3 then
// decides. FuzzQuickValid holds it to yaml.v3 on arbitrary input.
func quickValid(body []byte) bool {
	if !quickChars(body) {
		// CRLF line breaks are read as LF, as ParseFull reads them;
		// lines and columns stay.
		if bytes.IndexByte(body, '\r') < 0 {
			return false
		}
		lf := withoutCR(body)
		if len(lf) == len(body) || !quickChars([]byte(lf)) {
			return false // a CR that no LF follows
		}
		body = []byte(lf)
	}
	// The parser reads a copy of body (the project uses no unsafe, and
	// the input may be a mapping that is unmapped later: a copy is a
	// memmove, far cheaper than the check); it is reused, for it points
	// to its scratch node.
	c := quickCheckers.Get().(*quickChecker)
	defer func() {
		c.q.src = ""
		quickCheckers.Put(c)
	}()
	c.q = quickParser{src: string(body), line: 1, check: true, scratch: &c.scratch}
	q := &c.q
	l, ok := q.peek()
	if !ok {
		return !q.failed
	}
	if q.isEntry(l.start + l.indent) {
		return false // a sequence: the parse says what is wrong with it
	}
	if _, ok := q.block(l, 0); !ok {
		return false
	}
	_, more := q.peek()
	return !more && !q.failed
}

// withoutCR returns body as a string with each CR that an LF follows
// taken out: CRLF line breaks read as LF, as yaml.v3 reads them (also
// inside a block scalar, whose line breaks it makes LF). A CR that no LF
// follows stays.
func withoutCR(body []byte) string {
	var b strings.Builder
	b.Grow(len(body))
	for {
		i := bytes.IndexByte(body, '\r')
		for i >= 0 && i+1 < len(body) && body[i+1] != '\n' {
			// A lone CR stays; look past it.
			j := bytes.IndexByte(body[i+1:], '\r')
			if j < 0 {
				i = -1
				break
			}
			i += 1 + j
		}
		if i < 0 || i+1 == len(body) {
			b.Write(body)
			return b.String()
		}
		b.Write(body[:i])
		body = body[i+1:]
	}
}

// quickChecker is a parser of quickValid and its scratch node, apart so
// that quickParse's parsers stay small.
type quickChecker struct {
	q       quickParser
	scratch yaml.Node
}

// quickCheckers are the parsers of quickValid.
var quickCheckers = sync.Pool{New: func() any { return new(quickChecker) }}

// quickChars reports whether body holds only characters that quickValid
// reads: printable ASCII, LF, and beyond ASCII what YAML allows but line
// breaks (U+0085, U+2028, U+2029) and byte order marks, in UTF-8.
func quickChars(body []byte) bool {
	const ones, highs, lows = 0x0101010101010101, 0x8080808080808080, 0x7f7f7f7f7f7f7f7f
	for i := 0; i < len(body); {
		// Eight bytes at a time while each is printable ASCII or LF. Of
		// each byte's low seven bits: +0x60 sets the high bit when they
		// are 0x20 or more, +1 when they are 0x7f, and x^0xa+0x7f when
		// they are not LF; no sum carries into the next byte.
		for ; i+8 <= len(body); i += 8 {
			w := binary.LittleEndian.Uint64(body[i:])
			low := w & lows
			control := ^(low + 0x60*ones) & ((low ^ 0x0a*ones) + lows)
			if (w|(low+ones)|control)&highs != 0 {
				break
			}
		}
		if i == len(body) {
			break
		}
		c := body[i]
		if c >= 0x20 && c < 0x7f || c == '\n' {
			i++
			continue
		}
		if c < 0x80 {
			return false // a tab, a CR or a control character
		}
		r, size := utf8.DecodeRune(body[i:])
		if r < 0xa0 || r == 0x2028 || r == 0x2029 || r == 0xfeff || r == 0xfffe || r == 0xffff || r == utf8.RuneError {
			return false
		}
		i += size
	}
	return true
}

// blockScalar checks, for quickValid, the block scalar whose header ("|"
// or ">", perhaps with a chomping indicator, then a comment or nothing)
// is at offset at of a line that ends at eol, the value of a collection
// at column col. Its content is the lines after that are blank or
// indented at least as much as the first one that is not blank, which
// must be indented more than col (else the scalar is empty); anything
// goes in them. It does not make the value.
func (q *quickParser) blockScalar(at, eol, col int) bool {
	s := q.src
	i := at + 1
	if i < eol && (s[i] == '-' || s[i] == '+') {
		i++
	}
	// An indentation indicator, or anything but blanks and a comment
	// after a blank, is left to yaml.v3.
	if i < eol && s[i] != ' ' {
		return false
	}
	for i < eol && s[i] == ' ' {
		i++
	}
	if i < eol && s[i] != '#' || q.hasPeeked {
		return false
	}
	// The lines after the header, not peeked: a line that looks like a
	// comment is content here.
	indent, blank := 0, 0 // the content's indentation; the most blanks of the blank lines before it
	for q.off < len(s) {
		start := q.off
		end := strings.IndexByte(s[start:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		sp := 0
		for start+sp < end && s[start+sp] == ' ' {
			sp++
		}
		switch {
		case start+sp == end:
			if indent == 0 {
				blank = max(blank, sp)
			}
		case indent == 0 && sp <= col:
			return true // an empty scalar; the line is the collection's
		case indent == 0:
			if blank > sp {
				// Blank lines more indented than the first content:
				// left to yaml.v3.
				return false
			}
			indent = sp
		case sp < indent:
			return true
		}
		q.off, q.line = min(end+1, len(s)), q.line+1
	}
	return true
}

// literal reads the literal block scalar whose header, "|" or "|-" then
// blanks and a comment or nothing, is at offset at of line line (which
// starts at ls and ends at eol), the value of a collection at column col;
// blockScalar finds its lines. Its value is each line without the
// content's indentation (a blank line no more indented is empty, one more
// indented keeps its blanks beyond), joined with LF, clipped to one LF
// at the end or stripped of it. Folded scalars (">"), keeping ("|+"),
// a scalar without content and one whose last line has no line break are
// left to yaml.v3.
func (q *quickParser) literal(line, ls, at, eol, col int) (*yaml.Node, bool) {
	s := q.src
	if s[at] != '|' || at+1 < eol && s[at+1] == '+' {
		return nil, false
	}
	strip := at+1 < eol && s[at+1] == '-'
	start := q.off
	if !q.blockScalar(at, eol, col) {
		return nil, false
	}
	text := s[start:q.off]
	var b strings.Builder
	b.Grow(len(text))
	indent, breaks := 0, 0 // the content's indentation; line breaks owed before the next content line
	for len(text) > 0 {
		end := strings.IndexByte(text, '\n')
		if end < 0 {
			return nil, false // the last line has no line break
		}
		l := text[:end]
		text = text[end+1:]
		sp := 0
		for sp < len(l) && l[sp] == ' ' {
			sp++
		}
		if sp == len(l) && (indent == 0 || sp <= indent) {
			breaks++ // a blank line
			continue
		}
		if indent == 0 {
			indent = sp
		}
		for ; breaks > 0; breaks-- {
			b.WriteByte('\n')
		}
		b.WriteString(l[indent:])
		breaks = 1
	}
	if indent == 0 {
		return nil, false // no content
	}
	if !strip {
		b.WriteByte('\n')
	}
	n := q.node(yaml.ScalarNode, line, at-ls)
	n.Style, n.Tag, n.Value = yaml.LiteralStyle, "!!str", b.String()
	return n, true
}

// quickBlock holds the nodes and content slices of one quickParse tree,
// for the next tree once that one is done with. A stream of thousands of
// documents otherwise makes a tree's worth of garbage for each (most of
// what a Render allocates), and a garbage collector that runs that much
// more often, with more garbage live when it does.
type quickBlock struct {
	nodes []yaml.Node
	ptrs  []*yaml.Node
	// stack is the parser's stack of children, empty between trees.
	stack []*yaml.Node
	// more is how many nodes the last tree took beyond the estimate from
	// its lines (flow style spells several on a line): the next tree's
	// block holds that many more.
	more int
}

// quickBlocks are the quickBlocks of trees done with.
var quickBlocks = sync.Pool{New: func() any { return new(quickBlock) }}

// take returns n cleared nodes and n nil pointers, from the block's
// memory when it has that many.
func (b *quickBlock) take(n int) ([]yaml.Node, []*yaml.Node) {
	if cap(b.nodes) < n {
		b.nodes, b.ptrs = make([]yaml.Node, n), make([]*yaml.Node, n)
		return b.nodes, b.ptrs
	}
	nodes, ptrs := b.nodes[:n], b.ptrs[:n]
	clear(nodes)
	clear(ptrs)
	return nodes, ptrs
}

// quickParser reads a body line by line.
type quickParser struct {
	src  string
	off  int // offset of the next line not read yet
	line int // its 1-based number
	// peeked is the content line peeked at, when hasPeeked (a flag, not
	// a pointer to it: a parser that points into itself is moved to the
	// heap).
	peeked    qLine
	hasPeeked bool
	// failed is set where the body leaves the subset.
	failed bool
	// Nodes and content slices come from blocks, a few allocations a
	// document rather than one a node.
	nodes []yaml.Node
	ptrs  []*yaml.Node
	stack []*yaml.Node // the children of the collections being read
	used  int          // the nodes the tree took
	// check says that the parser only checks the document (quickValid):
	// every node is scratch, nothing is kept, and block scalars are read.
	check   bool
	scratch *yaml.Node
}

// qLine is a content line: neither blank nor a comment.
type qLine struct {
	start, end int // offsets of its first byte and of its end (its LF or the end)
	indent     int // its leading spaces
	line       int
}

// maxQuickDepth bounds the nesting quickParse follows.
const maxQuickDepth = 64

// maxQuickKey bounds the length of a key: yaml.v3 (like libyaml) looks
// for the ":" of a simple key within 1024 characters of its start.
const maxQuickKey = 512

// peek returns the next content line without consuming it.
func (q *quickParser) peek() (qLine, bool) {
	if q.hasPeeked {
		return q.peeked, true
	}
	for q.off < len(q.src) {
		start, line := q.off, q.line
		end := strings.IndexByte(q.src[start:], '\n')
		if end < 0 {
			end = len(q.src)
			q.off = end
		} else {
			end += start
			q.off = end + 1
		}
		q.line++
		indent := 0
		for start+indent < end && q.src[start+indent] == ' ' {
			indent++
		}
		if start+indent == end || q.src[start+indent] == '#' {
			continue // blank or a comment
		}
		if indent == 0 {
			// Directives and document markers are outside the subset.
			t := q.src[start:end]
			if t[0] == '%' || strings.HasPrefix(t, "---") || strings.HasPrefix(t, "...") {
				q.failed = true
				return qLine{}, false
			}
		}
		q.peeked = qLine{start: start, end: end, indent: indent, line: line}
		q.hasPeeked = true
		return q.peeked, true
	}
	return qLine{}, false
}

// take consumes the line peek returned.
func (q *quickParser) take() { q.hasPeeked = false }

// node returns a new node at a 1-based line and a 0-based column.
func (q *quickParser) node(kind yaml.Kind, line, col int) *yaml.Node {
	if q.check {
		return q.scratch
	}
	if len(q.nodes) == 0 {
		q.nodes = make([]yaml.Node, 64)
	}
	q.used++
	n := &q.nodes[0]
	q.nodes = q.nodes[1:]
	n.Kind, n.Line, n.Column = kind, line, col+1
	switch kind {
	case yaml.MappingNode:
		n.Tag = "!!map"
	case yaml.SequenceNode:
		n.Tag = "!!seq"
	}
	return n
}

// push pushes node n, a child of the collection being read.
func (q *quickParser) push(n *yaml.Node) {
	if !q.check {
		q.stack = append(q.stack, n)
	}
}

// children moves the nodes pushed since base into a content slice of
// their own, capped so that appending to it never reaches another's.
func (q *quickParser) children(base int) []*yaml.Node {
	n := len(q.stack) - base
	if n == 0 {
		return nil
	}
	if len(q.ptrs) < n {
		q.ptrs = make([]*yaml.Node, max(64, n))
	}
	out := q.ptrs[:n:n]
	q.ptrs = q.ptrs[n:]
	copy(out, q.stack[base:])
	clear(q.stack[base:])
	q.stack = q.stack[:base]
	return out
}

// block reads the collection that starts at line l (the first line of
// the document, or after a key or a "-" with no value on its line): a
// sequence or a mapping at l's indentation.
func (q *quickParser) block(l qLine, depth int) (*yaml.Node, bool) {
	if depth > maxQuickDepth {
		return nil, false
	}
	if q.isEntry(l.start + l.indent) {
		return q.sequence(l, depth)
	}
	return q.mapping(l, l.start+l.indent, l.indent, depth)
}

// isEntry reports whether a sequence entry ("-" then a blank or the end
// of the line) starts at offset at.
func (q *quickParser) isEntry(at int) bool {
	return q.src[at] == '-' && (at+1 == len(q.src) || q.src[at+1] == ' ' || q.src[at+1] == '\n')
}

// mapping reads a block mapping at column col whose first key starts at
// offset at on line l (which was peeked, or holds the compact mapping of
// a sequence entry).
func (q *quickParser) mapping(l qLine, at, col, depth int) (*yaml.Node, bool) {
	m := q.node(yaml.MappingNode, l.line, col)
	q.take()
	base := len(q.stack)
	for {
		if !q.entry(l, at, col, depth) {
			return nil, false
		}
		next, ok := q.peek()
		if !ok || next.indent < col {
			break
		}
		if next.indent > col || q.isEntry(next.start+next.indent) {
			return nil, false
		}
		q.take()
		l, at = next, next.start+next.indent
	}
	m.Content = q.children(base)
	return m, !q.failed
}

// entry reads one "key: value" of a mapping at column col, the key at
// offset at of line l, and pushes the key and the value.
func (q *quickParser) entry(l qLine, at, col, depth int) bool {
	line, ls, eol := l.line, l.start, l.end
	k, rest, ok := q.key(line, ls, at, eol)
	if !ok {
		return false
	}
	q.push(k)
	colon := rest - 1 // rest is just after the ":"
	for rest < eol && q.src[rest] == ' ' {
		rest++
	}
	if rest < eol && q.src[rest] != '#' {
		if !q.value(line, ls, rest, eol, col) {
			return false
		}
		// A more indented line next would continue a plain scalar, or
		// be an error.
		if next, ok := q.peek(); ok && next.indent > col {
			return false
		}
		return !q.failed
	}
	// No value on the line: a collection on the next lines, more indented
	// (or a sequence at the key's indentation), else null.
	next, ok := q.peek()
	if q.failed {
		return false
	}
	if ok && (next.indent > col || next.indent == col && q.isEntry(next.start+next.indent)) {
		v, ok := q.block(next, depth+1)
		if !ok {
			return false
		}
		q.push(v)
		return true
	}
	q.push(q.null(line, colon-ls+1))
	return true
}

// null returns an empty null scalar, where yaml.v3 puts one: just after
// the indicator (":" or "-") that has no value.
func (q *quickParser) null(line, col int) *yaml.Node {
	n := q.node(yaml.ScalarNode, line, col)
	n.Tag = "!!null"
	return n
}

// sequence reads a block sequence whose first entry is line l.
func (q *quickParser) sequence(l qLine, depth int) (*yaml.Node, bool) {
	col := l.indent
	s := q.node(yaml.SequenceNode, l.line, col)
	base := len(q.stack)
	for {
		q.take()
		dash := l.start + col
		eol := l.end
		at := dash + 1
		for at < eol && q.src[at] == ' ' {
			at++
		}
		switch {
		case at == eol || q.src[at] == '#':
			// No value on the line: a collection on the next lines, more
			// indented, else null.
			n, ok := q.peek()
			if q.failed {
				return nil, false
			}
			if ok && n.indent > col {
				v, ok := q.block(n, depth+1)
				if !ok {
					return nil, false
				}
				q.push(v)
			} else {
				q.push(q.null(l.line, col+1))
			}
		case q.isEntry(at):
			return nil, false // "- - x": a sequence in a sequence
		case q.isKey(at, eol):
			if depth+1 > maxQuickDepth {
				return nil, false
			}
			v, ok := q.mapping(l, at, at-l.start, depth+1)
			if !ok {
				return nil, false
			}
			q.push(v)
		default:
			if !q.value(l.line, l.start, at, eol, col) {
				return nil, false
			}
			if n, ok := q.peek(); ok && n.indent > col {
				return nil, false
			}
		}
		n, ok := q.peek()
		if q.failed {
			return nil, false
		}
		if !ok || n.indent != col || !q.isEntry(n.start+n.indent) {
			if ok && n.indent > col {
				return nil, false
			}
			break
		}
		l = n
	}
	s.Content = q.children(base)
	return s, true
}

// isKey reports whether a key and its ":" start at offset at.
func (q *quickParser) isKey(at, eol int) bool {
	end, ok := q.keyEnd(at, eol)
	return ok && end < eol && q.src[end] == ':' && (end+1 == eol || q.src[end+1] == ' ')
}

// keyEnd returns the offset just after the key token at offset at: a
// plain word or a quoted string without escapes.
func (q *quickParser) keyEnd(at, eol int) (int, bool) {
	s := q.src[:eol]
	switch c := s[at]; {
	case c == '"' || c == '\'':
		i := strings.IndexByte(s[at+1:], c)
		if i < 0 || c == '"' && strings.IndexByte(s[at+1:at+1+i], '\\') >= 0 {
			return 0, false
		}
		end := at + 2 + i
		if c == '\'' && end < eol && s[end] == '\'' {
			return 0, false // an escaped quote
		}
		return end, end-at <= maxQuickKey
	case isWordStart(c):
		end := at + 1
		for end < eol && isWord(s[end]) {
			end++
		}
		return end, end-at <= maxQuickKey
	}
	return 0, false
}

// key reads the key at offset at and its ":", and returns the key's node
// and the offset after the ":".
func (q *quickParser) key(line, ls, at, eol int) (*yaml.Node, int, bool) {
	end, ok := q.keyEnd(at, eol)
	if !ok || end >= eol || q.src[end] != ':' || end+1 < eol && q.src[end+1] != ' ' {
		return nil, 0, false
	}
	k, ok := q.scalar(line, ls, at, end)
	return k, end + 1, ok
}

// isWordStart and isWord say which bytes a plain key is made of.
func isWordStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

func isWord(c byte) bool { return isWordStart(c) || c == '.' || c == '/' || c == '-' }

// scalar returns the node of the scalar token src[at:end]: quoted, or
// plain (its tag resolved as yaml.v3 resolves it), on a line that starts
// at offset ls.
func (q *quickParser) scalar(line, ls, at, end int) (*yaml.Node, bool) {
	n := q.node(yaml.ScalarNode, line, at-ls)
	switch q.src[at] {
	case '"':
		n.Style, n.Tag, n.Value = yaml.DoubleQuotedStyle, "!!str", q.src[at+1:end-1]
	case '\'':
		n.Style, n.Tag, n.Value = yaml.SingleQuotedStyle, "!!str", q.src[at+1:end-1]
	default:
		// yaml.v3 tags a plain "<<" as a merge key wherever it is, not
		// through its resolver.
		if n.Value = q.src[at:end]; n.Value == "<<" {
			return nil, false
		}
		if !q.check {
			n.Tag = plainTag(n)
		}
	}
	return n, true
}

// plainTag returns the tag yaml.v3 resolves plain scalar n to. Its
// resolver reads a scalar as anything but a string only when the first
// byte hints at it (resolveTable in go.yaml.in/yaml/v3's resolve.go: a
// sign, a digit, a dot, "~", or the first letter of true, false, null,
// yes, no, on, off in any case): the other scalars are strings without
// asking it.
func plainTag(n *yaml.Node) string {
	if n.Value != "" && !strings.ContainsRune("+-0123456789.~yYnNtTfFoO", rune(n.Value[0])) {
		return "!!str"
	}
	return n.ShortTag()
}

// value reads the value that starts at offset at of line line (which
// starts at ls and ends at eol), of a collection at column col, and
// pushes it: what inline reads, or when only checking a block scalar.
func (q *quickParser) value(line, ls, at, eol, col int) bool {
	if c := q.src[at]; c == '|' || c == '>' {
		if q.check {
			return q.blockScalar(at, eol, col)
		}
		n, ok := q.literal(line, ls, at, eol, col)
		if ok {
			q.push(n)
		}
		return ok
	}
	v, ok := q.inline(line, ls, at, eol)
	if ok {
		q.push(v)
	}
	return ok
}

// inline reads the value that starts at offset at and goes at most to
// eol: a scalar, a flow sequence of scalars, or "{}"; only blanks and a
// comment may follow it.
func (q *quickParser) inline(line, ls, at, eol int) (*yaml.Node, bool) {
	s := q.src
	var n *yaml.Node
	var end int
	switch c := s[at]; c {
	case '"', '\'':
		i := strings.IndexByte(s[at+1:eol], c)
		if i < 0 || c == '"' && strings.IndexByte(s[at+1:at+1+i], '\\') >= 0 {
			return nil, false
		}
		end = at + 2 + i
		if c == '\'' && end < eol && s[end] == '\'' {
			return nil, false
		}
		var ok bool
		if n, ok = q.scalar(line, ls, at, end); !ok {
			return nil, false
		}
	case '[', '{':
		var ok bool
		if n, end, ok = q.flow(line, ls, at, eol, 0); !ok {
			return nil, false
		}
	default:
		if !plainStart(s, at, eol) {
			return nil, false
		}
		// A plain scalar ends at a comment (" #") or the end of the
		// line; a ": " in it, or a ":" at its end, would be a mapping.
		end = eol
		if i := strings.Index(s[at:eol], " #"); i >= 0 {
			end = at + i
		}
		for end > at && s[end-1] == ' ' {
			end--
		}
		if v := s[at:end]; strings.Contains(v, ": ") || strings.HasSuffix(v, ":") {
			return nil, false
		}
		var ok bool
		if n, ok = q.scalar(line, ls, at, end); !ok {
			return nil, false
		}
		return n, true
	}
	// After a quoted scalar or a flow collection: blanks, then a comment
	// (after a blank) or the end of the line.
	rest := end
	for rest < eol && s[rest] == ' ' {
		rest++
	}
	if rest < eol && (s[rest] != '#' || rest == end) {
		return nil, false
	}
	return n, true
}

// plainStart reports whether a plain scalar may start at offset at: not
// with an indicator, but for a "-" that a non-blank follows.
func plainStart(s string, at, eol int) bool {
	switch s[at] {
	case '-':
		return at+1 < eol && s[at+1] != ' '
	case '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return false
	}
	return true
}

// flow reads the flow collection that starts at offset at ("[" or "{")
// and ends on its line, which ends at eol, and returns it and the offset
// after its closing bracket. Its items are scalars (plain words, or
// quoted without escapes) and flow collections of such, depth levels
// deep so far; a flow mapping's entries are a scalar key, ": " and a
// value. Anything else (a key without a value, a single-pair mapping in
// a sequence, a trailing comma, plain scalars with blanks or indicators,
// a collection over several lines) is left to yaml.v3.
func (q *quickParser) flow(line, ls, at, eol, depth int) (*yaml.Node, int, bool) {
	if depth > maxQuickDepth {
		return nil, 0, false
	}
	s := q.src
	kind, closer := yaml.SequenceNode, byte(']')
	if s[at] == '{' {
		kind, closer = yaml.MappingNode, '}'
	}
	n := q.node(kind, line, at-ls)
	n.Style = yaml.FlowStyle
	base := len(q.stack)
	i := skipBlanks(s, at+1, eol)
	if i < eol && s[i] == closer {
		return n, i + 1, true
	}
	for {
		if kind == yaml.MappingNode {
			k, end, ok := q.flowScalar(line, ls, i, eol)
			if !ok || end-i > maxQuickKey || end+1 >= eol || s[end] != ':' || s[end+1] != ' ' {
				return nil, 0, false
			}
			q.push(k)
			i = skipBlanks(s, end+1, eol)
		}
		var v *yaml.Node
		var ok bool
		if i < eol && (s[i] == '[' || s[i] == '{') {
			v, i, ok = q.flow(line, ls, i, eol, depth+1)
		} else {
			v, i, ok = q.flowScalar(line, ls, i, eol)
		}
		if !ok {
			return nil, 0, false
		}
		q.push(v)
		if i = skipBlanks(s, i, eol); i >= eol {
			return nil, 0, false
		}
		switch s[i] {
		case closer:
			// n is the scratch node when only checking: kind, not n.Kind.
			n.Content = q.children(base)
			return n, i + 1, true
		case ',':
			i = skipBlanks(s, i+1, eol)
			if i < eol && (s[i] == ']' || s[i] == '}') {
				return nil, 0, false // a trailing comma
			}
		default:
			return nil, 0, false
		}
	}
}

// flowScalar reads the scalar of a flow collection at offset at: quoted
// without escapes, or a plain word of isWord's bytes (a path such as
// "/tls" too; a "-" starts one only when a word's byte follows, as in
// "--port"); and returns it and the offset after it.
func (q *quickParser) flowScalar(line, ls, at, eol int) (*yaml.Node, int, bool) {
	s := q.src
	if at >= eol {
		return nil, 0, false
	}
	i := at
	switch c := s[i]; {
	case c == '"' || c == '\'':
		j := strings.IndexByte(s[i+1:eol], c)
		if j < 0 || c == '"' && strings.IndexByte(s[i+1:i+1+j], '\\') >= 0 {
			return nil, 0, false
		}
		i += 2 + j
		if c == '\'' && i < eol && s[i] == '\'' {
			return nil, 0, false // an escaped quote
		}
	case isWord(c) && c != '-' || c == '-' && i+1 < eol && isWord(s[i+1]):
		i++
		for i < eol && isWord(s[i]) {
			i++
		}
	default:
		return nil, 0, false
	}
	n, ok := q.scalar(line, ls, at, i)
	return n, i, ok
}

// skipBlanks returns the offset of the first byte from i on that is not
// a space, or eol.
func skipBlanks(s string, i, eol int) int {
	for i < eol && s[i] == ' ' {
		i++
	}
	return i
}
