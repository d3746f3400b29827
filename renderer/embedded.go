package renderer

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/renderer/stream"
)

// EmbeddedPrefix starts the Workload.Field of an image reference found
// inside a string (an Unpinned value, or an image that an image path
// with Embedded pinned there): the path, in the YAML or JSON
// document the string holds, of the field that names it
// ("embedded/spec.containers[0].image"); the Workload's Container is then
// FieldPrefix and the path of the string in its object
// (`field/data["policy-server.yaml"]`).
const EmbeddedPrefix = "embedded/"

// maxEmbeddedNodes bounds the nodes of the text of one string that the
// finder parses for embedded images (stream.ParseText): a manifest or
// configuration file takes a few hundred; a worker holds one such tree
// at a time, some 25 MiB at most beside its document's.
const maxEmbeddedNodes = 1 << 16

// maxEmbeddedDepth bounds how deep the finder looks, in an object and in
// the text one of its strings holds, for embedded images.
const maxEmbeddedDepth = 256

// mayEmbed reports whether a document body may hold a string with a line
// break: a block scalar ("|", ">") or an escape ("\n" in a double-quoted
// string, JSON's only spelling). A quoted or plain scalar over several
// lines folds its breaks away but for an empty line, and loses the
// indentation that nested YAML needs. A document without any of these
// bytes is not walked for embedded images at all.
func mayEmbed(body []byte) bool {
	return bytes.IndexByte(body, '|') >= 0 || bytes.IndexByte(body, '>') >= 0 || bytes.IndexByte(body, '\\') >= 0
}

// embeds reports whether the string s is worth parsing for images: it
// has a line break and says image. Most strings of a manifest are
// neither, and are never parsed.
func embeds(s string) bool {
	return strings.IndexByte(s, '\n') >= 0 && (strings.Contains(s, "image") || strings.Contains(s, "Image"))
}

// scanEmbedded lists, in e.unpinned, the tagged image references inside
// the strings of obj that hold a YAML or JSON document (a ConfigMap's
// data, an annotation, any string field): the values of fields whose
// name says image, outside labels and annotations, in that document,
// but for those that an image path pinned there (pinEmbedded). It never
// changes the string. Only strings with a line break that say
// image are parsed (embeds), each within maxEmbeddedNodes and the alias
// guards of stream.ParseText; a string that is no YAML, or that the
// guards refuse, is skipped. CustomResourceDefinitions are not scanned:
// their schemas' descriptions show examples.
func (e *finder) scanEmbedded(obj *yaml.Node, w Workload) {
	if w.Kind == "CustomResourceDefinition" {
		return
	}
	var path []string
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		// Step into each anchored node once, whether an alias or its
		// own place leads to it: aliases could make the walk grow
		// exponentially.
		if n = stream.Deref(n); n == nil || n.Anchor != "" && !once(&e.embedSeen, n) {
			return
		}
		if depth > maxEmbeddedDepth {
			return
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				path = append(path, keyPath(n.Content[i].Value))
				walk(n.Content[i+1], depth+1)
				path = path[:len(path)-1]
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				path = append(path, "["+strconv.Itoa(i)+"]")
				walk(c, depth+1)
				path = path[:len(path)-1]
			}
		case yaml.ScalarNode:
			if n.Tag == "!!str" && !e.handled[n] && embeds(n.Value) {
				w.Container = FieldPrefix + strings.TrimPrefix(strings.Join(path, ""), ".")
				e.scanText(n, w)
			}
		}
	}
	walk(obj, 0)
}

