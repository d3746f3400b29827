package steady

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"
)

// document is one document of a stream that holds more than comments.
type document struct {
	// index is the 1-based number of the document in the stream, counting
	// every document, empty ones too.
	index int
	// source is the file named by Helm's "# Source:" comment, or by Helm
	// 4's FileAnnotation, or "", made printable for messages.
	source string
	// file is the value of FileAnnotation when source comes from it.
	file string
	// key matches the document with its counterpart in another render of
	// the same chart: its source and position among that source's
	// documents.
	key string
	// raw is the document as written, from its "---" line.
	raw []byte
	// json is the document as the API server's decoder reads it, once
	// read: encoding/json sorts mapping keys, so equal meanings have equal
	// bytes.
	json []byte
	// stream names the stream in errors, e.g. "the previous output".
	stream string
}

// where describes the document for messages, e.g. `document 3
// (chart/templates/deploy.yaml)`.
func (d *document) where() string {
	if d.source != "" {
		return fmt.Sprintf("document %d (%s)", d.index, d.source)
	}
	return fmt.Sprintf("document %d", d.index)
}

// read returns the document as JSON, decoding it the first time.
func (d *document) read() ([]byte, error) {
	if d.json == nil {
		j, err := yamlToJSON(d)
		if err != nil {
			return nil, err
		}
		if j, err = withoutFileAnnotation(j); err != nil {
			return nil, fmt.Errorf("reading %s: %s: %w", d.stream, d.where(), err)
		}
		d.json = j
	}
	return d.json, nil
}

// yamlToJSON decodes the document as the API server does.
func yamlToJSON(d *document) ([]byte, error) {
	j, err := yaml.YAMLToJSON(d.raw)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %s: %w", d.stream, d.where(), err)
	}
	return j, nil
}

// value returns the document's value, numbers as json.Number.
func (d *document) value() (any, error) {
	j, err := d.read()
	if err != nil {
		return nil, err
	}
	v, err := decode(j)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %s: %w", d.stream, d.where(), err)
	}
	return v, nil
}

// compare reads two matched documents and returns their values, or
// equal when they mean the same. Documents that are the same bytes mean
// the same and are not read: most documents of two renders are.
func compare(d, e *document) (x, y any, equal bool, err error) {
	if bytes.Equal(d.raw, e.raw) {
		return nil, nil, true, nil
	}
	dj, err := d.read()
	if err != nil {
		return nil, nil, false, err
	}
	ej, err := e.read()
	if err != nil {
		return nil, nil, false, err
	}
	if bytes.Equal(dj, ej) {
		return nil, nil, true, nil
	}
	if x, err = d.value(); err != nil {
		return nil, nil, false, err
	}
	if y, err = e.value(); err != nil {
		return nil, nil, false, err
	}
	return x, y, false, nil
}

// stream is a stream cut into documents: those with content in order,
// and by key. Nothing is decoded yet.
type stream struct {
	docs  []*document
	byKey map[string]*document
	// annotated says that a document's source is Helm 4's FileAnnotation.
	annotated bool
}

// parse cuts in into documents and gives each its key. what names the
// stream in errors ("the previous output"). Documents with nothing but
// comments and markers are no objects and are left out. Only documents
// that carry Helm 4's FileAnnotation instead of a "# Source:" comment are
// decoded, to read it; parse fails when one of those is not YAML.
func parse(in []byte, what string) (*stream, error) {
	s := &stream{byKey: map[string]*document{}}
	seen := map[string]int{} // documents per source so far
	for i, raw := range split(in) {
		if blank(raw) {
			continue
		}
		d := &document{index: i + 1, source: sourceOf(raw), raw: raw, stream: what}
		if err := d.fileFromAnnotation(); err != nil {
			return nil, err
		}
		s.annotated = s.annotated || d.file != ""
		// "\x00" cannot occur in a file name: keys are unambiguous.
		d.key = d.source + "\x00" + strconv.Itoa(seen[d.source])
		seen[d.source]++
		s.docs = append(s.docs, d)
		s.byKey[d.key] = d
	}
	return s, nil
}

// readAll decodes every document, to fail on one that is not YAML.
func (s *stream) readAll() error {
	for _, d := range s.docs {
		if _, err := d.read(); err != nil {
			return err
		}
	}
	return nil
}

// blank reports whether a document holds nothing but blank lines,
// comments and document markers.
func blank(raw []byte) bool {
	for len(raw) > 0 {
		eol := bytes.IndexByte(raw, '\n')
		if eol < 0 {
			eol = len(raw)
		}
		line := bytes.TrimSpace(raw[:eol])
		raw = raw[min(eol+1, len(raw)):]
		if isMarker(line, "---") || isMarker(line, "...") {
			line = bytes.TrimSpace(line[3:])
		}
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
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
			return printable(string(line[len(sourcePrefix):]))
		case len(line) > 0 && line[0] != '#':
			return "" // the first content line ends the header comments
		}
	}
	return ""
}

// printable returns a file name for messages: no control characters.
func printable(name string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, name)
}
