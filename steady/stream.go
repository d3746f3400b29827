package steady

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"
)

// document is one object of a stream: a document that decodes to
// something.
type document struct {
	// index is the 1-based number of the document in the stream, counting
	// every document, empty ones too.
	index int
	// source is the file named by Helm's "# Source:" comment, or "".
	source string
	// key matches the document with its counterpart in another render of
	// the same chart: its source and position among that source's
	// documents.
	key string
	// json is the document as the API server's decoder reads it; encoding/
	// json sorts mapping keys, so equal meanings have equal bytes.
	json []byte
}

// where describes the document for messages, e.g. `document 3
// (chart/templates/deploy.yaml)`.
func (d *document) where() string {
	if d.source != "" {
		return fmt.Sprintf("document %d (%s)", d.index, d.source)
	}
	return fmt.Sprintf("document %d", d.index)
}

// stream is a parsed stream: its objects in order, and by key.
type stream struct {
	docs  []*document
	byKey map[string]*document
}

// parse cuts in into documents and decodes each one. what names the
// stream in errors ("the previous output").
func parse(in []byte, what string) (*stream, error) {
	s := &stream{byKey: map[string]*document{}}
	seen := map[string]int{} // documents per source so far
	for i, raw := range split(in) {
		d := &document{index: i + 1, source: sourceOf(raw)}
		j, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %s: %w", what, d.where(), err)
		}
		if string(j) == "null" {
			continue // empty, or only comments: no object
		}
		d.json = j
		// "\x00" cannot occur in a file name: keys are unambiguous.
		d.key = d.source + "\x00" + strconv.Itoa(seen[d.source])
		seen[d.source]++
		s.docs = append(s.docs, d)
		s.byKey[d.key] = d
	}
	return s, nil
}

// split cuts a YAML stream into documents at "---" lines, and after "..."
// lines, without parsing it. A "---" line keeps what follows it on the
// line ("--- !!map"), which belongs to the document it starts.
func split(in []byte) [][]byte {
	var docs [][]byte
	start := 0
	for pos := 0; pos < len(in); {
		eol := bytes.IndexByte(in[pos:], '\n')
		if eol < 0 {
			eol = len(in)
		} else {
			eol += pos + 1
		}
		line := in[pos:eol]
		switch {
		case isMarker(line, "---"):
			if pos > start {
				docs = append(docs, in[start:pos])
			}
			start = pos
		case isMarker(line, "..."):
			docs = append(docs, in[start:eol])
			start = eol
		}
		pos = eol
	}
	if start < len(in) {
		docs = append(docs, in[start:])
	}
	return docs
}

// isMarker reports whether line is the document marker m ("---" or
// "..."), alone or followed by a blank.
func isMarker(line []byte, m string) bool {
	if !bytes.HasPrefix(line, []byte(m)) {
		return false
	}
	rest := line[len(m):]
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' || rest[0] == '\r'
}

var sourcePrefix = []byte("# Source: ")

// sourceOf returns the file named by the "# Source:" comment among the
// comments that open a document, or "".
func sourceOf(raw []byte) string {
	for first := true; len(raw) > 0; first = false {
		eol := bytes.IndexByte(raw, '\n')
		if eol < 0 {
			eol = len(raw)
		}
		line := bytes.TrimRight(raw[:eol], " \t\r")
		raw = raw[min(eol+1, len(raw)):]
		if first && isMarker(line, "---") {
			line = bytes.TrimSpace(line[3:])
		}
		switch {
		case bytes.HasPrefix(line, sourcePrefix):
			// The name goes into messages: no control characters.
			return strings.Map(func(r rune) rune {
				if unicode.IsControl(r) {
					return '?'
				}
				return r
			}, string(line[len(sourcePrefix):]))
		case len(line) > 0 && line[0] != '#':
			return "" // the first content line ends the header comments
		}
	}
	return ""
}
