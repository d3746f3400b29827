package stream

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// EmbeddedOffset returns the offset, in body (the bytes of the document
// that holds the string scalar outer), of the value of scalar inner, a
// node of outer's text as ParseText parses it, when writing other bytes
// over exactly that value changes inner's value and nothing else of the
// text. That holds only when each line of the text is a line of body:
// outer is a literal block scalar ("|", "|-", "|+", with an indentation
// indicator or not) in a document with no line breaks but LF and CRLF,
// its text holds no byte order mark and no line break the parser of the
// text reads other than LF; and inner is a plain scalar, or a quoted one
// without an escape, on one line, without an anchor. Otherwise the error
// says why not, for a message that names the document and the field.
func EmbeddedOffset(body []byte, outer, inner *yaml.Node) (int, error) {
	return NewEmbedded(body).Offset(outer, inner)
}

// Embedded finds the offsets of EmbeddedOffset in one document body, its
// lines counted once for every field found. It is not safe for
// concurrent use.
type Embedded struct{ s spliceState }

// NewEmbedded returns an Embedded for the document body.
func NewEmbedded(body []byte) *Embedded { return &Embedded{s: spliceState{body: body}} }

// Offset returns EmbeddedOffset(body, outer, inner).
func (e *Embedded) Offset(outer, inner *yaml.Node) (int, error) {
	return e.s.embeddedOffset(outer, inner)
}

// embeddedOffset is EmbeddedOffset in the body of s.
func (s *spliceState) embeddedOffset(outer, inner *yaml.Node) (int, error) {
	body := s.body
	switch {
	case outer.Kind != yaml.ScalarNode || outer.Tag != "!!str":
		return 0, errors.New("the field is not a string")
	case outer.Style&yaml.LiteralStyle == 0:
		return 0, fmt.Errorf("the string is %s, not a literal block scalar (|, |- or |+), whose every line is a line of the text", scalarStyle(outer.Style))
	case s.otherBreaks():
		return 0, errors.New("the document has line breaks other than LF and CRLF")
	case inner.Kind != yaml.ScalarNode:
		return 0, errors.New("the image field is not a string")
	case inner.Anchor != "":
		return 0, fmt.Errorf("the image field has an anchor (&%s) that other fields of the text may share; write it out", inner.Anchor)
	}
	if inner.Style&yaml.TaggedStyle != 0 {
		return 0, fmt.Errorf("the image field is tagged %s; write it without a tag", inner.Tag)
	}
	var token string
	switch inner.Style {
	case 0:
		token = inner.Value
	case yaml.SingleQuotedStyle:
		token = "'" + inner.Value + "'"
	case yaml.DoubleQuotedStyle:
		token = `"` + inner.Value + `"`
	default:
		return 0, fmt.Errorf("the image field is %s; write it on one line, plain or quoted", scalarStyle(inner.Style))
	}
	// The header of outer, "|" and its indicators, is on outer's line;
	// line k of the text is the k-th line of body after it.
	at, _, ok := s.offset(outer)
	if !ok || at >= len(body) || body[at] != '|' {
		return 0, errors.New("the string's header is not where the parser read it")
	}
	// The text's lines, counted once for all the images in it.
	t, ok := s.texts[outer]
	if !ok {
		t = newTextLines(outer.Value)
		if s.texts == nil {
			s.texts = map[*yaml.Node]textLines{}
		}
		s.texts[outer] = t
	}
	lines := t.starts
	if t.odd {
		return 0, errors.New("the text holds a carriage return, a byte order mark or a line break other than LF")
	}
	n := outer.Line + inner.Line // body's line of the image field, from 1
	if inner.Line < 1 || inner.Line > len(lines) || n > len(s.lineStarts) || inner.Column < 1 {
		return 0, errors.New("the image field is not where the parser of the text read it")
	}
	text := outer.Value[lines[inner.Line-1]:]
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	start := s.lineStarts[n-1]
	raw := body[start:]
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		raw = raw[:i]
	}
	raw = bytes.TrimSuffix(raw, []byte("\r"))
	indent := len(raw) - len(text)
	if indent < 0 || strings.Trim(string(raw[:indent]), " ") != "" || string(raw[indent:]) != text {
		return 0, fmt.Errorf("line %d of the text is not line %d of the document after its indentation", inner.Line, n)
	}
	// Columns count characters, not bytes.
	col := 0
	for c := 1; c < inner.Column; c++ {
		if col >= len(text) {
			return 0, errors.New("the image field is not where the parser of the text read it")
		}
		_, size := utf8.DecodeRuneInString(text[col:])
		col += size
	}
	if !strings.HasPrefix(text[col:], token) {
		// An escape, a multi-line value, a tag: the value is not its
		// bytes.
		return 0, errors.New("the image field's value is not the bytes it is written as (an escape, a tag, or a value over several lines); write it plain or quoted, on one line")
	}
	if inner.Style != 0 {
		col++ // after the quote
	}
	return start + indent + col, nil
}

// textLines are the lines of the text of a string: the offset each
// starts at, and whether the text holds a byte that the parser of the
// text reads otherwise than a line of the document (a carriage return, a
// byte order mark, a line break other than LF).
type textLines struct {
	starts []int
	odd    bool
}

// newTextLines counts the lines of text.
func newTextLines(text string) textLines {
	t := textLines{starts: append(make([]int, 0, 1+strings.Count(text, "\n")), 0)}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			t.starts = append(t.starts, i+1)
		}
	}
	t.odd = strings.ContainsAny(text, "\r\ufeff\u0085\u2028\u2029")
	return t
}

// otherBreaks reports, once for the body, hasOtherBreaks.
func (s *spliceState) otherBreaks() bool {
	if s.breaks == 0 {
		s.breaks = 1
		if hasOtherBreaks(s.body) {
			s.breaks = 2
		}
	}
	return s.breaks == 2
}

// embeddedValue matches what a pinned reference is made of: a value
// that reads as itself plain, single- or double-quoted, in block or flow
// style, and never as a number, a boolean or null (it has "@").
var embeddedValue = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]*@[A-Za-z0-9._:/@+-]*$`)

// scalarStyle names a scalar's style for a message.
func scalarStyle(s yaml.Style) string {
	switch {
	case s&yaml.LiteralStyle != 0:
		return "a literal block scalar (|)"
	case s&yaml.FoldedStyle != 0:
		return "a folded block scalar (>)"
	case s&yaml.DoubleQuotedStyle != 0:
		return "double-quoted"
	case s&yaml.SingleQuotedStyle != 0:
		return "single-quoted"
	}
	return "a plain scalar"
}

// replaceEmbedded replaces the value of inner, a scalar of the text of
// the literal block scalar outer (EmbeddedOffset), with value, written in
// inner's style.
func (s *spliceState) replaceEmbedded(outer, inner *yaml.Node, value string) (edit, bool) {
	at, err := s.embeddedOffset(outer, inner)
	if err != nil {
		return edit{}, false
	}
	// The quotes, if any, stay; value must need none of its own.
	if !embeddedValue.MatchString(value) {
		return edit{}, false
	}
	return edit{start: at, end: at + len(inner.Value), text: value}, true
}
