package stream

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// An edit replaces bytes [start, end) of a document with text: offsets of
// its body while splice makes it, of its raw bytes in a piece.
type edit struct {
	start, end int
	text       string
}

// Replacement sets a scalar to a new value, or replaces an alias in a
// mapping with a scalar of that value.
type Replacement struct {
	Node  *yaml.Node // the scalar (for an alias: the scalar it names)
	Value string
	// Alias is the alias that the field is written as, which is
	// replaced by a scalar in Parent (the mapping that holds the field,
	// or one it merges); or nil.
	Alias, Parent *yaml.Node
	// Flow says that the scalar is an item or value of a collection in
	// flow style ("[…]", "{…}"), where a plain scalar also ends before
	// ",", "]" or "}".
	Flow bool
	// Inner, when not nil, is a scalar of the document that Node's text
	// holds (ParseText), to set to Value in place of Node's whole value:
	// only the bytes of Inner's value change (EmbeddedOffset), and a
	// document that cannot be written by splicing is an error, never
	// encoded again.
	Inner *yaml.Node
}

// Annotation sets an annotation of Holder, a mapping with metadata (an
// object, a pod template): the annotation Write is given the key of.
type Annotation struct {
	Holder *yaml.Node
	Value  string
}

// ErrEncode is Write's answer for a document that the quick reader read
// and that only the encoder can change, which needs the comments that
// the quick reader's tree has not: parse it again with ParseFull, and
// write the changes to that tree.
var ErrEncode = errors.New("the document needs its comments to be encoded")

// Write writes the changes to parsed document p of d, and the
// annotations under key: it splices the new values into the document's
// own bytes, which keeps every other byte as it was and costs no
// encoding. Where the syntax is too unusual for that (flow style, block
// scalars, anchors), it changes the nodes and encodes the document
// instead, as JSON when it was JSON; p is then changed. A tree from the
// quick reader is not encoded: Write returns ErrEncode.
func Write(d *Document, p *Parsed, changes []Replacement, annotations []Annotation, key string) (Piece, error) {
	if b, ok := splice(d, changes, annotations, key); ok {
		return b, nil
	}
	for _, c := range changes {
		if c.Inner != nil {
			// Encoding would write the whole text again: refused.
			return Piece{}, fmt.Errorf("%s: cannot write the image inside the string at line %d: the document's other changes need it encoded again (flow style, block scalars, anchors), which would write the whole text anew", d.At(c.Node.Line), c.Node.Line)
		}
	}
	if p.Quick {
		return Piece{}, ErrEncode // the tree has no comments to encode
	}
	for _, c := range changes {
		if c.Alias == nil {
			c.Node.Value = c.Value
			continue
		}
		for i, n := range c.Parent.Content {
			if n == c.Alias {
				c.Parent.Content[i] = newScalar(c.Value)
			}
		}
	}
	for _, a := range annotations {
		setAnnotation(a.Holder, key, a.Value)
	}
	var b []byte
	var err error
	if start := JSONStart(d.Body()); start >= 0 {
		b, err = encodeJSON(d, &p.Root, start, p.CRLF)
	} else {
		b, err = encode(d, &p.Root, p.CRLF)
	}
	return Piece{b: b}, err
}

