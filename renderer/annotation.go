package renderer

import (
	"fmt"
	"regexp"
	"strings"
)

// Limits of a qualified name, the form of an annotation key: an optional
// DNS subdomain prefix and "/", then a name.
const (
	maxNamePart   = 63
	maxPrefixPart = 253
)

var (
	namePart   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$`)
	prefixPart = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// CheckAnnotationName returns an error unless the API server takes name as
// an annotation key: a qualified name ([PREFIX/]NAME; NAME at most 63
// characters of letters, digits, '-', '_' and '.', beginning and ending
// with a letter or digit; PREFIX a DNS subdomain of at most 253
// characters), in any case, since the API server lowers the case of an
// annotation key before it checks it (apimachinery's ValidateAnnotations).
// A checksum under a name it refuses would fail the apply, not the render.
func CheckAnnotationName(name string) error {
	lower := strings.ToLower(name)
	prefix, part, hasPrefix := strings.Cut(lower, "/")
	if !hasPrefix {
		prefix, part = "", lower
	}
	switch {
	case strings.Contains(part, "/"):
		return fmt.Errorf("annotation name %q: at most one '/', between a DNS subdomain prefix and the name, e.g. example.com/images", name)
	case hasPrefix && prefix == "":
		return fmt.Errorf("annotation name %q: the prefix before '/' is empty", name)
	case len(prefix) > maxPrefixPart:
		return fmt.Errorf("annotation name %q: the prefix has %d characters, more than %d", name, len(prefix), maxPrefixPart)
	case prefix != "" && !prefixPart.MatchString(prefix):
		written, _, _ := strings.Cut(name, "/") // lowering may change the length
		return fmt.Errorf("annotation name %q: the prefix %q is not a DNS subdomain (letters, digits, '-' and '.', each part beginning and ending with a letter or digit)", name, written)
	case part == "":
		return fmt.Errorf("annotation name %q: the name is empty", name)
	case len(part) > maxNamePart:
		return fmt.Errorf("annotation name %q: the name after the prefix has %d characters, more than %d", name, len(part), maxNamePart)
	case !namePart.MatchString(part):
		return fmt.Errorf("annotation name %q: the name may hold letters, digits, '-', '_' and '.' only, and must begin and end with a letter or digit", name)
	}
	return nil
}
