package resolve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/atomicfile"

	"github.com/digestpin/digestpin/resolution"
)

// Cache keeps resolutions between runs, for a TTL, keyed by the
// reference and everything besides it that decides the answer (see
// Resolver.CacheKey). A CachingResolver consults it. DirCache keeps them in
// a folder; other implementations (a shared Redis, in digestpin) keep them
// where several processes and machines read them. Implementations must be
// safe for concurrent use. A cache that fails (unreachable, corrupt) is a
// miss and never an error of the resolution: it says so itself, if at
// all.
type Cache interface {
	// Get returns the cached digest of ref under key when an entry
	// younger than the TTL exists.
	Get(ctx context.Context, ref name.Reference, key string) (v1.Hash, bool)
	// Claim is called on a miss, before the caller asks the registry:
	// when another process is resolving ref under key at the moment, it
	// may wait (briefly, with a bound) for that answer and return it: the
	// digest with found true, or, when that process failed moments ago,
	// its failure as err, which the caller returns as its own. Otherwise
	// the caller asks the registry itself, stores a digest with Put, and
	// then calls release, which is never nil: with nil after a digest, or
	// with the error of the resolution, which the cache may keep for a few
	// seconds (never longer than its TTL) for the processes that wait. A
	// cache that only one process at a time uses returns at once.
	Claim(ctx context.Context, ref name.Reference, key string) (h v1.Hash, found bool, release func(failure error), err error)
	// Put stores the digest of ref under key, resolved now.
	Put(ctx context.Context, ref name.Reference, key string, h v1.Hash) error
	// GetChoice returns the tag choice cached for repo under key (which
	// names the policy, see WithChoiceCache) when one younger than the
	// TTL exists.
	GetChoice(ctx context.Context, repo name.Repository, key string) (Choice, bool)
	// PutChoice stores the tag choice for repo under key, made now.
	PutChoice(ctx context.Context, repo name.Repository, key string, c Choice) error
	// ClaimChoice is Claim for the tag choice of repo under key: it may
	// wait for the choice of another process that is making it and return
	// it with found true; otherwise the caller lists the tags, stores its
	// choice with PutChoice and then calls release, which is never nil.
	// A failure is not shared.
	ClaimChoice(ctx context.Context, repo name.Repository, key string) (c Choice, found bool, release func())
}

// DirCache is an on-disk Cache: one small JSON file per reference and key
// in one folder. Entries expire after the TTL; an expired, unreadable or
// foreign entry counts as a miss and is overwritten by the next
// resolution, and so does an entry of an earlier format. Reading an entry
// never blocks: a FIFO, a device, a socket or a link in the folder is a
// miss.
//
// Several processes may share one folder at once: each entry is written to
// a temporary file and renamed into place, so a reader sees a whole entry
// or none, and the last writer wins. Claim never waits: processes that
// miss together each ask the registry. A DirCache is safe for concurrent
// use.
type DirCache struct {
	dir string
	ttl time.Duration
	now func() time.Time
}

var _ Cache = (*DirCache)(nil)

// cacheFormat names the format of entries and of their keys. Entries of
// another format (those of earlier versions, keyed by reference and
// platform only) are misses, never misread.
const cacheFormat = "digestpin-cache-v2"

// maxCacheEntry caps what is read of one entry; a real one is about 300
// bytes.
const maxCacheEntry = 64 << 10

// cacheEntry is the content of one cache file.
type cacheEntry struct {
	Format    string    `json:"format"`
	Reference string    `json:"reference"`
	Key       string    `json:"key,omitempty"`
	Digest    string    `json:"digest"`
	Resolved  time.Time `json:"resolved"`
}

// ErrCacheEntryExpired is the error of DecodeCacheEntry for an entry
// older than the TTL, or resolved in the future (a clock that went back):
// a plain miss, unlike an entry that is not one of ours.
var ErrCacheEntryExpired = errors.New("cache entry expired")

// CacheEntryID names the entry of ref under key, for every Cache: a hex
// SHA-256 of the format, the reference and the key, so that entries of
// another format are never even read.
func CacheEntryID(ref name.Reference, key string) string {
	sum := sha256.Sum256([]byte(cacheFormat + "\n" + ref.Name() + "\n" + key))
	return hex.EncodeToString(sum[:])
}

