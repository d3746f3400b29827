package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// A document written as JSON (`kubectl get -o json`, a "{…}" document in a
// stream) is YAML too, and is parsed as such; what changes in it is
// written back as JSON, so that the output stays JSON: image values as
// double-quoted strings, the checksum annotation as a JSON member. The
// splice does that in the document's own bytes; where it cannot, the
// document is encoded as JSON instead of YAML (encodeJSON).

// JSONStart returns the offset of the JSON object that document body is,
// after its leading blank and comment lines (Helm's "# Source:"), or -1
// when the body is not one JSON object.
func JSONStart(body []byte) int {
	if at := contentStart(body); at < len(body) && body[at] == '{' && json.Valid(body[at:]) {
		return at
	}
	return -1
}

// contentStart returns the offset of the first byte of body after its
// byte order mark, blanks and comment lines; len(body) when there is none.
func contentStart(body []byte) int {
	at := 0
	if bytes.HasPrefix(body, bom) {
		at = len(bom) // the stream's byte order mark, which YAML reads too
	}
	for at < len(body) {
		switch body[at] {
		case ' ', '\t', '\r', '\n':
			at++
		case '#':
			nl := bytes.IndexByte(body[at:], '\n')
			if nl < 0 {
				return len(body)
			}
			at += nl + 1
		default:
			return at
		}
	}
	return at
}

// bom is the UTF-8 byte order mark, which may start the stream.
var bom = []byte("\ufeff")

// setFlowAnnotation sets key to value in the metadata.annotations of
// holder, a mapping of a JSON document or a YAML one in flow style: it
// replaces an existing value, or inserts a member before the first one
// of annotations, of metadata (an annotations object) or of the holder
// (a metadata object), in the layout of the object it goes into; in YAML
// with a plain key and a single-quoted value, as in block style.
func (s *spliceState) setFlowAnnotation(holder *yaml.Node, key, value string) (edit, bool) {
	// The editor looked these up already, and made sure that none comes
	// from a merge key or an alias.
	m, _ := Get(holder, "metadata")
	a, _ := Get(m.Value, "annotations")
	o, _ := Get(a.Value, key)
	meta, ann, old := m.Value, a.Value, o.Value
	member := jsonString(key) + ": " + jsonString(value) // insertMember spaces ": " as the object does
	metaKey, annKey, style := `"metadata": `, `"annotations": `, yaml.DoubleQuotedStyle
	if !s.json {
		// YAML in flow style: written as its block style would be.
		if !plainKey.MatchString(key) {
			return edit{}, false
		}
		member, metaKey, annKey, style = key+": '"+value+"'", "metadata: ", "annotations: ", yaml.SingleQuotedStyle
	}
	switch {
	case old != nil:
		return s.replaceScalar(old, value, style)
	case isFlowMapping(ann):
		return s.insertMember(ann, member)
	case ann == nil && isFlowMapping(meta):
		return s.insertMember(meta, annKey, member)
	case meta == nil && isFlowMapping(holder):
		return s.insertMember(holder, metaKey, annKey, member)
	}
	return edit{}, false
}

// insertMember inserts a member as the first of object m: the member is
// the last of parts, each part before it opens an object in which the
// next goes (`"metadata": `, then `"annotations": `). The objects it
// opens are laid out as m is: on one line when m's first member is on
// the line of its "{", else one member a line, indented a step deeper
// than the line before.
func (s *spliceState) insertMember(m *yaml.Node, parts ...string) (edit, bool) {
	open, lineStart, ok := s.offset(m)
	if !ok || open >= len(s.body) || s.body[open] != '{' {
		return edit{}, false
	}
	// What stands between "{" and the first member (or the "}" of an
	// empty object) is its layout; anything but blanks (a comment) is
	// not JSON's.
	end := open + 1
	for end < len(s.body) && isSpace(s.body[end]) {
		end++
	}
	if end >= len(s.body) {
		return edit{}, false
	}
	empty := s.body[end] == '}'
	if len(m.Content) == 0 && !empty {
		return edit{}, false
	}
	if len(m.Content) > 0 {
		if k, _, ok := s.offset(m.Content[0]); !ok || k != end {
			return edit{}, false
		}
	}
	gap := string(s.body[open+1 : end])
	colon, comma := s.separators(m, gap)
	for i := range parts {
		parts[i] = strings.Replace(parts[i], ": ", colon, 1)
	}
	// A gap with a line break gives the indentation of the members; the
	// step is how much deeper than the line of "{" they are.
	var indent, step string
	if i := strings.LastIndexByte(gap, '\n'); i >= 0 && !empty {
		indent = gap[i+1:]
		base := len(s.body[lineStart:open]) - len(bytes.TrimLeft(s.body[lineStart:open], " \t"))
		if len(indent) <= base {
			return edit{}, false
		}
		step = indent[base:]
	}
	text := nestMembers(parts, indent, step, s.eol)
	if empty {
		// "{ }" becomes "{member}".
		return edit{start: open + 1, end: end, text: text}, true
	}
	return edit{start: end, end: end, text: text + comma}, true
}

