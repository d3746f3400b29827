// Package renderer rewrites a stream of Kubernetes manifests so that every
// container image in a pod template is pinned to a digest, and each pod
// template carries a checksum annotation of its pinned images.
//
// The renderer works on a multi-document YAML stream as Helm, kustomize or
// kubectl write it. It never talks to a registry itself: digests come from a
// Resolver supplied by the caller. It works in three phases: it splits the
// stream into documents and collects every image reference (validating them
// before any network call), then resolves the distinct references
// concurrently, then rewrites the documents one at a time. A document with
// nothing to change is written back as the exact bytes it was read from.
package renderer
