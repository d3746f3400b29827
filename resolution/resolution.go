// Package resolution is the vocabulary shared by the code that needs image
// digests (the renderer) and the code that supplies them (the registry, the
// resolution cache and the lock file): a Resolution is a digest and where it
// came from, and a Resolver turns a reference into one.
//
// It depends on go-containerregistry's name and v1 packages only, so that
// the renderer can name a Resolver without importing a registry client, and
// the registry client can implement one without importing YAML.
package resolution

import (
	"context"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Source says where a digest came from. It is written into the --report
// file, so its values are part of digestpin's output format.
type Source string

// The sources of a digest.
const (
	// Registry is a digest the registry (or one of its mirrors) was asked
	// for during the run.
	Registry Source = "registry"
	// Cache is a digest from the resolution cache.
	Cache Source = "cache"
	// Lock is a digest from the lock file.
	Lock Source = "lock"
	// Pinned is a digest the manifest carried already; nobody was asked.
	Pinned Source = "pinned"
	// Unresolved is an image that could not be resolved and was kept as
	// it is (--on-error=keep).
	Unresolved Source = "unresolved"
	// Stale is the last digest the cache recorded, past its freshness,
	// standing in for a registry that could not answer
	// (--stale-if-error).
	Stale Source = "stale"
	// Held is the digest pinned before a newer one that the registry
	// serves now, which a waiting period (--min-age) holds back until it
	// has been seen for long enough.
	Held Source = "held"
)

// Resolution is the digest a reference resolved to, and where it came
// from.
type Resolution struct {
	Digest v1.Hash
	Source Source
	// Tag is the tag a tag policy chose, whose digest Digest is; "" when
	// the reference's own tag was resolved.
	Tag string
	// Mirror is the registry host of the mirror that answered instead of
	// the reference's own registry, with Source Registry; "" when the
	// registry itself answered, and for every other Source.
	Mirror string
	// MediaType is what Digest is, as the registry said: an index (a
	// multi-platform image) or a single image's manifest; "" when not
	// known (a digest the manifest carried, an answer recorded before it
	// was kept).
	MediaType string
}

// ManifestMediaType reports whether mt is the media type of an image
// manifest or index, OCI's or Docker's: what a tag names, and what a
// Resolution's MediaType may be.
func ManifestMediaType(mt string) bool {
	switch types.MediaType(mt) {
	case types.OCIImageIndex, types.OCIManifestSchema1, types.DockerManifestList, types.DockerManifestSchema2:
		return true
	}
	return false
}

// Resolver turns an image reference into the digest it resolves to now,
// and says where that digest came from. The renderer calls Resolve
// concurrently, once for each distinct reference without a digest, so
// implementations must be safe for concurrent use and should bound their
// own concurrency. An error names the reference (as os.Open names its
// file): callers add only where the image is used.
type Resolver interface {
	Resolve(ctx context.Context, ref name.Reference) (Resolution, error)
}

// Func adapts a function to a Resolver.
type Func func(ctx context.Context, ref name.Reference) (Resolution, error)

// Resolve calls f.
func (f Func) Resolve(ctx context.Context, ref name.Reference) (Resolution, error) {
	return f(ctx, ref)
}

var _ Resolver = Func(nil)

// OptionNames is how messages name an option that would change what they
// report, such as the option that allows plain HTTP in the error of a
// request that needed it. The option is given by its Go name: a field
// ("Frozen", "ImagePaths") or an option function ("WithCAFiles"). A
// command names its flags ("--frozen"), so that library messages say
// what its user would type; nil names each option by its Go name.
type OptionNames func(option string) string

// optionNamesKey is the context key of the OptionNames.
type optionNamesKey struct{}

// WithOptionNames returns a copy of ctx that carries names: the messages
// of the libraries called with it (the renderer, the registry resolver,
// package pin) name each option as names does. It is how a command maps
// the libraries' options to its flags, once, where it calls them.
func WithOptionNames(ctx context.Context, names OptionNames) context.Context {
	return context.WithValue(ctx, optionNamesKey{}, names)
}

// OptionName returns the name of option in messages made under ctx: as
// the OptionNames ctx carries (WithOptionNames) name it, or option itself
// when ctx carries none.
func OptionName(ctx context.Context, option string) string {
	if names, _ := ctx.Value(optionNamesKey{}).(OptionNames); names != nil {
		return names(option)
	}
	return option
}
