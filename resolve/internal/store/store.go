// Package store is the contract of the resolver's cache, shared by the
// resolutions (package resolve) and the tag choices (package
// resolve/tagpolicy), neither of which imports the other: a Cache is a
// byte store; each of them builds its own keys, encodes its entries and
// checks their age. Package resolve names these types (resolve.Cache,
// resolve.EntryRead, resolve.ErrCacheEntryExpired, resolve.CacheKeyFunc)
// for everyone else.
package store

import (
	"context"
	"errors"

	"github.com/google/go-containerregistry/pkg/name"
)

// Cache is where resolutions and tag choices are kept between runs: a
// store of small byte entries by key. Resolve builds the keys (hex hashes
// with a kind prefix, "resolution:…" or "choice:…", safe in any store),
// encodes the entries and checks their age against its own TTL
// (resolve.NewCachingResolver, tagpolicy.WithChoiceCache); a Cache knows nothing of their
// format. resolve.DirCache keeps them in a folder; other implementations (a
// shared Redis, in digestpin) keep them where several processes and
// machines read them. digestpin template keeps the keys it derives in the
// same store, under "key:…" (detgen.KeyCache), sealed. Implementations
// must be safe for concurrent use. A cache that fails (unreachable,
// corrupt) is a miss and never an error of the resolution: it says so
// itself, if at all.
type Cache interface {
	// Get returns the entry stored under key, when there is one that
	// read accepts.
	Get(ctx context.Context, key string, read EntryRead) ([]byte, bool)
	// Put stores entry under key. A store may drop it after its TTL.
	Put(ctx context.Context, key string, entry []byte) error
	// Claim is called on a miss, before the caller asks the registry:
	// when another process is finding the entry of key at the moment, it
	// may wait (briefly, with a bound) for that entry, one that read
	// accepts, and return it with found true, or, when that process
	// failed moments ago, its failure as err, which the caller returns as
	// its own. Otherwise the caller finds the entry itself, stores it with
	// Put, and then calls release, which is never nil: with nil after an
	// entry (or when it has no failure to share), or with the error of
	// the resolution, which the cache may keep for a few seconds (never
	// longer than its TTL) for the processes that wait. A cache that only
	// one process at a time uses returns at once.
	Claim(ctx context.Context, key string, read EntryRead) (entry []byte, found bool, release func(failure error), err error)
}

// EntryRead says how a Cache reads the entry of a key: at most Max bytes
// (a longer value is none, and is never read whole), and only an entry
// that Check accepts. Check returns nil for an entry to use,
// ErrCacheEntryExpired for one that is too old, a plain miss, and another
// error for a value that is no entry of the key (corrupt, foreign, of
// another format), which a cache may report as it ignores it. The reads
// packages resolve and tagpolicy pass to a Cache always set both.
type EntryRead struct {
	Max   int
	Check func(entry []byte) error
}

// ErrCacheEntryExpired is what an EntryRead's Check returns for an entry
// older than the TTL, or resolved in the future (a clock that went back):
// a plain miss, unlike a value that is not one of ours.
var ErrCacheEntryExpired = errors.New("cache entry expired")

// KeyFunc returns what, besides ref, decides the digest a resolver
// gives for ref: a string that differs whenever the answer may (see
// resolve.Resolver.CacheKey). ok false means the answer cannot be keyed, and the
// cache is neither read nor written for ref; an error means the same.
type KeyFunc func(ctx context.Context, ref name.Reference) (key string, ok bool, err error)
