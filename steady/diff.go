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
	// wholes, when not nil, gets the two values of each path that is no
	// leaf (see addWhole), by the path's String.
	wholes map[string][2]any
	// scalars, when not nil, gets the two values of each leaf (two
	// scalars that differ), by the path's String.
	scalars map[string][2]any
	// byIndex compares unnamed lists item by item even when their items
	// do not line up, for the warnings, which name the items that
	// differ; never for the fields Keep allows.
	byIndex bool
}

// newDiffer returns a differ that collects the values of its paths.
func newDiffer() *differ {
	return &differ{pairs: map[string][2]string{}, wholes: map[string][2]any{}, scalars: map[string][2]any{}}
}

// absent is the value of a key or item where a render holds none.
type absent struct{}

func (d *differ) add(p path) { d.paths = append(d.paths, slices.Clone(p)) }

// addWhole adds p, where a and b differ in more than a scalar: a key or
// item present in one only (the other absent{}), values of different
// shapes, named items in another order, or unnamed lists whose items do
// not line up by position. A difference at p is not a difference of the
// fields under it: it is the two values whole.
func (d *differ) addWhole(p path, a, b any) {
	d.add(p)
	if d.wholes != nil {
		d.wholes[p.String()] = [2]any{a, b}
	}
}

// diff adds the paths under p where a and b differ: a leaf whose values
// differ, or the root of a subtree whose shape differs. Mapping keys are
// visited in sorted order, so the paths come out in a stable order.
func (d *differ) diff(p path, a, b any) {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok {
			d.addWhole(p, a, b)
			return
		}
		for _, k := range sortedKeys(a) {
			if bv, ok := bm[k]; ok {
				d.diff(p.key(k), a[k], bv)
			} else {
				d.addWhole(p.key(k), a[k], absent{})
			}
		}
		for _, k := range sortedKeys(bm) {
			if _, ok := a[k]; !ok {
				d.addWhole(p.key(k), absent{}, bm[k])
			}
		}
	case []any:
		bl, ok := b.([]any)
		if !ok {
			d.addWhole(p, a, b)
			return
		}
		if na, nb := names(a), names(bl); na != nil && nb != nil {
			d.diffNamed(p, a, bl, na, nb)
			return
		}
		// Items compared by position must be the same items: a list
		// with an item more, or whose equal items stand at other
		// places, would pair every later item with another one, and
		// each of those pairs would look volatile.
		if !d.byIndex && !aligned(a, bl) {
			d.addWhole(p, a, bl)
			return
		}
		for i := range min(len(a), len(bl)) {
			d.diff(p.index(i), a[i], bl[i])
		}
		for i := len(bl); i < len(a); i++ {
			d.addWhole(p.index(i), a[i], absent{})
		}
		for i := len(a); i < len(bl); i++ {
			d.addWhole(p.index(i), absent{}, bl[i])
		}
	default:
		// Scalars: json.Number, string, bool or nil. Values of different
		// types are different, even a number and its string.
		if !scalar(b) {
			d.addWhole(p, a, b)
			return
		}
		if a != b {
			d.add(p)
			if d.scalars != nil {
				d.scalars[p.String()] = [2]any{a, b}
			}
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
			d.addWhole(p.name(n), it, absent{})
		}
	}
	k, moved := 0, false
	for _, it := range b {
		n := it.(map[string]any)["name"].(string)
		if _, ok := na[n]; !ok {
			d.addWhole(p.name(n), absent{}, it)
			continue
		}
		moved = moved || common[k] != n
		k++
	}
	if moved {
		d.addWhole(p, a, b)
	}
}

// scalar reports whether v is no mapping and no list.
func scalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

// aligned reports whether two unnamed lists have the same length and no
// longest common subsequence of their items pairs more equal items than
// their positions do: then position i of one is position i of the other.
// Lists too long to align (see maxAlign) are not.
func aligned(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	ka, kb := itemKeys(a), itemKeys(b)
	same := 0
	for i := range ka {
		if ka[i] == kb[i] {
			same++
		}
	}
	if same == len(ka) {
		return true
	}
	if (len(ka)+1)*(len(kb)+1) > maxAlign {
		return false
	}
	return lcs(ka, kb) == same
}

// itemKeys returns each item as its JSON, mapping keys sorted: equal
// items, equal strings.
func itemKeys(l []any) []string {
	out := make([]string, len(l))
	for i, it := range l {
		j, err := json.Marshal(it)
		if err != nil {
			// A decoded document always encodes; should it not, the
			// item equals nothing but itself.
			j = fmt.Appendf(nil, "\x00%d", i)
		}
		out[i] = string(j)
	}
	return out
}

// lcs returns the length of the longest common subsequence of a and b.
func lcs(a, b []string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
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
