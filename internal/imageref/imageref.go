package imageref

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
)

// Check returns nil when image is a reference the kubelet accepts, e.g.
// "nginx", "registry.example:5000/shop/web:1.4@sha256:…". Otherwise its
// error gives the parser's reason and, where it can tell, the part at
// fault: `invalid reference format: the path component "a..b" is not …`.
func Check(image string) error {
	ref, err := reference.ParseNormalizedNamed(image)
	if err == nil && reference.Domain(ref) == "" {
		// The parser reads a first component that holds a "." but is no
		// host name ("a_b.c/x") as a path with no registry at all, a
		// name no runtime pulls the same way: the kubelet's would name
		// the registry "a_b.c", which is no host name.
		why := diagnose(image)
		if why == "" {
			why = "it names no registry"
		}
		return fmt.Errorf("%w: %s", reference.ErrReferenceInvalidFormat, why)
	}
	// The parser's bare "invalid reference format" says nothing of the
	// part at fault; its other errors do.
	if errors.Is(err, reference.ErrReferenceInvalidFormat) {
		if why := diagnose(image); why != "" {
			return fmt.Errorf("%w: %s", err, why)
		}
	}
	return err
}

// ValidTag reports whether tag is a tag by the grammar:
// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}. A name outside it would make the
// reference it is written into one that the kubelet refuses.
func ValidTag(tag string) bool {
	if tag == "" || len(tag) > maxTag || tag[0] == '.' || tag[0] == '-' {
		return false
	}
	for i := 0; i < len(tag); i++ {
		if c := tag[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// maxTag is the longest tag the grammar allows.
const maxTag = 128

// TagRule describes the tag grammar for messages.
const TagRule = `1 to 128 letters, digits, "_", "." and "-", not beginning with "." or "-"`

// The parts of a reference, anchored, as the grammar spells them: the
// registry host (a DNS name, an IPv4 address or a bracketed IPv6 address,
// with an optional port) and a path component.
var (
	hostRegexp      = regexp.MustCompile(`^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?$`)
	componentRegexp = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
)

// diagnose names the part of image that the grammar refuses, or returns
// "" when it cannot tell (then the parser's reason stands alone). It
// splits image as the parser does: a digest after "@", a tag after the
// last ":" that follows the last "/", and a registry host first when the
// first component holds a "." or a ":", is "localhost", or is not
// lowercase.
func diagnose(image string) string {
	name, dg, hasDigest := strings.Cut(image, "@")
	var tag string
	hasTag := false
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name, tag, hasTag = name[:i], name[i+1:], true
	}
	path := name
	if first, rest, ok := strings.Cut(name, "/"); ok && (first == "localhost" || strings.ContainsAny(first, ".:") || strings.ToLower(first) != first) {
		if !hostRegexp.MatchString(first) {
			return fmt.Sprintf("the registry %q is not a host name, an IPv4 address or an IPv6 address in brackets, with an optional :PORT", first)
		}
		path = rest
	}
	for _, c := range strings.Split(path, "/") {
		switch {
		case c == "":
			return `the name has an empty path component ("//", or a "/" first or last)`
		case !componentRegexp.MatchString(c):
			return fmt.Sprintf(`the path component %q is not lowercase letters and digits, separated by one ".", one or two "_", or dashes`, c)
		}
	}
	if hasTag && !ValidTag(tag) {
		return fmt.Sprintf("the tag %q is not %s", tag, TagRule)
	}
	if hasDigest {
		if _, err := digest.Parse(dg); err != nil {
			return fmt.Sprintf("the digest %q is not ALGORITHM:HEX (%v)", dg, err)
		}
	}
	return ""
}

// Name is what an image reference names, as the kubelet reads it.
type Name struct {
	// Repository is the registry host, in lower case, and the path, with
	// Docker Hub's defaults: "nginx" is docker.io/library/nginx.
	Repository string
	// Tag is the reference's tag; "latest" for a reference with neither
	// a tag nor a digest (the kubelet pulls that one), "" for a digest
	// alone.
	Tag string
	// Digest is the reference's digest, or "".
	Digest string
}

// Parse returns what image names: the kubelet's normalisation
// (ParseNormalizedNamed: docker.io and library/ for Docker Hub names,
// index.docker.io read as docker.io), the registry host in lower case (host
// names are not case-sensitive; digestpin's resolver compares them so),
// and the tag latest for a reference with neither a tag nor a digest. An
// image the kubelet refuses is Check's error.
func Parse(image string) (Name, error) {
	if err := Check(image); err != nil {
		return Name{}, err
	}
	ref, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return Name{}, err
	}
	n := Name{Repository: strings.ToLower(reference.Domain(ref)) + "/" + reference.Path(ref)}
	if t, ok := ref.(reference.Tagged); ok {
		n.Tag = t.Tag()
	}
	if d, ok := ref.(reference.Digested); ok {
		n.Digest = d.Digest().String()
	}
	if n.Tag == "" && n.Digest == "" {
		n.Tag = "latest"
	}
	return n, nil
}
