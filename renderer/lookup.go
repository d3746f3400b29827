package renderer

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// entry is what get finds for a key in a mapping.
type entry struct {
	// key and value are the key node and the value (aliases followed);
	// both are nil when the mapping does not hold the key.
	key, value *yaml.Node
	// index is the position of key in the mapping's Content, or -1 when
	// the key comes from a merge key.
	index int
	// via are the nodes passed on the way from the mapping to the value,
	// as written (aliases unfollowed): merge key values and the items of
	// merged sequences, then the value itself. The mapping that holds
	// the value is deref of the node before it, or the mapping asked.
	via []*yaml.Node
}

// get returns the value of key in mapping m as the Kubernetes API server's
// decoder (sigs.k8s.io/yaml, which decodes with yaml.v2 and keeps the last
// of repeated keys and lets a later merge key override earlier keys) reads
// it, or a *keyError where that reading could differ from a reading that
// takes the first key. Every lookup on the path from a document's root to
// its images and checksum annotations goes through get, and the rule is
// strict rather than subtle: key must occur once, counting the mappings
// that m merges ("<<: *base", recursively).
// Refused are: key written twice; key both in m and in a mapping m merges,
// whichever comes first; key in two merged mappings; a key that decodes to
// key but is spelt another way than as a string (a !!binary key holding
// its base64, a custom tag, an alias of a scalar "key"). A quoted or
// escaped spelling is a string and fine. Mappings that get is not asked
// about (a ConfigMap's data, a container's env) are not digestpin's
// business: repeated keys there are left to the API server.
// A nil or non-mapping m holds nothing. checkAliases refused the documents
// whose merges are cyclic or too costly to follow.
func get(m *yaml.Node, key string) (entry, error) {
	found := entry{index: -1}
	m = deref(m)
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
				return entry{}, err
			}
			continue
		}
		if found.key != nil {
			return entry{}, &keyError{k.Line, key + " is given twice"}
		}
		found = entry{key: k, value: deref(m.Content[i+1]), index: i, via: []*yaml.Node{m.Content[i+1]}}
	}
	explicit := found.key != nil
	for _, i := range merges {
		for _, src := range mergeSources(m.Content[i+1]) {
			sub, err := get(deref(src[len(src)-1]), key)
			if err != nil {
				return entry{}, err
			}
			if sub.key == nil {
				continue
			}
			if explicit {
				return entry{}, &keyError{m.Content[i].Line, key + " is both in the mapping and in a merge key (<<)"}
			}
			if found.key != nil {
				return entry{}, &keyError{m.Content[i].Line, key + " is given twice in merge keys (<<)"}
			}
			found = entry{key: sub.key, value: sub.value, index: -1, via: append(slices.Clip(src), sub.via...)}
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
		if t := deref(k); t != nil && t.Kind == yaml.ScalarNode && decodedKey(t) == key {
			if t.Tag != "!!str" {
				return false, &keyError{k.Line, fmt.Sprintf("the key %s is an alias (*%s) of %s %s; write it out", key, k.Value, t.Tag, t.Value)}
			}
			return true, nil
		}
	case yaml.ScalarNode:
		if decodedKey(k) != key {
			return false, nil
		}
		if k.Tag != "!!str" {
			return false, &keyError{k.Line, fmt.Sprintf("the key %s is spelt %s %s; write it out", key, k.Tag, k.Value)}
		}
		return true, nil
	}
	return false, nil
}

// decodedKey returns the string a scalar key decodes to: the bytes of a
// !!binary key, the value of any other.
func decodedKey(k *yaml.Node) string {
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
	switch d := deref(v); {
	case d == nil:
		return nil
	case d.Kind == yaml.MappingNode:
		return [][]*yaml.Node{{v}}
	case d.Kind == yaml.SequenceNode:
		var out [][]*yaml.Node
		for _, c := range d.Content {
			if m := deref(c); m.Kind == yaml.MappingNode {
				out = append(out, []*yaml.Node{v, c})
			}
		}
		return out
	}
	return nil
}

// values returns the values of mapping m (or the items of sequence m),
// for a "*" step of a pod spec path. It refuses a mapping where the API
// server could see other values: repeated keys, merge keys, keys that are
// aliases or tagged other than as strings.
func values(m *yaml.Node) ([]*yaml.Node, error) {
	m = deref(m)
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
			return nil, &keyError{k.Line, "holds a merge key (<<); write it out"}
		case k.Kind != yaml.ScalarNode:
			return nil, &keyError{k.Line, "holds a key that is not a string"}
		case k.Tag != "!!str":
			return nil, &keyError{k.Line, fmt.Sprintf("holds the key %s %s; write it out", k.Tag, k.Value)}
		case seen[k.Value]:
			return nil, &keyError{k.Line, fmt.Sprintf("holds the key %s twice", k.Value)}
		}
		seen[k.Value] = true
		out = append(out, m.Content[i+1])
	}
	return out, nil
}

// str returns the string value of key in mapping m, or "" when m does not
// hold it or it is null. Any other value than a string scalar is an error:
// the API server would read something else or refuse it.
func str(m *yaml.Node, key string) (string, error) {
	e, err := get(m, key)
	switch {
	case err != nil:
		return "", err
	case e.value == nil || (e.value.Kind == yaml.ScalarNode && e.value.Tag == "!!null"):
		return "", nil
	case e.value.Kind != yaml.ScalarNode || e.value.Tag != "!!str":
		return "", &keyError{e.value.Line, fmt.Sprintf("%s is %s, want a string", key, describe(e.value))}
	}
	return e.value.Value, nil
}
