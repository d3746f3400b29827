package renderer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/yaml"
	syaml "sigs.k8s.io/yaml"
)

// keyError is a key that digestpin and the API server's decoder could read
// differently. line is the body line of the node at fault.
type keyError struct {
	line int
	msg  string
}

func (e *keyError) Error() string { return e.msg }

// keyError turns an error of get into a document error: where, then who
// (an object or a container, when known), then what.
func (e *editor) keyError(err error, who string) error {
	var ke *keyError
	if !errors.As(err, &ke) {
		return err
	}
	if who == "" {
		return fmt.Errorf("%s: %w", e.d.at(ke.line), err)
	}
	return fmt.Errorf("%s: %s: %w", e.d.at(ke.line), who, err)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError rewrites a parser error to name the stream line.
func yamlError(d *document, err error) error {
	body := d.body()
	// JSON has escapes that YAML has not: name the first, which the
	// parser names without its line when the object is on one line.
	if start := jsonStart(body); start >= 0 {
		if line, esc, ok := yamlOnlyEscape(body, start); ok {
			return fmt.Errorf("%s: the JSON escape %s, which YAML decoders (the API server's sigs.k8s.io/yaml too) refuse; write the character itself", d.at(line), esc)
		}
	}
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return fmt.Errorf("%s: malformed YAML: %s", d.at(n), m[2])
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
			return fmt.Errorf("%s: malformed YAML: %s", d.at(n), bad)
		}
		at += size
	}
	return fmt.Errorf("%s: malformed YAML: %s", d.where(), strings.TrimPrefix(err.Error(), "yaml: "))
}

// kindName names a node's kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		return "a scalar"
	}
	return "a mapping"
}

// describe names what an image field holds, for messages.
func describe(n *yaml.Node) string {
	switch {
	case n.Kind != yaml.ScalarNode:
		return kindName(n)
	case n.Tag == "!!null" || strings.TrimSpace(n.Value) == "":
		return "empty"
	case strings.ContainsFunc(n.Value, unicode.IsControl):
		return fmt.Sprintf("%s %q", strings.TrimPrefix(n.Tag, "!!"), n.Value)
	}
	return fmt.Sprintf("%s %s", strings.TrimPrefix(n.Tag, "!!"), n.Value)
}

// yaml11Reading returns what the API server reads for the plain scalar
// n when it is not the string digestpin reads, and false otherwise. The
// API server reads YAML 1.1 (sigs.k8s.io/yaml), where a plain y, yes, on,
// n, no or off is a boolean; digestpin's parser
// reads YAML 1.2, where they are strings. A scalar with "/", ":" or "@" is
// never one of them, and is not looked at again.
func yaml11Reading(n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" || n.Style != 0 || strings.ContainsAny(n.Value, "/:@") {
		return "", false
	}
	j, err := syaml.YAMLToJSON([]byte("v: " + n.Value))
	if err != nil {
		return "", false
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return "", false
	}
	switch v := m["v"].(type) {
	case string:
		return "", false
	case bool:
		return fmt.Sprintf("the boolean %t", v), true
	case nil:
		return "null", true
	default:
		return fmt.Sprintf("the number %v", v), true
	}
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