// EncodeCacheEntry returns the entry that says ref resolved to h under
// key at resolved, as JSON of at most a few hundred bytes.
func EncodeCacheEntry(ref name.Reference, key string, h v1.Hash, resolved time.Time) ([]byte, error) {
	b, err := json.Marshal(cacheEntry{Format: cacheFormat, Reference: ref.Name(), Key: key, Digest: h.String(), Resolved: resolved.UTC()})
	if err != nil {
		return nil, fmt.Errorf("encoding cache entry for %s: %w", ref.Name(), err)
	}
	return b, nil
}

// DecodeCacheEntry returns the digest of the entry b, written by
// EncodeCacheEntry for ref under key, when it is younger than ttl at now.
// An entry too old (or from the future) is ErrCacheEntryExpired; anything
// else that is not an entry of ref under key in this format (corrupt, of
// another reference, key or format) is another error, which says why.
func DecodeCacheEntry(b []byte, ref name.Reference, key string, now time.Time, ttl time.Duration) (v1.Hash, error) {
	var e cacheEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return v1.Hash{}, fmt.Errorf("not a cache entry: %w", err)
	}
	// Entries are found by a hash: check that this one is really ours.
	switch {
	case e.Format != cacheFormat:
		return v1.Hash{}, fmt.Errorf("cache entry of format %q, want %q", e.Format, cacheFormat)
	case e.Reference != ref.Name() || e.Key != key:
		return v1.Hash{}, fmt.Errorf("cache entry of %q, not of %q under this key", e.Reference, ref.Name())
	}
	h, err := v1.NewHash(e.Digest)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("cache entry of %s: %w", ref.Name(), err)
	}
	// An entry from the future (a clock that went back) is not trusted.
	if age := now.Sub(e.Resolved); age < 0 || age >= ttl {
		return v1.Hash{}, ErrCacheEntryExpired
	}
	return h, nil
}

// DefaultCacheDir returns the cache folder used when only a TTL is given:
// "digestpin" in os.UserCacheDir ($XDG_CACHE_HOME or ~/.cache on Linux).
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache folder: %w", err)
	}
	return filepath.Join(d, "digestpin"), nil
}

// NewDirCache returns a cache in dir whose entries are valid for ttl,
// which must be positive. It creates dir (mode 0700) when missing and
// checks that it can write there.
func NewDirCache(dir string, ttl time.Duration) (*DirCache, error) {
	if dir == "" {
		return nil, errors.New("cache folder is empty")
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("cache TTL must be positive, got %s", ttl)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating cache folder: %w", err)
	}
	// A folder that cannot be written would make every run a miss,
	// silently; say so now.
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return nil, fmt.Errorf("checking cache folder %s: %w", dir, err)
	}
	_ = probe.Close()
	_ = os.Remove(probe.Name()) // a probe left behind costs nothing
	return &DirCache{dir: dir, ttl: ttl, now: time.Now}, nil
}

// Dir returns the cache folder.
func (c *DirCache) Dir() string { return c.dir }

// path returns the file of the entry for ref and key.
func (c *DirCache) path(ref name.Reference, key string) string {
	return filepath.Join(c.dir, CacheEntryID(ref, key)+".json")
}

// Get implements Cache. key is what, besides the reference, decides the
// answer: Resolver.CacheKey's, or "" for an index digest and the platform
// as v1.Platform.String formats it otherwise, when nothing else does (no
// mirrors, no credentials that matter).
func (c *DirCache) Get(_ context.Context, ref name.Reference, key string) (v1.Hash, bool) {
	b, err := readSmallFile(c.path(ref, key), maxCacheEntry, false)
	if err != nil {
		return v1.Hash{}, false
	}
	h, err := DecodeCacheEntry(b, ref, key, c.now(), c.ttl)
	if err != nil {
		return v1.Hash{}, false
	}
	return h, true
}

