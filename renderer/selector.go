package renderer

import (
	"fmt"
	"strings"
	"unicode"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// A field of a path may select items instead of naming a key:
//
//   - FIELD[KEY=VALUE] steps into the items of the sequence FIELD that
//     are mappings whose KEY is the string VALUE: env[name=AGENT_IMAGE],
//     containers[name=manager];
//   - FIELD[flag=NAME], as the last field of an image path, is the value
//     of flag NAME in the sequence of strings FIELD: the rest of an item
//     "NAME=IMAGE", or the item after an item "NAME" (the two forms a
//     command line takes): args[flag=--prometheus-config-reloader].
//
// Both match nothing where FIELD is not a sequence. Dots inside the
// brackets do not split the path.

// selector is a field written FIELD[KEY=VALUE].
type selector struct {
	field, key, value string
}

// flagKey is the KEY of a selector that names a command line flag.
const flagKey = "flag"

// isFlag reports whether s selects a flag's value.
func (s selector) isFlag() bool { return s.key == flagKey }

// parseSelector reads field f as a selector; ok is false for a field
// that is not one (a plain key, "*"). checkField has checked f.
func parseSelector(f string) (s selector, ok bool) {
	open := strings.IndexByte(f, '[')
	if open <= 0 || !strings.HasSuffix(f, "]") {
		return selector{}, false
	}
	key, value, ok := strings.Cut(f[open+1:len(f)-1], "=")
	if !ok {
		return selector{}, false
	}
	return selector{field: f[:open], key: key, value: value}, true
}

// splitPath splits a field path at the dots outside brackets.
func splitPath(path string) []string {
	var fields []string
	depth, start := 0, 0
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case '[':
			depth++
		case ']':
			depth--
		case '.':
			if depth == 0 {
				fields = append(fields, path[start:i])
				start = i + 1
			}
		}
	}
	return append(fields, path[start:])
}

// checkField says what is wrong with field f of a path, or returns nil:
// a bracket that is not a whole selector, an empty part, a flag that no
// argument can be.
func checkField(f string) error {
	if !strings.ContainsAny(f, "[]") {
		if f == "" {
			return fmt.Errorf("empty field")
		}
		return nil
	}
	s, ok := parseSelector(f)
	switch {
	case !ok || strings.Count(f, "[") != 1 || strings.Count(f, "]") != 1:
		return fmt.Errorf("malformed selector %q: want FIELD[KEY=VALUE], e.g. env[name=AGENT_IMAGE] or args[flag=--image]", f)
	case s.field == "*" || strings.ContainsAny(s.field, "*="):
		return fmt.Errorf("malformed selector %q: %q is not a field name", f, s.field)
	case s.key == "" || strings.ContainsAny(s.key, ".*="):
		return fmt.Errorf("malformed selector %q: %q is not a key", f, s.key)
	case s.value == "":
		return fmt.Errorf("malformed selector %q: empty value", f)
	case s.isFlag():
		return checkFlag(f, s.value)
	}
	return nil
}

// checkFlag refuses a flag name that no command line argument can be
// the flag of.
func checkFlag(f, flag string) error {
	name := strings.TrimLeft(flag, "-")
	switch {
	case !strings.HasPrefix(flag, "-"):
		return fmt.Errorf("the flag %q of %s matches no argument: a flag starts with \"-\" (args[flag=--%s])", flag, f, flag)
	case name == "" || len(flag)-len(name) > 2:
		return fmt.Errorf("the flag %q of %s matches no argument: want -NAME or --NAME", flag, f)
	case strings.ContainsFunc(flag, func(r rune) bool { return r == '=' || unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Errorf("the flag %q of %s matches no argument: a flag name holds no \"=\" or blank (the value follows it)", flag, f)
	}
	return nil
}

// hasSelector reports whether one of fields is a selector.
func hasSelector(fields []string) bool {
	for _, f := range fields {
		if _, ok := parseSelector(f); ok {
			return true
		}
	}
	return false
}

// selectItems returns the items (as written) of the sequence s.field of
// mapping n that are mappings whose s.key is the string s.value, and the
// nodes passed on the way to them (see entry.via). A key that get
// refuses (given twice, say) is an error: the API server could read
// another item as the one selected.
func selectItems(n *yaml.Node, s selector) (items, via []*yaml.Node, err error) {
	list, err := get(n, s.field)
	if err != nil || list.value == nil || list.value.Kind != yaml.SequenceNode {
		return nil, nil, err
	}
	for _, item := range list.value.Content {
		k, err := get(item, s.key)
		if err != nil {
			return nil, nil, err
		}
		v := k.value
		if v == nil || v.Kind != yaml.ScalarNode || decodedKey(v) != s.value {
			continue
		}
		// The API server reads "!!binary …" as its bytes: digestpin
		// would select by a spelling that another reader may not.
		if v.Tag != "!!str" {
			return nil, nil, &keyError{v.Line, fmt.Sprintf("%s[%s=%s]: the %s is spelt %s %s; write it as a string", s.field, s.key, s.value, s.key, v.Tag, v.Value)}
		}
		items = append(items, item)
	}
	return items, list.via, nil
}

// pathSelector is the selector of an ImagePath's first field, parsed
// once a Render; ok is false for a first field that is not one.
type pathSelector struct {
	sel selector
	ok  bool
}

// selectorsOf parses the first field of each of paths.
func selectorsOf(paths []ImagePath) []pathSelector {
	out := make([]pathSelector, len(paths))
	for i, p := range paths {
		out[i].sel, out[i].ok = parseSelector(p.Fields[0])
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
func containerPathsFor(c *yaml.Node, paths []ImagePath, sels []pathSelector) []ImagePath {
	c = deref(c)
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
				return deref(c.Content[i+1])
			}
		}
		return nil
	}
	var out []ImagePath
	// The paths come grouped by their first field (args, env): each
	// field is looked up once a group.
	var field string // "" until the first lookup
	var items *yaml.Node
	for i, p := range paths {
		sel, ok := sels[i].sel, sels[i].ok
		if ok && sel.field != field {
			field, items = sel.field, list(sel.field)
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
func mayMatch(list *yaml.Node, s selector) bool {
	if list == nil || list.Kind != yaml.SequenceNode {
		return false
	}
	for _, item := range list.Content {
		item = deref(item)
		switch {
		case s.isFlag() && item.Kind == yaml.ScalarNode:
			if v, ok := strings.CutPrefix(item.Value, s.value); ok && (v == "" || v[0] == '=') {
				return true
			}
		case !s.isFlag() && item.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(item.Content); i += 2 {
				k, v := item.Content[i], deref(item.Content[i+1])
				if k.Kind != yaml.ScalarNode || k.Tag != "!!str" || (k.Value == s.key && (v.Kind != yaml.ScalarNode || v.Tag != "!!str" || v.Value == s.value)) {
					return true
				}
			}
		}
	}
	return false
}
