package renderer

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/renderer/stream"
)

// hasSelector reports whether one of fields is a selector.
func hasSelector(fields []string) bool {
	for _, f := range fields {
		if _, ok := kindpath.ParseSelector(f); ok {
			return true
		}
	}
	return false
}

// selectItems returns the items (as written) of the sequence s.Field of
// mapping n that are mappings whose s.Key is the string s.Value, and the
// nodes passed on the way to them (see stream.Entry.Via). A key that stream.Get
// refuses (given twice, say) is an error: the API server could read
// another item as the one selected.
func selectItems(n *yaml.Node, s kindpath.Selector) (items, via []*yaml.Node, err error) {
	list, err := stream.Get(n, s.Field)
	if err != nil || list.Value == nil || list.Value.Kind != yaml.SequenceNode {
		return nil, nil, err
	}
	for _, item := range list.Value.Content {
		k, err := stream.Get(item, s.Key)
		if err != nil {
			return nil, nil, err
		}
		v := k.Value
		if v == nil || v.Kind != yaml.ScalarNode || stream.DecodedKey(v) != s.Value {
			continue
		}
		// The API server reads "!!binary …" as its bytes: digestpin
		// would select by a spelling that another reader may not.
		if v.Tag != "!!str" {
			return nil, nil, &stream.KeyError{Line: v.Line, Msg: fmt.Sprintf("%s[%s=%s]: the %s is spelt %s %s; write it as a string", s.Field, s.Key, s.Value, s.Key, v.Tag, v.Value)}
		}
		items = append(items, item)
	}
	return items, list.Via, nil
}

// pathSelector is the selector of an image path's first field, parsed
// once a Render; ok is false for a first field that is not one.
type pathSelector struct {
	sel kindpath.Selector
	ok  bool
}

// selectorsOf parses the first field of each of paths.
func selectorsOf(paths []kindpath.Image) []pathSelector {
	out := make([]pathSelector, len(paths))
	for i, p := range paths {
		out[i].sel, out[i].ok = kindpath.ParseSelector(p.Fields[0])
	}
	return out
}

// containerPathsFor returns those of paths (ContainerImagePaths) that may
// find a field in container c: a path whose first field selects a flag
// or an item by a key is kept only when c's list holds an item that
// could match, the cheap test that spares most containers the walks of
// every path. A container with a merge key or a key that is not a plain
// string keeps every path, for the walks to read as the API server does.
// sels are selectorsOf(paths).
func containerPathsFor(c *yaml.Node, paths []kindpath.Image, sels []pathSelector) []kindpath.Image {
	c = stream.Deref(c)
	if c == nil || c.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i < len(c.Content); i += 2 {
		if k := c.Content[i]; k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			return paths
		}
	}
	list := func(field string) *yaml.Node {
		for i := 0; i+1 < len(c.Content); i += 2 {
			if c.Content[i].Value == field {
				return stream.Deref(c.Content[i+1])
			}
		}
		return nil
	}
	var out []kindpath.Image
	// The paths come grouped by their first field (args, env): each
	// field is looked up once a group.
	var field string // "" until the first lookup
	var items *yaml.Node
	for i, p := range paths {
		sel, ok := sels[i].sel, sels[i].ok
		if ok && sel.Field != field {
			field, items = sel.Field, list(sel.Field)
		}
		if !ok || mayMatch(items, sel) {
			out = append(out, p)
		}
	}
	return out
}

// mayMatch reports whether an item of list could be one that selector s
// selects: a string with the flag, a mapping with the key's value, or an
// item spelt so that only the walk can tell.
func mayMatch(list *yaml.Node, s kindpath.Selector) bool {
	if list == nil || list.Kind != yaml.SequenceNode {
		return false
	}
	for _, item := range list.Content {
		item = stream.Deref(item)
		switch {
		case s.IsFlag() && item.Kind == yaml.ScalarNode:
			if v, ok := strings.CutPrefix(item.Value, s.Value); ok && (v == "" || v[0] == '=') {
				return true
			}
		case !s.IsFlag() && item.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(item.Content); i += 2 {
				k, v := item.Content[i], stream.Deref(item.Content[i+1])
				if k.Kind != yaml.ScalarNode || k.Tag != "!!str" || (k.Value == s.Key && (v.Kind != yaml.ScalarNode || v.Tag != "!!str" || v.Value == s.Value)) {
					return true
				}
			}
		}
	}
	return false
}
