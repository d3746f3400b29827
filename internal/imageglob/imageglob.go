// Package imageglob matches image repositories against the globs that
// digestpin's per-image settings take (--verify's signature policies,
// --min-age's waiting periods): by the repository's fully qualified name,
// with Docker Hub's spellings as one, "*" within one path segment and "**"
// across segments.
package imageglob

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Glob is a compiled image glob. The zero value matches nothing.
type Glob struct {
	text string
	re   *regexp.Regexp
}

// Compile compiles glob. It matches a repository by its fully qualified
// name (index.docker.io/library/nginx; docker.io/, index.docker.io/ and no
// registry at all for Docker Hub images, library/ for its official ones,
// are one); a glob whose first segment has a wildcard is matched as
// written, so "**" is every image. "*" matches within one path segment,
// "**" across segments, and nothing else is special. A glob names a
// repository: a tag, a digest or a space in it is an error.
func Compile(glob string) (Glob, error) {
	_, path, slash := strings.Cut(glob, "/")
	if !slash {
		// "nginx:1.27": no registry, so the colon is a tag's.
		path = glob
	}
	if glob == "" {
		return Glob{}, fmt.Errorf("empty image glob: want a repository, e.g. ghcr.io/acme/** or nginx")
	}
	if strings.ContainsAny(glob, "@ \t") || strings.Contains(path, ":") {
		return Glob{}, fmt.Errorf("glob %q: a repository has no tag, digest or space", glob)
	}
	norm := normalise(glob)
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(norm); {
		switch {
		case strings.HasPrefix(norm[i:], "**"):
			b.WriteString(".*")
			i += 2
		case norm[i] == '*':
			b.WriteString("[^/]*")
			i++
		default:
			b.WriteString(regexp.QuoteMeta(norm[i : i+1]))
			i++
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return Glob{}, fmt.Errorf("glob %q: %w", glob, err)
	}
	return Glob{text: glob, re: re}, nil
}

// normalise writes a glob's registry as name.Repository.Name does:
// Docker Hub as index.docker.io, its official images under library/.
func normalise(glob string) string {
	first, rest, ok := strings.Cut(glob, "/")
	isHost := ok && (strings.ContainsAny(first, ".:") || first == "localhost")
	switch {
	case strings.Contains(first, "*"):
		// "**", "*/app", "*.example/app": a wildcard registry, matched
		// against full names as written.
		return glob
	case !ok:
		// "nginx", "*": an official image of Docker Hub.
		return name.DefaultRegistry + "/library/" + glob
	case first == "docker.io" || first == "index.docker.io":
		if !strings.Contains(rest, "/") && !strings.HasPrefix(rest, "**") {
			return name.DefaultRegistry + "/library/" + rest
		}
		return name.DefaultRegistry + "/" + rest
	case !isHost:
		return name.DefaultRegistry + "/" + glob
	}
	return glob
}

// Match reports whether g matches repo.
func (g Glob) Match(repo name.Repository) bool {
	return g.re != nil && g.re.MatchString(repo.Name())
}

// String returns the glob as written.
func (g Glob) String() string { return g.text }

// Same reports whether g and o match the same repositories by the same
// pattern: two spellings of one glob ("nginx", "docker.io/library/nginx").
func (g Glob) Same(o Glob) bool {
	return g.re != nil && o.re != nil && g.re.String() == o.re.String()
}

// MoreSpecific reports whether g is more specific than o, of two globs
// that match one repository: the longer, as written. A zero o is less
// specific than any glob.
func (g Glob) MoreSpecific(o Glob) bool {
	return o.re == nil || len(g.text) > len(o.text)
}
