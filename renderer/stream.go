package renderer

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
)

// document is one document of a YAML stream, kept as the bytes it was read
// from so that an unchanged document can be written back exactly.
type document struct {
	// index is the 1-based number of the document in the stream.
	index int
	// line is the 1-based stream line of the document's first byte.
	line int
	// raw holds every byte of the document, including its "---" line.
	raw []byte
	// head is the length of the part of raw written back before a
	// re-encoded body: the "---" line, when it carries nothing but a comment.
	head int
	// source is the file named by Helm's "# Source:" comment, if any.
	source string
	// kept are the warnings of the document's image fields kept as
	// written (KeepUnresolved), set by the pass that finishes it.
	kept []string
	// unpinned are the image-like values of the document that no image
	// field reached, set by the pass that finishes it.
	unpinned []Unpinned
	// sourceLine is the stream line of the "# Source:" comment that
	// begins the template's output: this document's, or that of the
	// first of the documents before it in a row with the same source.
	sourceLine int
	// nodes caches estimate; 0: not estimated yet.
	nodes int
}

// estimate returns estimateNodes of the document's body, counted once.
// Only the worker that owns the document may call it.
func (d *document) estimate() int {
	if d.nodes == 0 {
		d.nodes = estimateNodes(d.body())
	}
	return d.nodes
}

// body returns the part of the document that is YAML content to parse.
func (d *document) body() []byte { return d.raw[d.head:] }

// where describes the document for error messages, e.g.
// `document 3 (chart/templates/deploy.yaml)`.
func (d *document) where() string {
	if d.source != "" {
		return fmt.Sprintf("document %d (%s)", d.index, d.source)
	}
	return fmt.Sprintf("document %d", d.index)
}

// at describes a position inside the document, given a 1-based line
// relative to the document body, as `document 3 (file), line 17`. For a
// document from a Helm template it adds the line in that template's
// rendered output, which the "# Source:" comment begins (a template's
// output can be several documents in a row): `document 3 (file), line
// 17 (rendered line 5 of the template)`. That is the line Helm wrote,
// not a line of the template's source, which no one can tell from the
// output.
func (d *document) at(bodyLine int) string {
	if bodyLine <= 0 {
		return d.where()
	}
	line := d.streamLine(bodyLine)
	if d.sourceLine > 0 && line > d.sourceLine {
		return fmt.Sprintf("%s, line %d (rendered line %d of the template)", d.where(), line, line-d.sourceLine)
	}
	return fmt.Sprintf("%s, line %d", d.where(), line)
}

// streamLine returns the stream line of a 1-based body line.
func (d *document) streamLine(bodyLine int) int { return d.line + d.headLines() + bodyLine - 1 }

// headLines is the number of lines in the head of the document.
func (d *document) headLines() int { return bytes.Count(d.raw[:d.head], []byte("\n")) }

var sourcePrefix = []byte("# Source: ")

// splitStream cuts a YAML stream into documents at "---" lines (and after
// "..." end markers), without parsing it. Cutting at line starts is exact:
// YAML forbids a line that starts with "---" or "..." followed by a blank
// or a line break inside a document's content. The documents' raw bytes,
// concatenated, are the input.
func splitStream(in []byte) []*document {
	var docs []*document
	start, startLine := 0, 1
	flush := func(end int) {
		if end > start {
			docs = append(docs, newDocument(len(docs)+1, startLine, in[start:end]))
			startLine += bytes.Count(in[start:end], newline)
		}
		start = end
	}
	// Jump from one marker to the next with the (vectorised) substring
	// search rather than line by line: a stream is mostly content.
	dash, dot := newMarkerFinder(in, "---"), newMarkerFinder(in, "...")
	for pos := 0; pos < len(in); {
		d, e := dash.next(pos), dot.next(pos)
		switch {
		case d < 0 && e < 0:
			pos = len(in)
		case e < 0 || (d >= 0 && d < e):
			flush(d) // "---" starts the next document
			pos = d + len("---")
		default:
			eol := bytes.IndexByte(in[e:], '\n')
			if eol < 0 {
				eol = len(in)
			} else {
				eol += e + 1
			}
			flush(eol) // "..." ends this one
			pos = eol
		}
	}
	flush(len(in))
	// A template's output may be several documents in a row, each with
	// the template's "# Source:" comment.
	for i, d := range docs {
		if i > 0 && d.source != "" && d.source == docs[i-1].source {
			d.sourceLine = docs[i-1].sourceLine
		}
	}
	return docs
}

var newline = []byte("\n")

// markerFinder finds the lines of a stream that are the marker m. It
// remembers the occurrence it found last, so that no search runs twice over
// the same bytes.
type markerFinder struct {
	in       []byte
	m        string
	searched int // where the last search started; -1: none yet
	cand     int // the first occurrence of m at or after searched; -1: none
}

func newMarkerFinder(in []byte, m string) *markerFinder {
	return &markerFinder{in: in, m: m, searched: -1, cand: -1}
}

// next returns the offset of the first line at or after pos that is the
// marker, or -1.
func (f *markerFinder) next(pos int) int {
	for {
		if f.searched < 0 || (f.cand >= 0 && f.cand < pos) {
			f.searched, f.cand = pos, -1
			if i := bytes.Index(f.in[pos:], []byte(f.m)); i >= 0 {
				f.cand = pos + i
			}
		}
		// No occurrence after an earlier start means none after pos.
		if f.cand < 0 {
			return -1
		}
		c := f.cand
		if (c == 0 || f.in[c-1] == '\n') && isMarker(f.in[c:], f.m) {
			return c
		}
		pos = c + 1 // inside a line: look further
	}
}

// isMarker reports whether a line is the document marker m ("---" or
// "..."), alone or followed by a blank.
func isMarker(line []byte, m string) bool {
	if !bytes.HasPrefix(line, []byte(m)) {
		return false
	}
	rest := line[len(m):]
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' || rest[0] == '\r'
}

// newDocument records where the document's content begins and which Helm
// template it came from.
func newDocument(index, line int, raw []byte) *document {
	d := &document{index: index, line: line, raw: raw}
	if isMarker(raw, "---") {
		eol := bytes.IndexByte(raw, '\n') + 1
		if eol == 0 {
			eol = len(raw)
		}
		// Keep the marker line as the head only when it holds nothing the
		// parser needs: a bare "---", perhaps with a comment.
		rest := bytes.TrimSpace(raw[3:eol])
		if len(rest) == 0 || rest[0] == '#' {
			d.head = eol
		}
	}
	for b, line := d.body(), d.line+d.headLines(); len(b) > 0; line++ {
		eol := bytes.IndexByte(b, '\n')
		if eol < 0 {
			eol = len(b)
		}
		text := bytes.TrimRight(b[:eol], " \t\r")
		if bytes.HasPrefix(text, sourcePrefix) {
			// The name goes into messages: no control characters.
			d.source = strings.Map(func(r rune) rune {
				if unicode.IsControl(r) {
					return '?'
				}
				return r
			}, string(text[len(sourcePrefix):]))
			d.sourceLine = line
			break
		}
		if len(text) > 0 && text[0] != '#' {
			break // the first content line ends the header comments
		}
		b = b[min(eol+1, len(b)):]
	}
	return d
}
