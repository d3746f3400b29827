package kindpath

import (
	"fmt"
	"strings"
	"unicode"
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

// Selector is a field written FIELD[KEY=VALUE]: the items of the
// sequence Field whose Key is Value, or with Key FlagKey the values of
// the flag Value in the sequence of strings Field.
type Selector struct {
	Field, Key, Value string
}

// FlagKey is the KEY of a selector that names a command line flag:
// args[flag=--image].
const FlagKey = "flag"

// IsFlag reports whether s selects a flag's value.
func (s Selector) IsFlag() bool { return s.Key == FlagKey }

// ParseSelector reads field f of a path as a selector; ok is false for a
// field that is not one (a plain key, "*"). It reads the fields of a
// parsed path; a field that no parser checked may read as a selector
// that the parsers refuse (an empty key, a flag without "-").
func ParseSelector(f string) (s Selector, ok bool) {
	open := strings.IndexByte(f, '[')
	if open <= 0 || !strings.HasSuffix(f, "]") {
		return Selector{}, false
	}
	key, value, ok := strings.Cut(f[open+1:len(f)-1], "=")
	if !ok {
		return Selector{}, false
	}
	return Selector{Field: f[:open], Key: key, Value: value}, true
}

// splitPath splits a field path at the dots outside brackets. Outside
// brackets a backslash makes the character after it part of the field
// name: "data.policy\\.yaml" is the fields "data" and "policy.yaml" (a
// ConfigMap's key); a backslash at the end of the path is itself.
func splitPath(path string) []string {
	var fields []string
	var b strings.Builder
	depth := 0
	for i := 0; i < len(path); i++ {
		switch c := path[i]; {
		case c == '\\' && depth == 0 && i+1 < len(path):
			i++
			b.WriteByte(path[i])
		case c == '.' && depth == 0:
			fields = append(fields, b.String())
			b.Reset()
		default:
			switch c {
			case '[':
				depth++
			case ']':
				depth--
			}
			b.WriteByte(c)
		}
	}
	return append(fields, b.String())
}

// escapeField writes field f as splitPath reads it back: a selector as
// it is, a name with a backslash before each ".", "|" and backslash.
func escapeField(f string) string {
	// A selector ("[name=A.B]") is written as it is: only the name
	// before it is escaped.
	name, sel := f, ""
	if i := strings.IndexByte(f, '['); i >= 0 {
		name, sel = f[:i], f[i:]
	}
	if !strings.ContainsAny(name, ".|\\") {
		return f
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '.' || c == '|' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(name[i])
	}
	return b.String() + sel
}

// joinPath formats fields as a path that splitPath reads back.
func joinPath(fields []string) string {
	escaped := make([]string, len(fields))
	for i, f := range fields {
		escaped[i] = escapeField(f)
	}
	return strings.Join(escaped, ".")
}

// cutEmbedded cuts an image path's fields at the first "|" outside
// brackets and not after a backslash: the path to a string, and the path
// in the document its text holds.
func cutEmbedded(path string) (outer, inner string, ok bool) {
	depth := 0
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case '\\':
			if depth == 0 {
				i++
			}
		case '[':
			depth++
		case ']':
			depth--
		case '|':
			if depth == 0 {
				return path[:i], path[i+1:], true
			}
		}
	}
	return path, "", false
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
	s, ok := ParseSelector(f)
	switch {
	case !ok || strings.Count(f, "[") != 1 || strings.Count(f, "]") != 1:
		return fmt.Errorf("malformed selector %q: want FIELD[KEY=VALUE], e.g. env[name=AGENT_IMAGE] or args[flag=--image]", f)
	case s.Field == "*" || strings.ContainsAny(s.Field, "*="):
		return fmt.Errorf("malformed selector %q: %q is not a field name", f, s.Field)
	case s.Key == "" || strings.ContainsAny(s.Key, ".*="):
		return fmt.Errorf("malformed selector %q: %q is not a key", f, s.Key)
	case s.Value == "":
		return fmt.Errorf("malformed selector %q: empty value", f)
	case s.IsFlag():
		return checkFlag(f, s.Value)
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
