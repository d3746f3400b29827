package steady

import (
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

// pathSet is a set of paths, by their String, each with the template of
// its two values where both are strings (see template), else nil.
type pathSet map[string]*template

// newPathSet returns the set of paths, with the templates of the string
// values that differ at them: a pair of values for each path's String,
// as differ collects them.
func newPathSet(paths []path, pairs map[string][2]string) pathSet {
	s := make(pathSet, len(paths))
	for _, p := range paths {
		k := p.String()
		var t *template
		if v, ok := pairs[k]; ok {
			t = newTemplate(v[0], v[1])
		}
		s[k] = t
	}
	return s
}

// covers reports whether the set holds p or one of its ancestors, in
// time linear in the length of p's String. When it holds p itself, not an
// ancestor, t is p's template (nil when p's values were not both strings).
func (s pathSet) covers(p path) (t *template, ok bool) {
	if _, ok := s["."]; ok {
		return nil, true
	}
	var b strings.Builder
	for i := range p {
		p.write(&b, i)
		if t, ok := s[b.String()]; ok {
			if i < len(p)-1 {
				t = nil // an ancestor: the whole subtree is volatile
			}
			return t, true
		}
	}
	return nil, false
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
