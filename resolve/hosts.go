package resolve

import "strings"

// hostKey is the registry host h as the registry's own rules read it,
// for telling whether two spellings name one registry: a host name in any
// case (DNS ignores it), with or without HTTPS's default port 443, and
// Docker Hub by any of its names (docker.io, index.docker.io and
// registry-1.docker.io, as normaliseHost reads a docker config key). It
// is the key of every table of hosts a Resolver keeps: mirrors, insecure
// registries. go-containerregistry rewrites only "docker.io" itself, and
// keeps every other spelling as written.
func hostKey(h string) string {
	// Until nothing changes: docker.io:443 is Docker Hub too, and a key
	// is its own key (":443:443" is not ":443").
	k := normaliseHost(h)
	for {
		next := normaliseHost(strings.TrimSuffix(k, ":443"))
		if next == k {
			return k
		}
		k = next
	}
}
