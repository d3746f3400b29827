package kindpath

import "strings"

// Checksum says where an object of one kind gets the checksum of the
// image fields that its image paths (Image) find: in the
// metadata.annotations of each mapping that Fields lead to (created when
// missing, as in a pod template), covering the image fields inside that
// mapping, i.e. those of the image paths whose fields start with Fields.
// Fields may be empty: the object itself. An image path that two
// checksum paths cover belongs to the longer. Without a Checksum a
// kind's image fields get no checksum.
type Checksum struct {
	// Group is the API group of the kind, or "*" for any group.
	Group string
	// Kind is the object kind.
	Kind string
	// Fields lead from the object's root to the mapping that gets the
	// annotation.
	Fields []string
}

// String formats p as the --checksum-path flag takes it: "." for the
// object itself.
func (p Checksum) String() string {
	if len(p.Fields) == 0 {
		return FormatKind(p.Group, p.Kind) + "=."
	}
	return kindPath(p.Group, p.Kind, p.Fields)
}

// Matches reports whether p applies to an object of API group group ("" for
// the core group) and kind kind.
func (p Checksum) Matches(group, kind string) bool {
	return matchesKind(p.Group, p.Kind, group, kind)
}

// ParseChecksum parses "[GROUP/]KIND=FIELD.PATH", e.g.
// "example.com/Runner=spec.runTemplate", or "[GROUP/]KIND=." for the
// object's own metadata.
func ParseChecksum(s string) (Checksum, error) {
	if k, ok := strings.CutSuffix(s, "=."); ok {
		group, kind, err := parseKind("checksum path", s, k)
		return Checksum{Group: group, Kind: kind}, err
	}
	group, kind, fields, err := parseKindPath("checksum path", s)
	if err != nil {
		return Checksum{}, err
	}
	return Checksum{Group: group, Kind: kind, Fields: fields}, nil
}
