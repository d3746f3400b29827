// Package resolve turns image references into the digests their registries
// serve for them now.
//
// A Resolver asks each registry with a HEAD request for the manifest (which
// does not count against Docker Hub's pull limits), and falls back to GET
// only when HEAD gives no digest. Without a platform it returns the digest
// of what the tag names, the index of a multi-platform image included, so
// every node still pulls its own platform. Each distinct reference is asked
// for once, and one ping per registry is shared by every repository on it.
//
// The package never parses or writes YAML; see package renderer for that.
package resolve
