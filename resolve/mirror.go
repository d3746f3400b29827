package resolve

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/digestpin/digestpin/resolution"
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

// MirrorOnly reports whether the Resolver never asks a registry that has
// mirrors (WithMirrorOnly).
func (r *Resolver) MirrorOnly() bool { return r.o.mirrorOnly }

// Holds checks that a mirror holds digest d when the Resolver is
// mirror-only and d's registry has mirrors: what a lock file pins is then
// pulled through a mirror, which must have it. It asks each mirror by
// digest (a HEAD) in turn until one has it, and returns false, asking
// nothing, when there is nothing to check.
func (r *Resolver) Holds(ctx context.Context, d name.Digest) (checked bool, err error) {
	ms := r.o.mirrors[hosts.Key(d.Context().RegistryStr())]
	if !r.o.mirrorOnly || len(ms) == 0 {
		return false, nil
	}
	found, err := r.askFound(ctx, d, func(ctx context.Context, p *remote.Puller, at name.Reference) error {
		_, err := p.Head(ctx, at)
		if isNotFound(err) {
			return errNothing
		}
		return err
	})
	switch {
	case err != nil:
		return true, fmt.Errorf("checking that a mirror holds it: %w", err)
	case !found:
		names := make([]string, len(ms))
		for i, m := range ms {
			names[i] = m.String()
		}
		return true, fmt.Errorf("%s: no mirror holds this digest (%s answered 404), and %s asks no other registry", d, strings.Join(names, ", "), resolution.OptionName(ctx, "WithMirrorOnly"))
	}
	return true, nil
}
