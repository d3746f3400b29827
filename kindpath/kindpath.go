package kindpath

import (
	"fmt"
	"regexp"
	"strings"
)

// parseKindPath parses "[GROUP/]KIND=FIELD.PATH", the form of every path
// flag (what names the flag's value in errors). The group is "*" when
// none is given.
func parseKindPath(what, s string) (group, kind string, fields []string, err error) {
	k, path, ok := strings.Cut(s, "=")
	if !ok || k == "" || path == "" {
		return "", "", nil, fmt.Errorf("parsing %s %q: want KIND=FIELD.PATH or GROUP/KIND=FIELD.PATH", what, s)
	}
	if group, kind, err = parseKind(what, s, k); err != nil {
		return "", "", nil, err
	}
	fields = splitPath(path)
	for i, f := range fields {
		if err := checkField(f); err != nil {
			return "", "", nil, fmt.Errorf("parsing %s %q: %w in %q", what, s, err, path)
		}
		// A flag's value is a string, not a mapping to go on from: only
		// an image path may end in one.
		if sel, ok := ParseSelector(f); ok && sel.IsFlag() && (what != "image path" || i < len(fields)-1) {
			return "", "", nil, fmt.Errorf("parsing %s %q: %s selects a flag's value, which only an image path may end in", what, s, f)
		}
	}
	return group, kind, fields, nil
}

// parseKind parses the "[GROUP/]KIND" part k of path s.
func parseKind(what, s, k string) (group, kind string, err error) {
	group, kind = "*", k
	if g, kk, ok := strings.Cut(k, "/"); ok {
		group, kind = g, kk
	}
	if kind == "" || strings.Contains(kind, "/") {
		return "", "", fmt.Errorf("parsing %s %q: bad kind %q", what, s, k)
	}
	// "v1/Pod" reads as the group "v1", which no object has: the path
	// would match nothing, and its images would go unpinned.
	if apiVersionLike.MatchString(group) {
		return "", "", fmt.Errorf("parsing %s %q: %q is an API version, not a group: write %s=… for the kind in any group, or /%s=… for the core group", what, s, group, kind, kind)
	}
	return group, kind, nil
}

// apiVersionLike matches a Kubernetes API version: "v1", "v2beta1".
var apiVersionLike = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]*)?$`)

// FormatKind formats an API group and kind as a path spells them:
// "Worker" for group "*" (any group), "example.com/Worker", and "/Pod"
// for the core group "".
func FormatKind(group, kind string) string {
	if group != "*" {
		return group + "/" + kind
	}
	return kind
}

// kindPath formats a path of group and kind as the flags take it.
func kindPath(group, kind string, fields []string) string {
	return FormatKind(group, kind) + "=" + joinPath(fields)
}

// matchesKind reports whether a path declared for group and kind (group
// "*": any) applies to an object of objGroup and objKind.
func matchesKind(group, kind, objGroup, objKind string) bool {
	return kind == objKind && (group == "*" || group == objGroup)
}
