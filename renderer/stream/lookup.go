package stream

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Entry is what get finds for a key in a mapping.
type Entry struct {
	// Key and Value are the Key node and the Value (aliases followed);
	// both are nil when the mapping does not hold the Key.
	Key, Value *yaml.Node
	// Index is the position of key in the mapping's Content, or -1 when
	// the key comes from a merge key.
	Index int
	// Via are the nodes passed on the way from the mapping to the value,
	// as written (aliases unfollowed): merge key values and the items of
	// merged sequences, then the value itself. The mapping that holds
	// the value is deref of the node before it, or the mapping asked.
	Via []*yaml.Node
}

// Get returns the value of key in mapping m as the Kubernetes API server's
// decoder (sigs.k8s.io/yaml, which decodes with yaml.v2 and keeps the last
// of repeated keys and lets a later merge key override earlier keys) reads
// it, or a *keyError where that reading could differ from a reading that
// takes the first key. Every lookup on the path from a document's root to
// its images and checksum annotations goes through Get, and the rule is
// strict rather than subtle: key must occur once, counting the mappings
// that m merges ("<<: *base", recursively).
// Refused are: key written twice; key both in m and in a mapping m merges,
// whichever comes first; key in two merged mappings; a key that decodes to
// key but is spelt another way than as a string (a !!binary key holding
// its base64, a custom tag, an alias of a scalar "key"). A quoted or
// escaped spelling is a string and fine. Mappings that Get is not asked
// about (a ConfigMap's data, a container's env) are not digestpin's
// business: repeated keys there are left to the API server.
// A nil or non-mapping m holds nothing. checkAliases refused the documents
// whose merges are cyclic or too costly to follow.
func Get(m *yaml.Node, key string) (Entry, error) {
	found := Entry{Index: -1}
	m = Deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return found, nil
	}
	var merges []int
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if isMergeKey(k) {
			merges = append(merges, i)
			continue
		}
		if ok, err := keyIs(k, key); err != nil || !ok {
			if err != nil {
				return Entry{}, err
			}
			continue
		}
		if found.Key != nil {
			return Entry{}, &KeyError{k.Line, key + " is given twice"}
		}
		found = Entry{Key: k, Value: Deref(m.Content[i+1]), Index: i, Via: []*yaml.Node{m.Content[i+1]}}
	}
	explicit := found.Key != nil
	for _, i := range merges {
		for _, src := range mergeSources(m.Content[i+1]) {
			sub, err := Get(Deref(src[len(src)-1]), key)
			if err != nil {
				return Entry{}, err
			}
			if sub.Key == nil {
				continue
			}
			if explicit {
				return Entry{}, &KeyError{m.Content[i].Line, key + " is both in the mapping and in a merge key (<<)"}
			}
			if found.Key != nil {
				return Entry{}, &KeyError{m.Content[i].Line, key + " is given twice in merge keys (<<)"}
			}
			found = Entry{Key: sub.Key, Value: sub.Value, Index: -1, Via: append(slices.Clip(src), sub.Via...)}
		}
	}
	return found, nil
}

// keyIs reports whether key node k decodes to key; it refuses a key that
// does, but is not spelt as a string.
func keyIs(k *yaml.Node, key string) (bool, error) {
	switch k.Kind {
	case yaml.AliasNode:
		// An alias of the string key is that key to every reader (the API
		// server's, Helm's, kubectl's): it is read as one; an alias of
		// anything else spelt so is refused as the scalar would be.
		if t := Deref(k); t != nil && t.Kind == yaml.ScalarNode && DecodedKey(t) == key {
			if t.Tag != "!!str" {
				return false, &KeyError{k.Line, fmt.Sprintf("the key %s is an alias (*%s) of %s %s; write it out", key, k.Value, t.Tag, t.Value)}
			}
			return true, nil
		}
	case yaml.ScalarNode:
		if DecodedKey(k) != key {
			return false, nil
		}
		if k.Tag != "!!str" {
			return false, &KeyError{k.Line, fmt.Sprintf("the key %s is spelt %s %s; write it out", key, k.Tag, k.Value)}
		}
		return true, nil
	}
	return false, nil
}

// DecodedKey returns the string a scalar key decodes to: the bytes of a
// !!binary key, the value of any other.
func DecodedKey(k *yaml.Node) string {
	if k.Tag == "!!binary" {
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(k.Value), ""))
		if err != nil {
			return ""
		}
		return string(b)
	}
	return k.Value
}

// isMergeKey reports whether a mapping key is the merge key "<<".
func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Tag == "!!merge" && k.Value == "<<"
}

// mergeSources returns the mappings a merge key's value names: one
// mapping, or a sequence of them. Each is given as the nodes passed to
// reach it, as written (aliases unfollowed): the value, and the item of a
// sequence; the last, dereferenced, is the mapping.
func mergeSources(v *yaml.Node) [][]*yaml.Node {
	switch d := Deref(v); {
	case d == nil:
		return nil
	case d.Kind == yaml.MappingNode:
		return [][]*yaml.Node{{v}}
	case d.Kind == yaml.SequenceNode:
		var out [][]*yaml.Node
		for _, c := range d.Content {
			if m := Deref(c); m.Kind == yaml.MappingNode {
				out = append(out, []*yaml.Node{v, c})
			}
		}
		return out
	}
	return nil
}

// Values returns the Values of mapping m (or the items of sequence m),
// for a "*" step of a pod spec path. It refuses a mapping where the API
// server could see other Values: repeated keys, merge keys, keys that are
// aliases or tagged other than as strings.
func Values(m *yaml.Node) ([]*yaml.Node, error) {
	m = Deref(m)
	switch {
	case m == nil:
		return nil, nil
	case m.Kind == yaml.SequenceNode:
		return m.Content, nil
	case m.Kind != yaml.MappingNode:
		return nil, nil
	}
	var out []*yaml.Node
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		switch {
		case isMergeKey(k):
			return nil, &KeyError{k.Line, "holds a merge key (<<); write it out"}
		case k.Kind != yaml.ScalarNode:
			return nil, &KeyError{k.Line, "holds a key that is not a string"}
		case k.Tag != "!!str":
			return nil, &KeyError{k.Line, fmt.Sprintf("holds the key %s %s; write it out", k.Tag, k.Value)}
		case seen[k.Value]:
			return nil, &KeyError{k.Line, fmt.Sprintf("holds the key %s twice", k.Value)}
		}
		seen[k.Value] = true
		out = append(out, m.Content[i+1])
	}
	return out, nil
}

// Str returns the string value of key in mapping m, or "" when m does not
// hold it or it is null. Any other value than a string scalar is an error:
// the API server would read something else or refuse it.
func Str(m *yaml.Node, key string) (string, error) {
	e, err := Get(m, key)
	switch {
	case err != nil:
		return "", err
	case e.Value == nil || (e.Value.Kind == yaml.ScalarNode && e.Value.Tag == "!!null"):
		return "", nil
	case e.Value.Kind != yaml.ScalarNode || e.Value.Tag != "!!str":
		return "", &KeyError{e.Value.Line, fmt.Sprintf("%s is %s, want a string", key, Describe(e.Value))}
	}
	return e.Value.Value, nil
}

// Deref follows an alias to the node it names.
func Deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}