// Claim implements Cache: it never waits, and release does nothing; a
// failure is not kept.
func (c *DirCache) Claim(context.Context, name.Reference, string) (v1.Hash, bool, func(error), error) {
	return v1.Hash{}, false, func(error) {}, nil
}

// ClaimChoice implements Cache: it never waits, and release does
// nothing.
func (c *DirCache) ClaimChoice(context.Context, name.Repository, string) (Choice, bool, func()) {
	return Choice{}, false, func() {}
}

// Put implements Cache.
func (c *DirCache) Put(_ context.Context, ref name.Reference, key string, h v1.Hash) error {
	b, err := EncodeCacheEntry(ref, key, h, c.now())
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(c.path(ref, key), b, 0o644); err != nil {
		return fmt.Errorf("writing cache entry for %s: %w", ref.Name(), err)
	}
	return nil
}

// CacheKeyFunc returns what, besides ref, decides the digest a resolver
// gives for ref: a string that differs whenever the answer may (see
// Resolver.CacheKey). ok false means the answer cannot be keyed, and the
// cache is neither read nor written for ref; an error means the same.
type CacheKeyFunc func(ctx context.Context, ref name.Reference) (key string, ok bool, err error)

// CachingResolver answers from a Cache and asks the resolver it wraps on
// a miss, storing the answer. It is safe for concurrent use when the
// wrapped resolver is.
type CachingResolver struct {
	next  resolution.Resolver
	cache Cache
	key   CacheKeyFunc
	warnf func(format string, args ...any)
}

var (
	_ resolution.Resolver = (*Resolver)(nil)
	_ resolution.Resolver = (*CachingResolver)(nil)
)

// NewCachingResolver returns a resolver that consults c before next,
// under the key that key gives for each reference: everything besides the
// reference that decides next's answer (the platform; for a *Resolver also
// its CacheKey: mirrors, mirror-only, insecure registries and whose
// credentials are asked). A reference that key cannot key (ok false, or an
// error) goes to next without the cache. warnf receives a failure to store
// an entry, which does not fail the resolution; nil discards it.
func NewCachingResolver(next resolution.Resolver, c Cache, key CacheKeyFunc, warnf func(format string, args ...any)) *CachingResolver {
	if warnf == nil {
		warnf = func(string, ...any) {}
	}
	return &CachingResolver{next: next, cache: c, key: key, warnf: warnf}
}

// Resolve resolves ref: from the cache, with source resolution.Cache, on
// a hit; on a miss, as the wrapped resolver says, storing its answer. A
// reference that carries a digest, or that cannot be keyed, is passed to
// the wrapped resolver as it is.
func (r *CachingResolver) Resolve(ctx context.Context, ref name.Reference) (resolution.Resolution, error) {
	if _, ok := ref.(name.Digest); ok {
		return r.next.Resolve(ctx, ref)
	}
	if err := ctx.Err(); err != nil {
		return resolution.Resolution{}, fmt.Errorf("%s: %w", ref, err)
	}
	key, ok, err := r.key(ctx, ref)
	if err != nil || !ok {
		// The wrapped resolver meets the same failure and says it.
		return r.next.Resolve(ctx, ref)
	}
	if h, ok := r.cache.Get(ctx, ref, key); ok {
		return resolution.Resolution{Digest: h, Source: resolution.Cache}, nil
	}
	// A miss: another process that shares the cache may be asking the
	// registry for ref right now; its answer is as good as ours, and so
	// is its failure.
	h, found, release, err := r.cache.Claim(ctx, ref, key)
	switch {
	case err != nil:
		return resolution.Resolution{}, err
	case found:
		return resolution.Resolution{Digest: h, Source: resolution.Cache}, nil
	}
	res, err := r.next.Resolve(ctx, ref)
	if err != nil {
		// A run that ends (its deadline, a signal) has no answer to
		// share: the registry did not give one.
		if ctx.Err() != nil {
			release(nil)
		} else {
			release(err)
		}
		return resolution.Resolution{}, err
	}
	if err := r.cache.Put(ctx, ref, key, res.Digest); err != nil {
		r.warnf("%v", err)
	}
	release(nil)
	return res, nil
}
