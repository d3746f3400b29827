package detgen

import (
	"bytes"
	"testing"
)

// namedMap is a map type of its own, as Helm's Values is.
type namedMap map[string]any

// TestIterationKey: a range entry's key is what names it, its position
// only where nothing does.
func TestIterationKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		key, elem any
		same      []any // other (key, elem) pairs, flattened, with the same key
		other     []any // pairs with another key
		ordered   bool
	}{
		{desc: "map key", key: "grafana", elem: map[string]any{}, same: []any{"grafana", 7}, other: []any{"jupyter", map[string]any{}}},
		{desc: "list of strings", key: 0, elem: "alice", same: []any{5, "alice"}, other: []any{0, "bob"}},
		{desc: "list of numbers", key: 0, elem: 3, same: []any{9, 3}, other: []any{0, "3"}},
		{desc: "named entry", key: 0, elem: map[string]any{"name": "ops", "role": "a"}, same: []any{4, map[string]any{"name": "ops", "role": "b"}}, other: []any{0, map[string]any{"name": "ci"}}},
		{desc: "id before key", key: 1, elem: map[string]any{"id": 7, "key": "k"}, same: []any{2, namedMap{"id": 7}}, other: []any{1, map[string]any{"key": 7}}},
		{desc: "no name", key: 2, elem: map[string]any{"role": "a"}, same: []any{2, map[string]any{"role": "b"}}, other: []any{3, map[string]any{"role": "a"}}, ordered: true},
		{desc: "name not a scalar", key: 2, elem: map[string]any{"name": []any{"x"}}, same: []any{2, map[string]any{"name": []any{"y"}}}, other: []any{1, map[string]any{"name": []any{"x"}}}, ordered: true},
	} {
		k, ordered := iterationKey(tc.key, tc.elem)
		if ordered != tc.ordered {
			t.Errorf("%s: ordered %v, want %v", tc.desc, ordered, tc.ordered)
		}
		if k2, _ := iterationKey(tc.same[0], tc.same[1]); !bytes.Equal(k, k2) {
			t.Errorf("%s: %v and %v have other keys", tc.desc, tc.elem, tc.same)
		}
		if k2, _ := iterationKey(tc.other[0], tc.other[1]); bytes.Equal(k, k2) {
			t.Errorf("%s: %v and %v have one key", tc.desc, tc.elem, tc.other)
		}
	}
}
