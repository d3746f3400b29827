package renderer

import (
	"bytes"
	"fmt"
	"strconv"
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
	// sep is the length of the separator line that raw starts with and
	// that Kubernetes' YAML reader drops: raw[sep:] is what it reads as
	// the document. 0 for the first document.
	sep int
	// head is the length of the part of raw written back before a
	// re-encoded body: the separator, and a "---" line after it that a
	// YAML parser reads as a bare document start (plainMarker).
	head int
	// source is the file named by Helm's "# Source:" comment, if any.
	source string
	// notes are what the pass that finishes the document found to warn
	// about; nil for none, as for most documents.
	notes *notes
	// sourceLine is the stream line of the "# Source:" comment that
	// begins the template's output: this document's, or that of the
	// first of the documents before it in a row with the same source.
	sourceLine int
	// nodes caches estimate; 0: not estimated yet.
	nodes int
	// holds caches mayHold: 0 not asked yet, 1 yes, 2 no.
	holds int8
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
		if mayHoldImage(d.body(), keys) {
			d.holds = 1
		}
	}
	return d.holds == 1
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

// splitStream cuts a YAML stream into documents where Kubernetes' YAML
// reader cuts it: k8s.io/apimachinery's YAMLReader, through which kubectl,
// Helm's kube client and Argo CD read manifests. That reader takes every
// line that starts with "---" for a document separator when nothing but a
// comment follows, once Unicode white space is trimmed ("---", "--- #
// Source: x", "---#x", "---\t"), and refuses the whole stream when
// something else follows ("--- !!map", "--- {…}", "----", a key "---x"):
// so does splitStream, naming the line. A separator ends the document
// before it when that document has content (a line, even an empty one),
// and the reader drops the separator; one that comes first in the stream,
// or right after another, is the first line of the next document, which
// the YAML parser then reads: as the start of the document ("---") or as
// content (a key "---#"). Nothing else ends a document, not "...": what
// follows it up to the next separator belongs to the same document, where
// the API server never reads it (parse refuses it). The documents' raw
// bytes, concatenated, are the input.
func splitStream(in []byte) ([]*document, error) {
	var docs []*document
	// The document being cut: its offset, its first line, and the length
	// of the separator the reader dropped before it (0 for the first).
	start, startLine, sep := 0, 1, 0
	for at := nextDashes(in, 0); at >= 0; {
		end := len(in)
		if eol := bytes.IndexByte(in[at:], '\n'); eol >= 0 {
			end = at + eol + 1
		}
		line := bytes.TrimSuffix(in[at:end], newline)
		hasContent := at > start+sep
		if rest := bytes.TrimSpace(line[len("---"):]); len(rest) > 0 && rest[0] != '#' {
			index := len(docs) + 1
			if hasContent {
				index++
			}
			return nil, fmt.Errorf("document %d, line %d: the line %s starts with \"---\": Kubernetes' YAML reader (kubectl, Helm, Argo CD) takes it for a document separator, and refuses one followed by anything but a comment",
				index, startLine+bytes.Count(in[start:at], newline), quoteLine(line))
		}
		if hasContent {
			docs = append(docs, newDocument(len(docs)+1, startLine, in[start:at], sep))
			startLine += bytes.Count(in[start:at], newline)
			start, sep = at, end-at
		}
		at = nextDashes(in, end)
	}
	if start < len(in) {
		docs = append(docs, newDocument(len(docs)+1, startLine, in[start:], sep))
	}
	// A template's output may be several documents in a row, each with
	// the template's "# Source:" comment.
	for i, d := range docs {
		if i > 0 && d.source != "" && d.source == docs[i-1].source {
			d.sourceLine = docs[i-1].sourceLine
		}
	}
	return docs, nil
}

var newline = []byte("\n")

// Split cuts a manifest stream into its documents where Kubernetes' YAML
// reader (k8s.io/apimachinery's, which kubectl, Helm's kube client and
// Argo CD use) cuts it, as Render does: at each line that starts with
// "---" followed by nothing but a comment. It returns each document as the
// bytes it was read from, its separator line included, so that the
// documents concatenated are the stream. It refuses a stream that reader
// refuses (a line that starts with "---" followed by anything else),
// naming the line. Split is safe for concurrent use.
func Split(stream []byte) ([][]byte, error) {
	docs, err := splitStream(stream)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(docs))
	for i, d := range docs {
		out[i] = d.raw
	}
	return out, nil
}

// nextDashes returns the offset of the first line at or after from (a
// line start) that starts with "---", or -1. It jumps from one
// occurrence to the next with the (vectorised) substring search rather
// than line by line: a stream is mostly content.
func nextDashes(in []byte, from int) int {
	if from >= len(in) {
		return -1
	}
	if bytes.HasPrefix(in[from:], dashes) {
		return from
	}
	if i := bytes.Index(in[from:], lineDashes); i >= 0 {
		return from + i + 1
	}
	return -1
}

var dashes, lineDashes = []byte("---"), []byte("\n---")

// quoteLine quotes a line of the stream for a message: valid UTF-8, at
// most 40 bytes of it.
func quoteLine(line []byte) string {
	if len(line) > 40 {
		return strconv.Quote(strings.ToValidUTF8(string(line[:40]), "?") + "…")
	}
	return strconv.Quote(strings.ToValidUTF8(string(line), "?"))
}

// plainMarker reports whether a separator line is also, to a YAML parser,
// a bare document start: "---", perhaps with blanks and a comment in
// printable ASCII after a blank. The parser reads nothing else in it, so
// it may stay out of the body that is parsed and re-encoded. Other
// separators ("---#x", "---\u00a0", a comment with a lone CR, which YAML
// takes for a line break) are content to the parser.
func plainMarker(line []byte) bool {
	line = bytes.TrimSuffix(bytes.TrimSuffix(line, newline), []byte("\r"))
	rest, ok := bytes.CutPrefix(line, dashes)
	if !ok {
		return false
	}
	if len(rest) == 0 {
		return true
	}
	if rest[0] != ' ' && rest[0] != '\t' {
		return false
	}
	rest = bytes.TrimLeft(rest, " \t")
	if len(rest) > 0 && rest[0] != '#' {
		return false
	}
	for _, c := range rest {
		if c != '\t' && (c < 0x20 || c > 0x7e) {
			return false
		}
	}
	return true
}

// newDocument records where the document's content begins and which Helm
// template it came from. raw starts with a separator of sep bytes that
// Kubernetes' YAML reader drops (sep is 0 for the first document).
func newDocument(index, line int, raw []byte, sep int) *document {
	d := &document{index: index, line: line, raw: raw, sep: sep, head: sep}
	// A separator as the first line of the content is the YAML parser's:
	// kept out of the body when the parser reads nothing in it.
	if rest := raw[sep:]; bytes.HasPrefix(rest, dashes) {
		eol := bytes.IndexByte(rest, '\n') + 1
		if eol == 0 {
			eol = len(rest)
		}
		if plainMarker(rest[:eol]) {
			d.head += eol
		}
	}
	for b, line := d.body(), d.line+d.headLines(); len(b) > 0; line++ {
		eol := bytes.IndexByte(b, '\n')
		if eol < 0 {
			eol = len(b)
		}
		text := bytes.TrimRight(b[:eol], " \t\r")
		if bytes.HasPrefix(text, sourcePrefix) {
			// The name goes into messages: no control characters. A
			// chart's templates repeat in every document they make: the
			// documents share one copy of each name.
			d.source = intern(strings.Map(func(r rune) rune {
				if unicode.IsControl(r) {
					return '?'
				}
				return r
			}, string(text[len(sourcePrefix):])))
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
