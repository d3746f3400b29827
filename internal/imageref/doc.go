// Package imageref checks image references against the grammar Kubernetes
// reads them with: the distribution spec's, as github.com/distribution/reference
// implements it. The kubelet parses every image with that package
// (ParseNormalizedNamed) and refuses to pull one it cannot parse
// (InvalidImageName). go-containerregistry's name package, which digestpin
// resolves with, accepts more ("...", "a..b", "-foo", "foo//bar", "_foo",
// a tag "-bad", a host with "'"): digestpin checks each reference here
// first, so that it never asks a registry about, or pins, an image that no
// node can pull.
package imageref
