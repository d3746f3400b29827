// Package hosts reads registry hosts as the registries' own rules read
// them, so that two spellings of one registry are one: the key of every
// table of hosts the resolver keeps (mirrors, insecure registries), and
// the host a docker config key or a pull secret's key stands for.
package hosts

import (
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Key is the registry host h as the registry's own rules read it,
// for telling whether two spellings name one registry: a host name in any
// case (DNS ignores it), with or without HTTPS's default port 443, and
// Docker Hub by any of its names (docker.io, index.docker.io and
// registry-1.docker.io, as Normalise reads a docker config key). It
// is the key of every table of hosts a Resolver keeps: mirrors, insecure
// registries. go-containerregistry rewrites only "docker.io" itself, and
// keeps every other spelling as written.
func Key(h string) string {
	// Until nothing changes: docker.io:443 is Docker Hub too, and a key
	// is its own key (":443:443" is not ":443").
	k := Normalise(h)
	for {
		next := Normalise(strings.TrimSuffix(k, ":443"))
		if next == k {
			return k
		}
		k = next
	}
}

// Normalise turns a docker config key into the registry host it
// stands for: no scheme, no path, Docker Hub's aliases as one.
func Normalise(key string) string {
	key = strings.TrimSpace(strings.ToLower(key))
	if _, rest, ok := strings.Cut(key, "://"); ok {
		key = rest
	}
	key, _, _ = strings.Cut(key, "/")
	switch key {
	case "docker.io", "registry-1.docker.io", "index.docker.io":
		return name.DefaultRegistry
	}
	return key
}