// splice applies scalar and annotation changes to a document's own bytes:
// it replaces scalar tokens in place and inserts annotation lines in block
// mappings. Every byte it does not change stays as it was, and nothing is
// encoded. It returns false when some change needs syntax it does not
// handle (flow style, block or multi-line scalars, escapes, anchors, an
// unusual annotation name); the caller then encodes the document instead.
func splice(d *Document, images []Replacement, annotations []Annotation, key string) (Piece, bool) {
	s := spliceState{body: d.Body()}
	if hasOtherBreaks(s.body) {
		return Piece{}, false // the parser's lines are not the LF-separated ones
	}
	s.json = JSONStart(s.body) >= 0
	s.eol = "\n"
	if bytes.Contains(s.body, []byte("\r\n")) {
		s.eol = "\r\n"
	}
	var edits []edit
	for _, c := range images {
		var e edit
		var ok bool
		switch {
		case c.Inner != nil:
			e, ok = s.replaceEmbedded(c.Node, c.Inner, c.Value)
		case c.Alias != nil:
			e, ok = s.replaceAlias(c.Alias, c.Value)
		default:
			s.flow = c.Flow
			e, ok = s.replaceScalar(c.Node, c.Value, c.Node.Style)
			s.flow = false
		}
		if !ok {
			return Piece{}, false
		}
		edits = append(edits, e)
	}
	for _, a := range annotations {
		set := s.setAnnotation
		if s.json {
			set = s.setFlowAnnotation
		}
		e, ok := set(a.Holder, key, a.Value)
		if !ok && !s.json {
			// A template written in flow style ("{metadata: {…}, spec:
			// {…}}") takes the annotation as a JSON object does.
			e, ok = s.setFlowAnnotation(a.Holder, key, a.Value)
		}
		if !ok {
			return Piece{}, false
		}
		edits = append(edits, e)
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	for i := 1; i < len(edits); i++ {
		if edits[i].start < edits[i-1].end {
			return Piece{}, false // overlapping edits: let the encoder handle it
		}
	}
	// The piece's edits are at offsets of the raw bytes, after the head.
	for i := range edits {
		edits[i].start += d.Head
		edits[i].end += d.Head
	}
	return Piece{b: d.Raw, edits: edits}, true
}

// Piece is the output of one document: its bytes, or its raw bytes and
// the edits that splice makes to its body. The edits are applied only
// when the stream is put together, into the one buffer of the whole
// output (Output): until then a changed document costs its edits, not a
// copy of itself. The zero Piece is a document not done yet.
type Piece struct {
	b     []byte
	edits []edit // sorted, not overlapping, at offsets of b
}

// Unchanged returns the piece of document d as it was read.
func Unchanged(d *Document) Piece { return Piece{b: d.Raw} }

// Done reports whether p is a document's output, not the zero Piece.
func (p Piece) Done() bool { return p.b != nil }

// size returns the length of the piece's output.
func (p Piece) size() int {
	n := len(p.b)
	for _, e := range p.edits {
		n += len(e.text) - (e.end - e.start)
	}
	return n
}

// appendTo appends the piece's output to dst.
func (p Piece) appendTo(dst []byte) []byte {
	_ = p.each(func(b []byte) error { dst = append(dst, b...); return nil },
		func(s string) error { dst = append(dst, s...); return nil })
	return dst
}

// each calls span with each run of the piece's own bytes and text with
// the text of each edit, in the order of the output. It stops at the
// first error and returns it.
func (p Piece) each(span func([]byte) error, text func(string) error) error {
	pos := 0
	for _, e := range p.edits {
		if err := span(p.b[pos:e.start]); err != nil {
			return err
		}
		if err := text(e.text); err != nil {
			return err
		}
		pos = e.end
	}
	return span(p.b[pos:])
}

// spliceState finds byte offsets of nodes in one document body.
type spliceState struct {
	body       []byte
	lineStarts []int // computed on first use
	eol        string
	json       bool // the document is written as JSON
	flow       bool // the scalar replaced is in a flow collection
	// The last position offset found: a later node on the same line
	// continues from it, so that many nodes on one very long line (flow
	// style) cost the line's length once, not once per node.
	lastLine, lastColumn, lastAt int
	// texts are the offsets of the lines of the texts of strings with
	// images inside (embeddedOffset), by string.
	texts map[*yaml.Node]textLines
	// breaks is 2 when the body has line breaks other than LF and
	// CRLF, 1 when not, 0 before it is asked (otherBreaks).
	breaks int
}

// offset returns the byte offset of a node's first character, and the
// offset of the start of its line.
func (s *spliceState) offset(n *yaml.Node) (at, lineStart int, ok bool) {
	if s.lineStarts == nil {
		s.lineStarts = make([]int, 1, 1+bytes.Count(s.body, newline))
		for at := 0; ; {
			i := bytes.IndexByte(s.body[at:], '\n')
			if i < 0 {
				break
			}
			at += i + 1
			s.lineStarts = append(s.lineStarts, at)
		}
	}
	if n.Line < 1 || n.Line > len(s.lineStarts) || n.Column < 1 {
		return 0, 0, false
	}
	lineStart = s.lineStarts[n.Line-1]
	at, column := lineStart, 1
	if s.lastLine == n.Line && s.lastColumn <= n.Column {
		at, column = s.lastAt, s.lastColumn
	}
	// Columns count characters, not bytes.
	for ; column < n.Column; column++ {
		if at >= len(s.body) || s.body[at] == '\n' {
			return 0, 0, false
		}
		_, size := utf8.DecodeRune(s.body[at:])
		at += size
	}
	s.lastLine, s.lastColumn, s.lastAt = n.Line, column, at
	return at, lineStart, true
}

// replaceScalar replaces the token of scalar node n with value, written
// in the given style (plain, single- or double-quoted).
func (s *spliceState) replaceScalar(n *yaml.Node, value string, style yaml.Style) (edit, bool) {
	if n.Kind != yaml.ScalarNode || n.Anchor != "" {
		return edit{}, false
	}
	at, _, ok := s.offset(n)
	if !ok {
		return edit{}, false
	}
	var token string
	switch n.Style {
	case 0:
		token = n.Value
	case yaml.DoubleQuotedStyle:
		if strings.ContainsAny(n.Value, "\\\"\n") {
			return edit{}, false
		}
		token = `"` + n.Value + `"`
	case yaml.SingleQuotedStyle:
		if strings.ContainsAny(n.Value, "'\n") {
			return edit{}, false
		}
		token = "'" + n.Value + "'"
	default:
		return edit{}, false
	}
	end := at + len(token)
	if !bytes.HasPrefix(s.body[at:], []byte(token)) || (end < len(s.body) && !isSpace(s.body[end]) && !((s.json || s.flow) && isJSONDelimiter(s.body[end]))) {
		return edit{}, false // not the token we expect, or not followed by a blank: flow or multi-line
	}
	if s.json {
		// JSON has one kind of string.
		style = yaml.DoubleQuotedStyle
	}
	text, ok := quote(value, style)
	return edit{start: at, end: end, text: text}, ok
}

// replaceAlias replaces the token of alias node a ("*name") with value,
// written plain.
func (s *spliceState) replaceAlias(a *yaml.Node, value string) (edit, bool) {
	at, _, ok := s.offset(a)
	if !ok {
		return edit{}, false
	}
	token := "*" + a.Value
	end := at + len(token)
	if !bytes.HasPrefix(s.body[at:], []byte(token)) || (end < len(s.body) && !isSpace(s.body[end])) {
		return edit{}, false // not the token we expect, or in flow style
	}
	text, ok := quote(value, 0)
	return edit{start: at, end: end, text: text}, ok
}

// setAnnotation sets key to value in the metadata.annotations of holder,
// which must be a block mapping: it replaces an existing value, or inserts
// a line before the first annotation, or an annotations mapping before the
// first metadata field, or a metadata mapping before the spec.
func (s *spliceState) setAnnotation(holder *yaml.Node, key, value string) (edit, bool) {
	if !plainKey.MatchString(key) {
		return edit{}, false
	}
	line := key + ": '" + value + "'" + s.eol
	// The editor looked these up already, and made sure that none comes
	// from a merge key or an alias.
	m, _ := Get(holder, "metadata")
	a, _ := Get(m.Value, "annotations")
	o, _ := Get(a.Value, key)
	metaKey, meta, ann, old := m.Key, m.Value, a.Value, o.Value
	switch {
	case old != nil:
		return s.replaceScalar(old, value, yaml.SingleQuotedStyle)
	case isBlockMapping(ann):
		// After the last annotation, at the annotations' indentation.
		indent := ann.Content[0].Column - 1
		return s.insertAt(s.entryEnd(holder, meta, "annotations"), indent, line)
	case ann == nil && isBlockMapping(meta):
		// An annotations mapping after the last metadata field.
		indent := meta.Content[0].Column - 1
		step := indent - (metaKey.Column - 1)
		return s.insertAt(s.entryEnd(holder, meta, ""), indent, "annotations:"+s.eol, indent+step, line)
	case meta == nil && isBlockMapping(holder):
		// A metadata mapping just before the spec.
		sp, _ := Get(holder, "spec")
		specKey, spec := sp.Key, sp.Value
		if specKey == nil || !isBlockMapping(spec) {
			return edit{}, false
		}
		at, lineStart, ok := s.offset(specKey)
		if !ok || len(bytes.TrimLeft(s.body[lineStart:at], " ")) != 0 {
			return edit{}, false // the spec does not start its line, e.g. "- spec:"
		}
		indent := at - lineStart
		step := spec.Content[0].Column - specKey.Column
		return s.insertAt(lineStart, indent, "metadata:"+s.eol, indent+step, "annotations:"+s.eol, indent+2*step, line)
	}
	return edit{}, false
}

// entryEnd returns the offset where the entry of key in meta ends (or,
// with key "", where the entry of metadata in holder ends): the start of
// the line of the next key. It returns -1 when the entry ends the mapping
// and the holder too, or the next key does not start its line.
func (s *spliceState) entryEnd(holder, meta *yaml.Node, key string) int {
	if key != "" {
		if e, _ := Get(meta, key); e.Index >= 0 && e.Index+2 < len(meta.Content) {
			return s.lineOf(meta.Content[e.Index+2])
		}
	}
	if e, _ := Get(holder, "metadata"); e.Index >= 0 && e.Index+2 < len(holder.Content) {
		return s.lineOf(holder.Content[e.Index+2])
	}
	return -1
}

// lineOf returns the offset of the start of the line of node n, which must
// begin that line, or -1.
func (s *spliceState) lineOf(n *yaml.Node) int {
	at, lineStart, ok := s.offset(n)
	if !ok || len(bytes.TrimLeft(s.body[lineStart:at], " ")) != 0 {
		return -1
	}
	return lineStart
}

// insertAt inserts lines at offset at (a line start; -1 fails). The
// arguments after it alternate: an indentation, then the line's text.
func (s *spliceState) insertAt(at int, parts ...any) (edit, bool) {
	if at < 0 {
		return edit{}, false
	}
	var b strings.Builder
	for i := 0; i+1 < len(parts); i += 2 {
		indent, text := parts[i].(int), parts[i+1].(string)
		if indent < 0 || (i > 0 && indent <= parts[i-2].(int)) {
			return edit{}, false // nested lines must be indented deeper
		}
		b.WriteString(strings.Repeat(" ", indent))
		b.WriteString(text)
	}
	return edit{start: at, end: at, text: b.String()}, true
}

// isBlockMapping reports whether n is a non-empty mapping in block style.
func isBlockMapping(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.MappingNode && n.Style&yaml.FlowStyle == 0 && len(n.Content) > 0
}

// plainKey matches annotation names that need no quoting as a YAML key.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`)

// quote writes value as a scalar token of the given style, if it can be
// written so without escapes.
func quote(value string, style yaml.Style) (string, bool) {
	switch style {
	case 0:
		// Image references never need quotes, but check for what would.
		if value == "" || strings.ContainsAny(value, " #:\t\n'\"{}[],&*!|>%@`") && !isReference(value) && !isFlagReference(value) {
			return "", false
		}
		return value, true
	case yaml.DoubleQuotedStyle:
		if strings.ContainsAny(value, "\\\"\n") {
			return "", false
		}
		return `"` + value + `"`, true
	case yaml.SingleQuotedStyle:
		if strings.ContainsAny(value, "'\n") {
			return "", false
		}
		return "'" + value + "'", true
	}
	return "", false
}

// reference matches what a pinned reference looks like; such a value is
// safe as a plain scalar (":" and "@" inside it need no quoting).
var reference = regexp.MustCompile(`^[a-z0-9][a-z0-9._:/-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?(@[a-z0-9]+:[a-f0-9]+)?$`)

func isReference(value string) bool { return reference.MatchString(value) }

// flagReference matches a command line argument that gives a flag a
// pinned reference, "--flag=name:tag@sha256:…": as safe as a plain
// scalar as the reference.
var flagReference = regexp.MustCompile(`^--?[A-Za-z0-9][A-Za-z0-9._-]*=[a-z0-9][a-z0-9._:/-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?(@[a-z0-9]+:[a-f0-9]+)?$`)

func isFlagReference(value string) bool { return flagReference.MatchString(value) }

// hasOtherBreaks reports whether b holds a line break that YAML counts
// but a search for LF does not: a CR not before an LF, or the Unicode
// line breaks NEL, LS and PS.
func hasOtherBreaks(b []byte) bool {
	for rest := b; ; {
		i := bytes.IndexByte(rest, '\r')
		if i < 0 {
			break
		}
		if i+1 == len(rest) || rest[i+1] != '\n' {
			return true
		}
		rest = rest[i+2:]
	}
	return bytes.Contains(b, []byte("\u0085")) || bytes.Contains(b, []byte("\u2028")) || bytes.Contains(b, []byte("\u2029"))
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// isJSONDelimiter reports whether c may follow a value in JSON.
func isJSONDelimiter(c byte) bool { return c == ',' || c == '}' || c == ']' }