// scanText lists the tagged image references of the documents that the
// text of string scalar n holds, as fields of w.
func (e *finder) scanText(n *yaml.Node, w Workload) {
	roots, err := stream.ParseText(n.Value, maxEmbeddedNodes)
	if err != nil {
		return // no YAML, or more than the guards let through
	}
	// The text's own aliases: each anchored node once, across its
	// documents.
	var seen map[*yaml.Node]bool
	var path []string
	var walk func(n *yaml.Node, key string, depth int)
	walk = func(v *yaml.Node, key string, depth int) {
		if v = stream.Deref(v); v == nil || v.Anchor != "" && !once(&seen, v) {
			return
		}
		if depth > maxEmbeddedDepth {
			return
		}
		switch v.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(v.Content); i += 2 {
				k := v.Content[i].Value
				if k == "labels" || k == "annotations" {
					continue
				}
				path = append(path, keyPath(k))
				walk(v.Content[i+1], k, depth+1)
				path = path[:len(path)-1]
			}
		case yaml.SequenceNode:
			for i, c := range v.Content {
				path = append(path, "["+strconv.Itoa(i)+"]")
				walk(c, key, depth+1)
				path = path[:len(path)-1]
			}
		case yaml.ScalarNode:
			if v.Tag == "!!str" && mentionsImage(key) && looksPinnable(v.Value) && !e.embedPinned[n][textPlace{v.Line, v.Column}] {
				w.Field = EmbeddedPrefix + strings.TrimPrefix(strings.Join(path, ""), ".")
				e.unpinned = append(e.unpinned, Unpinned{Reference: strings.Clone(v.Value), Workload: e.own(w), Where: e.d.At(n.Line)})
			}
		}
	}
	for i, root := range roots {
		path = path[:0]
		if len(roots) > 1 {
			// A text of several documents names the document first.
			path = append(path, "("+strconv.Itoa(i+1)+")")
		}
		walk(root, "", 0)
	}
}

// keyPath spells a mapping key as a step of a field path: ".name" for a
// key of letters, digits, "-" and "_", else `["policy-server.yaml"]`.
func keyPath(k string) string {
	plain := k != ""
	for _, c := range k {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			plain = false
			break
		}
	}
	if plain {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}

// textPlace is where a scalar is in the text of a string, as the
// parser of the text (stream.ParseText) counts: the same in every parse
// of that text.
type textPlace struct{ line, column int }

// pinEmbedded finds the image fields that image path p leads to inside
// the document (or documents) that the string at key of mapping m holds,
// at path in the object (Image.Embedded), and returns their checksum
// lines. Each is pinned like an image field of the object, in its bytes
// alone: the rest of the text, and of the document, stays byte for byte
// as it was. Where that cannot be exact (stream.EmbeddedOffset: a string
// that is not a literal block scalar, a value with an escape or over
// several lines, anchors and aliases on the way), it fails naming the
// document, the field and the image rather than write anything else.
func (e *finder) pinEmbedded(m *yaml.Node, key, path string, w Workload, p kindpath.Image) ([]sumLine, error) {
	outer, err := stream.Get(m, key)
	if err != nil {
		return nil, e.keyError(err, w.String())
	}
	if unset(outer.Value) {
		return nil, nil
	}
	s := outer.Value
	// The string's path as scanEmbedded spells it: `data["policy.yaml"]`.
	if base := strings.TrimSuffix(strings.TrimSuffix(path, key), "."); base == "" {
		w.Container = FieldPrefix + strings.TrimPrefix(keyPath(key), ".")
	} else {
		w.Container = FieldPrefix + base + keyPath(key)
	}
	switch raw := outer.Via[len(outer.Via)-1]; {
	case s.Kind != yaml.ScalarNode || s.Tag != "!!str":
		return nil, fmt.Errorf("%s: %s: the image path %s leads to %s, want a string that holds a YAML or JSON document", e.d.At(s.Line), w, p, stream.Describe(s))
	case raw.Kind == yaml.AliasNode || s.Anchor != "" || outer.Index < 0:
		// Its bytes are those of other fields too.
		return nil, fmt.Errorf("%s: %s: cannot pin the images of image path %s inside the string: it is shared through an anchor, an alias or a merge key; write it out", e.d.At(s.Line), w, p)
	}
	roots, err := stream.ParseText(s.Value, maxEmbeddedNodes)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: reading the text for image path %s: %w", e.d.At(s.Line), w, p, err)
	}
	var lines []sumLine
	for i, root := range roots {
		var fields []*yaml.Node // the image fields, in the walk's order
		var paths []string
		shared := root.Anchor != "" // an anchor or alias on the way
		err := walk(root, p.Embedded, func(n *yaml.Node) {
			shared = shared || n.Kind == yaml.AliasNode || n.Anchor != ""
		}, func(_, n *yaml.Node, _ string, trail []string) bool {
			fields = append(fields, n)
			paths = append(paths, textPath(trail, i, len(roots)))
			return true
		})
		if ke := (*stream.KeyError)(nil); errors.As(err, &ke) {
			return nil, fmt.Errorf("%s: %s: in the text: %s", e.textAt(s, ke.Line), w, ke.Msg)
		} else if err != nil {
			return nil, err
		}
		for j, v := range fields {
			w.Field = EmbeddedPrefix + paths[j]
			if unset(v) || e.embedPinned[s][textPlace{v.Line, v.Column}] {
				continue // nothing to pin, or another path pinned it
			}
			if shared {
				return nil, fmt.Errorf("%s: %s: cannot pin %q inside the string: an anchor or alias of the text is on the way to it, and other fields may share it; write it out", e.textAt(s, v.Line), w, v.Value)
			}
			line, err := e.pinTextField(m, outer, v, w, p.Embedded[len(p.Embedded)-1])
			if err != nil {
				return nil, err
			}
			lines = append(lines, line)
		}
	}
	return lines, nil
}

