package steady

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// decode returns the value of a document's JSON, numbers as json.Number
// so that every number compares as written.
func decode(j []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding JSON: %w", err)
	}
	return v, nil
}

// differ collects the paths where two values differ.
type differ struct {
	paths []path
	// pairs, when not nil, gets the two values of each path where both
	// are strings, by the path's String.
	pairs map[string][2]string
}

func (d *differ) add(p path) { d.paths = append(d.paths, slices.Clone(p)) }

// diff adds the paths under p where a and b differ: a leaf whose values
// differ, or the root of a subtree whose shape differs. Mapping keys are
// visited in sorted order, so the paths come out in a stable order.
func (d *differ) diff(p path, a, b any) {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok {
			d.add(p)
			return
		}
		for _, k := range sortedKeys(a) {
			if bv, ok := b[k]; ok {
				d.diff(p.key(k), a[k], bv)
			} else {
				d.add(p.key(k))
			}
		}
		for _, k := range sortedKeys(b) {
			if _, ok := a[k]; !ok {
				d.add(p.key(k))
			}
		}
	case []any:
		b, ok := b.([]any)
		if !ok {
			d.add(p)
			return
		}
		if na, nb := names(a), names(b); na != nil && nb != nil {
			d.diffNamed(p, a, b, na, nb)
			return
		}
		for i := range min(len(a), len(b)) {
			d.diff(p.index(i), a[i], b[i])
		}
		for i := min(len(a), len(b)); i < max(len(a), len(b)); i++ {
			d.add(p.index(i))
		}
	default:
		// Scalars: json.Number, string, bool or nil. Values of different
		// types are different, even a number and its string.
		if a != b {
			d.add(p)
			as, aok := a.(string)
			bs, bok := b.(string)
			if d.pairs != nil && aok && bok {
				d.pairs[p.String()] = [2]string{as, bs}
			}
		}
	}
}

// diffNamed compares two lists of named items by name. Items in another
// order are a difference of the list itself: the order of env or
// containers can matter.
func (d *differ) diffNamed(p path, a, b []any, na, nb map[string]int) {
	var common []string // names in both, in a's order
	for _, it := range a {
		n := it.(map[string]any)["name"].(string)
		if j, ok := nb[n]; ok {
			common = append(common, n)
			d.diff(p.name(n), it, b[j])
		} else {
			d.add(p.name(n))
		}
	}
	k, moved := 0, false
	for _, it := range b {
		n := it.(map[string]any)["name"].(string)
		if _, ok := na[n]; !ok {
			d.add(p.name(n))
			continue
		}
		moved = moved || common[k] != n
		k++
	}
	if moved {
		d.add(p)
	}
}

// names returns the position of each item of a list by name when every
// item is a mapping with a distinct string name, or nil. An empty list
// has no items to disagree: its map is empty, not nil.
func names(l []any) map[string]int {
	byName := make(map[string]int, len(l))
	for i, it := range l {
		m, ok := it.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := m["name"].(string)
		if !ok {
			return nil
		}
		if _, dup := byName[n]; dup {
			return nil
		}
		byName[n] = i
	}
	return byName
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
