package steady

import (
	"reflect"
	"strconv"
	"strings"
)

// segKind says how a path segment steps into a value.
type segKind uint8

const (
	segKey   segKind = iota // a mapping key
	segIndex                // a list item by position
	segName                 // a list item by its name field
)

// seg is one step of a field path.
type seg struct {
	kind  segKind
	key   string // segKey: the key; segName: the item's name
	index int    // segIndex
}

// path is a field path from the root of a document.
type path []seg

// key, index and name return p with one more step. The three-index
// slice makes append copy, so that siblings never share their last step.
func (p path) key(k string) path  { return append(p[:len(p):len(p)], seg{kind: segKey, key: k}) }
func (p path) index(i int) path   { return append(p[:len(p):len(p)], seg{kind: segIndex, index: i}) }
func (p path) name(n string) path { return append(p[:len(p):len(p)], seg{kind: segName, key: n}) }

// String writes the path as the package documentation describes; the
// root of a document is ".".
func (p path) String() string {
	if len(p) == 0 {
		return "."
	}
	var b strings.Builder
	for i := range p {
		p.write(&b, i)
	}
	return b.String()
}

// write writes step i of p. The steps written one after the other are the
// path's String, and each prefix of it is its own prefix's String.
func (p path) write(b *strings.Builder, i int) {
	s := p[i]
	switch s.kind {
	case segKey:
		if bare(s.key, false) {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		} else {
			b.WriteString("[" + strconv.Quote(s.key) + "]")
		}
	case segIndex:
		b.WriteString("[" + strconv.Itoa(s.index) + "]")
	case segName:
		if bare(s.key, true) {
			b.WriteString("[name=" + s.key + "]")
		} else {
			b.WriteString("[name=" + strconv.Quote(s.key) + "]")
		}
	}
}

// pathSet is the volatile fields of one document: how two renders
// differ at each path where they differ, by the path's String.
type pathSet map[string]field

// field is how two renders differ at one path.
type field struct {
	// t is the template of the two values when both are strings (see
	// template), else nil.
	t *template
	// whole is true when the path is no leaf (see differ.addWhole).
	whole bool
	// values are the two values: two scalars, or for a whole path
	// anything (absent{} for a key or item that a render does not hold).
	values [2]any
}

// newPathSet returns the volatile fields that d found between two
// renders.
func newPathSet(d *differ) pathSet {
	s := make(pathSet, len(d.paths))
	for _, p := range d.paths {
		k := p.String()
		var f field
		if v, ok := d.pairs[k]; ok {
			f.t = newTemplate(v[0], v[1])
		}
		if v, ok := d.wholes[k]; ok {
			f.whole, f.values = true, v
		}
		if v, ok := d.scalars[k]; ok {
			f.values = v
		}
		s[k] = f
	}
	return s
}

// allows reports whether the set allows the difference at p between two
// other values, the previous and the new output as d found them: p must
// be a path of the set itself, never one under it, since what differed
// between the renders says nothing about the fields under it, and the
// difference must be of the kind the renders showed. A leaf of two
// scalars of one type (two numbers, two strings, two booleans) allows
// another two of that type, strings fitting its template; a leaf of two
// types (a string and null) and a whole difference (a key present in one
// only, another shape) allow only the values the two renders held. The
// reason says why not.
func (s pathSet) allows(p path, d *differ) (reason string, ok bool) {
	k := p.String()
	f, ok := s[k]
	if !ok {
		return "changed", false
	}
	w, whole := d.wholes[k]
	if !whole {
		w = d.scalars[k]
	}
	ft := reflect.TypeOf(f.values[0])
	switch {
	case f.whole != whole:
		return "changed", false
	case whole || ft != reflect.TypeOf(f.values[1]):
		for _, v := range w {
			if !reflect.DeepEqual(v, f.values[0]) && !reflect.DeepEqual(v, f.values[1]) {
				return "changed", false
			}
		}
	case reflect.TypeOf(w[0]) != ft || reflect.TypeOf(w[1]) != ft:
		return "changed", false
	case f.t != nil:
		// A string that two renders made partly alike: the previous
		// and the new value must agree where the renders did.
		pair, ok := d.pairs[k]
		if !ok || !f.t.fits(pair[0]) || !f.t.fits(pair[1]) {
			return "changed where two renders of the same input agree", false
		}
	}
	return "", true
}

// bare reports whether s can be written unquoted: letters, digits, "_"
// and "-", and "." too when dot is true.
func bare(s string, dot bool) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '_', r == '-':
		case r == '.' && dot:
		default:
			return false
		}
	}
	return true
}