// separators returns the separators as object m writes them, gap being
// what stands between its "{" and its first member: after a key (": " or
// ":"), and between members (", " or "," on one line, else "," and the
// gap). An empty object, or one of one member, follows the document's
// first key.
func (s *spliceState) separators(m *yaml.Node, gap string) (colon, comma string) {
	colon = s.jsonColon()
	if len(m.Content) > 0 {
		colon = s.before(m.Content[1], ':', colon)
	}
	if !s.json {
		colon = ": " // a plain key ends at ": " only
	}
	comma = "," + gap
	if !strings.Contains(gap, "\n") {
		comma = "," + colon[1:]
		if len(m.Content) > 2 {
			comma = s.before(m.Content[2], ',', comma)
		}
	}
	return colon, comma
}

// nestMembers writes parts, each but the last opening an object that
// holds the next: on one line when step is "", else one member a line,
// each object's members a step deeper than indent, lines ending in eol.
func nestMembers(parts []string, indent, step, eol string) string {
	var b strings.Builder
	depth := indent
	for i, p := range parts {
		b.WriteString(p)
		if i == len(parts)-1 {
			break
		}
		b.WriteString("{")
		if step != "" {
			depth += step
			b.WriteString(eol + depth)
		}
	}
	for range parts[:len(parts)-1] {
		if step != "" {
			depth = depth[:len(depth)-len(step)]
			b.WriteString(eol + depth)
		}
		b.WriteString("}")
	}
	return b.String()
}

// jsonColon returns how the document writes the colon after its first
// key: ": " or ":".
func (s *spliceState) jsonColon() string {
	if i := bytes.Index(s.body, []byte(`":`)); i >= 0 && i+2 < len(s.body) && s.body[i+2] == ' ' {
		return ": "
	}
	return ":"
}

// before returns the delimiter c and the blanks between it and node n, as
// the document writes them, or def when n is not preceded so.
func (s *spliceState) before(n *yaml.Node, c byte, def string) string {
	at, _, ok := s.offset(n)
	if !ok {
		return def
	}
	i := at
	for i > 0 && (s.body[i-1] == ' ' || s.body[i-1] == '\t') {
		i--
	}
	if i == 0 || s.body[i-1] != c {
		return def
	}
	return string(s.body[i-1 : at])
}

// isFlowMapping reports whether n is a mapping in flow style ("{…}").
func isFlowMapping(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.MappingNode && n.Style&yaml.FlowStyle != 0
}

// jsonString writes s as a JSON string.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// encodeJSON writes a changed JSON document back as JSON: its "---" line
// and leading comments as they were, then root's object in the layout of
// the input (one line, or indented as its first member is).
func encodeJSON(d *Document, root *yaml.Node, start int, crlf bool) ([]byte, error) {
	body := d.Body()
	// On one line, the separators follow the document's first key: ": "
	// and ", ", or ":" and ",".
	w := jsonWriter{colon: ":", comma: ","}
	if (&spliceState{body: body[start:]}).jsonColon() == ": " {
		w = jsonWriter{colon: ": ", comma: ", "}
	}
	var compact bytes.Buffer
	if err := w.write(&compact, rootContent(root)); err != nil {
		return nil, fmt.Errorf("%s: encoding JSON: %w", d.Where(), err)
	}
	var out bytes.Buffer
	out.Grow(len(d.Raw) + 256)
	out.Write(d.Raw[:d.Head])
	out.Write(body[:start])
	if indent := jsonIndent(body[start:]); indent != "" {
		if err := json.Indent(&out, compact.Bytes(), "", indent); err != nil {
			return nil, fmt.Errorf("%s: encoding JSON: %w", d.Where(), err)
		}
	} else {
		out.Write(compact.Bytes())
	}
	out.WriteString("\n")
	b := out.Bytes()
	if crlf {
		tail := bytes.ReplaceAll(b[d.Head+start:], []byte("\n"), []byte("\r\n"))
		b = append(b[:d.Head+start:d.Head+start], tail...)
	}
	return b, nil
}

// jsonIndent returns the indentation of the first member of a JSON
// object written one member a line, or "" for an object on one line.
func jsonIndent(obj []byte) string {
	rest := obj[1:]
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 || len(bytes.TrimSpace(rest[:nl])) > 0 {
		return ""
	}
	line := rest[nl+1:]
	return string(line[:len(line)-len(bytes.TrimLeft(line, " \t"))])
}

// jsonWriter writes the nodes of a parsed JSON document as JSON on one
// line, with the separators given.
type jsonWriter struct{ colon, comma string }

// write writes node n, in the order of its members. Scalars other than
// strings are written as the document spelt them, which JSON allowed.
func (w jsonWriter) write(b *bytes.Buffer, n *yaml.Node) error {
	n = Deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteString(w.comma)
			}
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a key that is not a string", k.Line)
			}
			b.WriteString(jsonString(k.Value))
			b.WriteString(w.colon)
			if err := w.write(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteString(w.comma)
			}
			if err := w.write(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			b.WriteString(jsonString(n.Value))
		case "!!null":
			b.WriteString("null")
		default:
			if !json.Valid([]byte(n.Value)) {
				return fmt.Errorf("line %d: %s %s is not JSON", n.Line, n.Tag, n.Value)
			}
			b.WriteString(n.Value)
		}
	default:
		return fmt.Errorf("line %d: %s is not JSON", n.Line, KindName(n))
	}
	return nil
}