// pinTextField records image field v (under key) of the text of the
// string outer, found in mapping m and used by w, as a field to pin in
// its bytes alone, and returns its checksum line; it refuses one whose
// bytes are not exactly its value (stream.Embedded.Offset), or that holds
// no reference (but keeps it, with KeepUnresolved, as pinImage does).
func (e *finder) pinTextField(m *yaml.Node, outer stream.Entry, v *yaml.Node, w Workload, key string) (sumLine, error) {
	s := outer.Value
	if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
		return sumLine{}, fmt.Errorf("%s: %s: %s is %s, want a reference such as registry/name:tag", e.textAt(s, v.Line), w, key, stream.Describe(v))
	}
	ref, err := e.r.parseReference(key, v)
	if err != nil {
		err = fmt.Errorf("%s: %s: %w", e.textAt(s, v.Line), w, err)
		if !e.r.KeepUnresolved {
			return sumLine{}, err
		}
		e.kept = append(e.kept, fmt.Sprintf("keeping %s %q unpinned: %v", key, v.Value, err))
		return sumLine{container: w.Container, field: w.Field, fieldValue: fieldValue{site: -1, text: v.Value}}, nil
	}
	if e.embedded == nil {
		e.embedded = stream.NewEmbedded(e.d.Body())
	}
	if _, err := e.embedded.Offset(s, v); err != nil {
		return sumLine{}, fmt.Errorf("%s: %s: cannot pin %q inside the string exactly: %w", e.textAt(s, v.Line), w, v.Value, err)
	}
	if e.embedPinned == nil {
		e.embedPinned = map[*yaml.Node]map[textPlace]bool{}
	}
	if e.embedPinned[s] == nil {
		e.embedPinned[s] = map[textPlace]bool{}
	}
	e.embedPinned[s][textPlace{v.Line, v.Column}] = true
	u := use{image: intern(v.Value), ref: ref, workload: e.own(w), doc: e.d, line: s.Line + v.Line}
	fv := e.site(u, m, outer, v.Value, "")
	// A copy of the scalar alone, so that the text's tree is not kept
	// until the document is written: a document of many strings would
	// hold all their trees at once.
	inner := *v
	inner.Content, inner.Alias = nil, nil
	e.sites[fv.site].inner = &inner
	return sumLine{container: w.Container, field: w.Field, fieldValue: fv}, nil
}

// textAt says where line n of the text of string s is: the document's
// line for a literal block scalar, whose lines are the text's, else the
// string's own line.
func (e *finder) textAt(s *yaml.Node, n int) string {
	if s.Style&yaml.LiteralStyle != 0 {
		return e.d.At(s.Line + n)
	}
	return e.d.At(s.Line)
}

// textPath spells the trail of a walk in the i-th of n documents of a
// string's text as scanText spells the path of a field it lists:
// "spec.containers[0].image", `data["a.yaml"]`, "(2).spec.image".
func textPath(trail []string, i, n int) string {
	var b strings.Builder
	if n > 1 {
		b.WriteString("(" + strconv.Itoa(i+1) + ")")
	}
	for _, t := range trail {
		if _, ok := kindpath.ParseSelector(t); ok || strings.HasPrefix(t, "[") {
			if !strings.HasPrefix(t, "[") {
				b.WriteByte('.')
			}
			b.WriteString(t)
			continue
		}
		b.WriteString(keyPath(t))
	}
	return strings.TrimPrefix(b.String(), ".")
}
