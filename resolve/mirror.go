package resolve

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/resolve/internal/hosts"
)

// mirror is where references to one registry may be asked instead: a
// registry host and an optional repository path prefix (a pull-through
// cache's project, say).
type mirror struct {
	host   string // host[:port]
	prefix string // "" or a path without leading or trailing slash
}

func (m mirror) String() string {
	if m.prefix == "" {
		return m.host
	}
	return m.host + "/" + m.prefix
}

// Mirror is a mirror as WithMirror was given it.
type Mirror struct {
	From, To string
}

// parseMirror validates a mirror for registry from and returns the
// hosts.Key of from: from is a registry host, to is
// host[:port][/path-prefix] without a scheme.
func parseMirror(from, to string) (string, mirror, error) {
	if from == "" || to == "" {
		return "", mirror{}, fmt.Errorf("mirror %q=%q: want FROM=TO, both non-empty", from, to)
	}
	if strings.Contains(from, "://") || strings.Contains(to, "://") {
		return "", mirror{}, fmt.Errorf("mirror %s=%s: give registry hosts without a scheme (plain HTTP is for the registries named insecure)", from, to)
	}
	reg, err := name.NewRegistry(strings.TrimSuffix(from, "/"), name.StrictValidation)
	if err != nil || strings.Contains(from, "/") {
		return "", mirror{}, fmt.Errorf("mirror %s=%s: FROM %q is not a registry host", from, to, from)
	}
	host, prefix, _ := strings.Cut(strings.Trim(to, "/"), "/")
	m := mirror{host: host, prefix: prefix}
	if _, err := name.NewRegistry(host, name.StrictValidation); err != nil {
		return "", mirror{}, fmt.Errorf("mirror %s=%s: TO host %q: %w", from, to, host, err)
	}
	// The prefix must make a valid repository path on its own.
	if _, err := name.NewRepository(m.String()+"/x", name.StrictValidation); err != nil {
		return "", mirror{}, fmt.Errorf("mirror %s=%s: TO path %q: %w", from, to, prefix, err)
	}
	return hosts.Key(reg.RegistryStr()), m, nil
}

// ref names ref on the mirror. The repository path is the normalised one,
// so Docker Hub's official images keep their library/ prefix, as Docker
// and containerd ask mirrors for them: docker.io/nginx:1 through
// mirror.example/hub is mirror.example/hub/library/nginx:1.
func (m mirror) ref(ref name.Reference, insecure bool) (name.Reference, error) {
	s := m.String() + "/" + ref.Context().RepositoryStr()
	switch r := ref.(type) {
	case name.Tag:
		s += ":" + r.TagStr()
	case name.Digest:
		s += "@" + r.DigestStr()
	}
	opts := []name.Option{name.StrictValidation}
	if insecure {
		opts = append(opts, name.Insecure)
	}
	return name.ParseReference(s, opts...)
}
