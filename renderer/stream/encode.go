package stream

import (
	"bytes"
	"fmt"
	"slices"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// encode writes a changed document back: its head as it was, then the
// re-encoded body in the sequence indentation the document used.
func encode(d *Document, root *yaml.Node, crlf bool) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(d.Raw) + 256)
	// Every document but the first starts with the separator that its
	// head holds: the encoder writes no marker for a lone document.
	buf.Write(d.Raw[:d.Head])
	// First the "!" scalars into strings; then the other empty nulls in
	// flow collections into "null": the other way round a "!" in a flow
	// collection ("{! }") would be spelt null.
	spellNonSpecific(root, d.Body())
	spellFlowNulls(root)
	style := yaml.SequenceIndentStyle(yaml.DeriveSeqIndentStyle(string(d.Body())))
	enc := yaml.NewEncoderWithOptions(&buf, &yaml.EncoderOptions{SeqIndent: style})
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("%s: encoding: %w", d.Where(), err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("%s: encoding: %w", d.Where(), err)
	}
	// Keep an explicit end marker: the next document may rely on it.
	if body := bytes.TrimRight(d.Body(), " \t\r\n"); bytes.HasSuffix(body, []byte("\n...")) || bytes.Equal(body, []byte("...")) {
		buf.WriteString("...\n")
	}
	if crlf {
		// The document's line breaks were CRLF: so are the new ones.
		out := buf.Bytes()
		return append(out[:d.Head:d.Head], bytes.ReplaceAll(out[d.Head:], []byte("\n"), []byte("\r\n"))...), nil
	}
	return buf.Bytes(), nil
}

// spellFlowNulls spells out the empty nulls inside flow collections
// ("{a, b: c}", "{? a}": a's value), which the encoder would otherwise
// write as a quoted empty string: something else to the API server.
func spellFlowNulls(root *yaml.Node) {
	type frame struct {
		n    *yaml.Node
		flow bool
	}
	stack := []frame{{n: root}}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		flow := f.flow || f.n.Style&yaml.FlowStyle != 0
		for _, c := range f.n.Content {
			switch {
			case c.Kind == yaml.ScalarNode && flow && c.Tag == "!!null" && c.Value == "":
				c.Value = "null"
			case c.Kind == yaml.MappingNode || c.Kind == yaml.SequenceNode || c.Kind == yaml.DocumentNode:
				stack = append(stack, frame{c, flow})
			}
		}
	}
}

// spellNonSpecific writes as strings the scalars that the document body
// tags "!" (the non-specific tag): the API server's decoder reads "!" as
// "" and "! 0" as the string "0", but the parser resolves them as it
// would without the tag (null, the integer 0), and the encoder would write
// them so.
func spellNonSpecific(root *yaml.Node, body []byte) {
	s := spliceState{body: body}
	stack := []*yaml.Node{root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		// (The parser tags "! Y" !!str already, and the encoder would
		// write it plain: to the API server, which reads YAML 1.1, a
		// boolean.)
		if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
			if s.nonSpecific(n) {
				// Quoted, whatever the value: the API server reads YAML
				// 1.1, where a plain Y, on or no is a boolean.
				n.Tag, n.Style = "!!str", yaml.DoubleQuotedStyle
			}
		}
		stack = append(stack, n.Content...)
	}
}

// NonSpecific says whether body writes the scalar n, a node parsed from
// it, with the non-specific tag "!" (not a "!name" tag of its own), which
// the API server's decoder reads as a string.
func NonSpecific(body []byte, n *yaml.Node) bool {
	return (&spliceState{body: body}).nonSpecific(n)
}

// nonSpecific is NonSpecific of the body of s.
func (s *spliceState) nonSpecific(n *yaml.Node) bool {
	at, _, ok := s.offset(n)
	return ok && at < len(s.body) && s.body[at] == '!' &&
		(at+1 == len(s.body) || bytes.IndexByte([]byte(" \t\r\n,]}"), s.body[at+1]) >= 0)
}

// setAnnotation sets metadata.annotations[key] of a pod template to a
// single-quoted value, the way kyaml's AnnotationSetter writes it (tools
// then never mistake the checksum for a number). Unlike AnnotationSetter,
// it puts a missing metadata just before the spec, where people expect it,
// instead of after it.
func setAnnotation(holder *yaml.Node, key, value string) {
	// template looked every key up already, and sharedMetadata made sure
	// that none comes from a merge key or an alias.
	m, _ := Get(holder, "metadata")
	meta := m.Value
	switch {
	case meta != nil && meta.Kind != yaml.MappingNode:
		// "metadata:" with no value, or something odd: replace it.
		meta = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		setField(holder, "metadata", meta)
	case meta == nil:
		at := len(holder.Content)
		if spec, _ := Get(holder, "spec"); spec.Index >= 0 {
			at = spec.Index
		}
		meta = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		holder.Content = slices.Insert(holder.Content, at, newScalar("metadata"), meta)
	}
	a, _ := Get(meta, "annotations")
	annotations := a.Value
	if annotations == nil || annotations.Kind != yaml.MappingNode {
		annotations = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		setField(meta, "annotations", annotations)
	}
	v := newScalar(value)
	v.Style = yaml.SingleQuotedStyle
	setField(annotations, key, v)
	// An empty flow mapping ("metadata: {}") would keep the annotation on
	// one line; a block mapping reads as usual.
	for _, m := range []*yaml.Node{meta, annotations} {
		if len(m.Content) == 2 {
			m.Style &^= yaml.FlowStyle
		}
	}
}

// setField sets key in mapping m to v, replacing its value or appending it.
func setField(m *yaml.Node, key string, v *yaml.Node) {
	if e, _ := Get(m, key); e.Index >= 0 {
		m.Content[e.Index+1] = v
		return
	}
	m.Content = append(m.Content, newScalar(key), v)
}

func newScalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
