package renderer

import (
	"bytes"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/renderer/stream"
)

// EmbeddedPrefix starts the Workload.Field of an image reference found
// inside a string (an Unpinned value): the path, in the YAML or JSON
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
// name says image, outside labels and annotations, in that document. It
// never changes the string. Only strings with a line break that say
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
			if v.Tag == "!!str" && mentionsImage(key) && looksPinnable(v.Value) {
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
