package stream

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// KeyError is a key that digestpin and the API server's decoder could read
// differently: Get, Str and Values return it. Line is the body line of
// the node at fault; Msg says what is wrong, without where.
type KeyError struct {
	Line int
	Msg  string
}

func (e *KeyError) Error() string { return e.Msg }

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError rewrites a parser error to name the stream line.
func yamlError(d *Document, err error) error {
	body := d.Body()
	// JSON has escapes that YAML has not: name the first, which the
	// parser names without its line when the object is on one line.
	if start := JSONStart(body); start >= 0 {
		if line, esc, ok := yamlOnlyEscape(body, start); ok {
			return fmt.Errorf("%s: the JSON escape %s, which YAML decoders (the API server's sigs.k8s.io/yaml too) refuse; write the character itself", d.At(line), esc)
		}
	}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return fmt.Errorf("%s: malformed YAML: %s", d.At(n), m[2])
	}
	// The parser names no line for bytes that are not UTF-8 or control
	// characters: find the first.
	for at := 0; at < len(body); {
		r, size := utf8.DecodeRune(body[at:])
		bad := ""
		switch {
		case r == utf8.RuneError && size <= 1:
			bad = fmt.Sprintf("byte 0x%02x is not UTF-8 (digestpin reads UTF-8 only)", body[at])
		case unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' && r != '\u0085':
			bad = fmt.Sprintf("control character %U is not allowed", r)
		}
		if bad != "" {
			n := bytes.Count(body[:at], []byte("\n")) + 1
			return fmt.Errorf("%s: malformed YAML: %s", d.At(n), bad)
		}
		at += size
	}
	return fmt.Errorf("%s: malformed YAML: %s", d.Where(), strings.TrimPrefix(err.Error(), "yaml: "))
}

// KindName names a node's kind for messages.
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		return "a scalar"
	}
	return "a mapping"
}

// Describe names what an image field holds, for messages.
func Describe(n *yaml.Node) string {
	switch {
	case n.Kind != yaml.ScalarNode:
		return KindName(n)
	case n.Tag == "!!null" || strings.TrimSpace(n.Value) == "":
		return "empty"
	case strings.ContainsFunc(n.Value, unicode.IsControl):
		return fmt.Sprintf("%s %q", strings.TrimPrefix(n.Tag, "!!"), n.Value)
	}
	return fmt.Sprintf("%s %s", strings.TrimPrefix(n.Tag, "!!"), n.Value)
}

// yamlOnlyEscape finds the first escape in the strings of the JSON
// object at body[start:] that YAML does not have: "\/", and "\uD800" to
// "\uDFFF" (UTF-16 surrogates, which JSON pairs to write a character
// beyond U+FFFF). It returns the escape's body line and the escape as
// written.
func yamlOnlyEscape(body []byte, start int) (line int, esc string, ok bool) {
	line = 1 + bytes.Count(body[:start], []byte("\n"))
	in := false
	for i := start; i < len(body); i++ {
		switch c := body[i]; {
		case c == '\n':
			line++
		case c == '"':
			in = !in
		case c == '\\' && in && i+1 < len(body):
			switch next := body[i+1]; {
			case next == '/':
				return line, `\/`, true
			case next == 'u' && i+6 <= len(body):
				if r, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16); err == nil && r >= 0xd800 && r <= 0xdfff {
					return line, string(body[i : i+6]), true
				}
			}
			i++ // the escaped character: \" does not end the string
		}
	}
	return 0, "", false
}
