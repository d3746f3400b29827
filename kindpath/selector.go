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
