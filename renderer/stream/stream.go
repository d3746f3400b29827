package stream

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unique"
)

// Document is one document of a YAML stream, kept as the bytes it was read
// from so that an unchanged document can be written back exactly. Split
// makes it; its fields are read-only after. A Document caches what
// Estimate counts: only one goroutine at a time may use it.
type Document struct {
	// Index is the 1-based number of the document in the stream.
	Index int
	// Line is the 1-based stream line of the document's first byte.
	Line int
	// Raw holds every byte of the document, including its "---" line.
	Raw []byte
	// Sep is the length of the separator line that Raw starts with and
	// that Kubernetes' YAML reader drops: Raw[Sep:] is what it reads as
	// the document. 0 for the first document.
	Sep int
	// Head is the length of the part of Raw written back before a
	// re-encoded body: the separator, and a "---" line after it that a
	// YAML parser reads as a bare document start (plainMarker).
	Head int
	// Source is the file named by Helm's "# Source:" comment, if any.
	Source string
	// SourceLine is the stream line of the "# Source:" comment that
	// begins the template's output: this document's, or that of the
	// first of the documents before it in a row with the same source.
	SourceLine int
	// nodes caches Estimate; 0: not estimated yet.
	nodes int
}

// Estimate returns estimateNodes of the document's body, counted once.
// Only the worker that owns the document may call it.
func (d *Document) Estimate() int {
	if d.nodes == 0 {
		d.nodes = estimateNodes(d.Body())
	}
	return d.nodes
}

// Body returns the part of the document that is YAML content to parse.
func (d *Document) Body() []byte { return d.Raw[d.Head:] }

// Where describes the document for error messages, e.g.
// `document 3 (chart/templates/deploy.yaml)`.
func (d *Document) Where() string {
	if d.Source != "" {
		return fmt.Sprintf("document %d (%s)", d.Index, d.Source)
	}
	return fmt.Sprintf("document %d", d.Index)
}

// At describes a position inside the document, given a 1-based line
// relative to the document body, as `document 3 (file), line 17`. For a
// document from a Helm template it adds the line in that template's
// rendered output, which the "# Source:" comment begins (a template's
// output can be several documents in a row): `document 3 (file), line
// 17 (rendered line 5 of the template)`. That is the line Helm wrote,
// not a line of the template's source, which no one can tell from the
// output.
func (d *Document) At(bodyLine int) string {
	if bodyLine <= 0 {
		return d.Where()
	}
	line := d.StreamLine(bodyLine)
	if d.SourceLine > 0 && line > d.SourceLine {
		return fmt.Sprintf("%s, line %d (rendered line %d of the template)", d.Where(), line, line-d.SourceLine)
	}
	return fmt.Sprintf("%s, line %d", d.Where(), line)
}

// StreamLine returns the stream line of a 1-based body line.
func (d *Document) StreamLine(bodyLine int) int { return d.Line + d.headLines() + bodyLine - 1 }

// headLines is the number of lines in the head of the document.
func (d *Document) headLines() int { return bytes.Count(d.Raw[:d.Head], []byte("\n")) }

var sourcePrefix = []byte("# Source: ")

// Split cuts a YAML stream into documents where Kubernetes' YAML
// reader cuts it: k8s.io/apimachinery's YAMLReader, through which kubectl,
// Helm's kube client and Argo CD read manifests. That reader takes every
// line that starts with "---" for a document separator when nothing but a
// comment follows, once Unicode white space is trimmed ("---", "--- #
// Source: x", "---#x", "---\t"), and refuses the whole stream when
// something else follows ("--- !!map", "--- {…}", "----", a key "---x"):
// so does Split, naming the line. A separator ends the document
// before it when that document has content (a line, even an empty one),
// and the reader drops the separator; one that comes first in the stream,
// or right after another, is the first line of the next document, which
// the YAML parser then reads: as the start of the document ("---") or as
// content (a key "---#"). Nothing else ends a document, not "...": what
// follows it up to the next separator belongs to the same document, where
// the API server never reads it (parse refuses it). The documents' raw
// bytes, concatenated, are the input.
func Split(in []byte) ([]*Document, error) {
	var docs []*Document
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
		if i > 0 && d.Source != "" && d.Source == docs[i-1].Source {
			d.SourceLine = docs[i-1].SourceLine
		}
	}
	return docs, nil
}

var newline = []byte("\n")

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
func newDocument(index, line int, raw []byte, sep int) *Document {
	d := &Document{Index: index, Line: line, Raw: raw, Sep: sep, Head: sep}
	// A separator as the first line of the content is the YAML parser's:
	// kept out of the body when the parser reads nothing in it.
	if rest := raw[sep:]; bytes.HasPrefix(rest, dashes) {
		eol := bytes.IndexByte(rest, '\n') + 1
		if eol == 0 {
			eol = len(rest)
		}
		if plainMarker(rest[:eol]) {
			d.Head += eol
		}
	}
	for b, line := d.Body(), d.Line+d.headLines(); len(b) > 0; line++ {
		eol := bytes.IndexByte(b, '\n')
		if eol < 0 {
			eol = len(b)
		}
		text := bytes.TrimRight(b[:eol], " \t\r")
		if bytes.HasPrefix(text, sourcePrefix) {
			// The name goes into messages: no control characters. A
			// chart's templates repeat in every document they make: the
			// documents share one copy of each name.
			d.Source = intern(strings.Map(func(r rune) rune {
				if unicode.IsControl(r) {
					return '?'
				}
				return r
			}, string(text[len(sourcePrefix):])))
			d.SourceLine = line
			break
		}
		if len(text) > 0 && text[0] != '#' {
			break // the first content line ends the header comments
		}
		b = b[min(eol+1, len(b)):]
	}
	return d
}

// intern returns s in memory of its own, one copy for every equal string:
// a chart's templates repeat in every document they make. It is safe for
// concurrent use.
func intern(s string) string { return unique.Make(s).Value() }
