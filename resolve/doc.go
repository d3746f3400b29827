// Package resolve turns image references into the digests their registries
// serve for them now, and never touches YAML; it keys, encodes and ages
// the entries of the resolution cache, which a Cache (Get, Put, Claim)
// stores as bytes.
//
// A Resolver asks each registry with a HEAD request for the manifest (which
// does not count against Docker Hub's pull limits), and falls back to GET
// only when HEAD gives no digest. Without a platform it returns the digest
// of what the tag names, the index of a multi-platform image included, so
// every node still pulls its own platform. Each distinct reference is asked
// for once, concurrently with the others up to a bound.
//
// Registry access is shared per registry: one ping, one credential lookup
// (the keychain of package credentials: docker config, credential
// helpers, pull secrets), and one
// bearer token for all the repositories being resolved at the time; a
// repository the token server refuses fails alone. Mirrors are asked
// before the registry itself. Transient failures (429, 5xx, reset
// connections, TLS handshake timeouts) are retried with exponential
// backoff and jitter, honouring Retry-After; each request is bounded by a
// timeout and gives up at its 10th redirect. A registry that runs into the
// timeout, or fails as a whole (ping, connection, TLS, refused
// credentials), is not asked again in the same run: its other references
// fail at once with the first cause. TLS is always verified except for the
// hosts named insecure, and plain HTTP is used only for those and
// loopback. A token realm or redirect to another host is refused when
// that host's addresses are loopback, private, link-local or unspecified
// and the registry's are not.
//
// Besides digests, a Resolver reads what a digest's registry says about
// it, through the same sessions: when it was built (Built), its manifest,
// blobs and referrers (for signature verification).
//
// A CachingResolver keeps resolutions between runs in a Cache, keyed by
// the reference and Resolver.CacheKey: the mode of resolution, the mirrors
// and whose credentials are asked. A Cache is a byte store (Get, Put,
// Claim): this package builds its keys, encodes its entries and checks
// their age; DirCache is one in a folder. An entry past its TTL is no
// answer, but CachingResolver.Last still tells what it recorded.
//
// Tag policies (package tagpolicy: semver, latest, name, digest) choose
// the tag an image follows: its PolicyResolver lists each repository with
// a policy once through Resolver.Tags (every page), chooses, and resolves
// the chosen tag; its choices share the Cache.
//
// Errors are one line naming the image, each registry or mirror asked, its
// answer and the attempts made. Credentials never appear in errors or logs.
//
// The package is layered as go-containerregistry's remote over transport
// over authn: package resolve (the Resolver, its sessions, cache, mirrors
// and errors) over resolve/transport (the HTTP layer: address checks,
// TLS, retries, timeouts, the ping), which knows no credentials, and
// resolve/credentials (the keychains), which knows no requests.
// resolve/tagpolicy sits above the Resolver and imports neither.
//
// The package never parses or writes YAML; see package renderer for that.
package resolve
