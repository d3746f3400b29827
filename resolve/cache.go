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
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/atomicfile"

	"github.com/digestpin/digestpin/internal/oneline"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/internal/smallfile"
	"github.com/digestpin/digestpin/resolve/internal/store"
)

// Cache is where resolutions and tag choices are kept between runs: a
// store of small byte entries by key (see the methods' contract in
// package resolve/internal/store). DirCache keeps them in a folder;
// digestpin keeps them in Redis too.
type Cache = store.Cache

// EntryRead says how a Cache reads the entry of a key: at most Max bytes,
// and only an entry that Check accepts.
type EntryRead = store.EntryRead

// DirCache is an on-disk Cache: one small file per key in one folder,
// named by a hash of the key, readable by its owner only (mode 0600; the
// auth cache keeps bearer tokens there, WithAuthCache). An unreadable entry, or one that the reader
// does not accept, counts as a miss and is overwritten by the next
// resolution. Reading an entry never blocks: a FIFO, a device, a socket
// or a link in the folder is a miss.
//
// Several processes may share one folder at once: each entry is written to
// a temporary file and renamed into place, so a reader sees a whole entry
// or none, and the last writer wins. Claim never waits: processes that
// miss together each ask the registry. A DirCache is safe for concurrent
// use.
type DirCache struct {
	dir string
}

var _ Cache = (*DirCache)(nil)

// cacheFormat names the format of entries and of their keys. Entries of
// another format (those of earlier versions, keyed by reference and
// platform only) are misses, never misread.
const cacheFormat = "digestpin-cache-v2"

// maxCacheEntry caps what is read of one entry; a real one is about 300
// bytes.
const maxCacheEntry = 64 << 10

// cacheEntry is the content of one cache entry.
type cacheEntry struct {
	Format    string    `json:"format"`
	Reference string    `json:"reference"`
	Key       string    `json:"key,omitempty"`
	Digest    string    `json:"digest"`
	MediaType string    `json:"mediaType,omitempty"`
	Resolved  time.Time `json:"resolved"`
}

// ErrCacheEntryExpired is what an EntryRead's Check returns for an entry
// older than the TTL, or resolved in the future (a clock that went back):
// a plain miss, unlike a value that is not one of ours.
var ErrCacheEntryExpired = store.ErrCacheEntryExpired

// resolutionKey is the Cache key of the entry of ref under key: a hex
// SHA-256 of the format, the reference and the key, so that entries of
// another format are never even read.
func resolutionKey(ref name.Reference, key string) string {
	sum := sha256.Sum256([]byte(cacheFormat + "\n" + ref.Name() + "\n" + key))
	return "resolution:" + hex.EncodeToString(sum[:])
}

// encodeCacheEntry returns the entry that says ref resolved to h under
// key at resolved, as JSON of at most a few hundred bytes; one larger than
// maxCacheEntry (a huge key) is an error: no Cache would read it back.
func encodeCacheEntry(ref name.Reference, key string, h v1.Hash, mediaType string, resolved time.Time) ([]byte, error) {
	b, err := json.Marshal(cacheEntry{Format: cacheFormat, Reference: ref.Name(), Key: key, Digest: h.String(), MediaType: mediaType, Resolved: resolved.UTC()})
	if err != nil {
		return nil, fmt.Errorf("encoding cache entry for %s: %w", ref.Name(), err)
	}
	if len(b) > maxCacheEntry {
		return nil, fmt.Errorf("storing cache entry for %s: %d bytes, more than %d", ref.Name(), len(b), maxCacheEntry)
	}
	return b, nil
}

// decodeCacheEntry returns the digest of the entry b, written by
// encodeCacheEntry for ref under key, when it is younger than ttl at now.
// An entry too old (or from the future) is ErrCacheEntryExpired; anything
// else that is not an entry of ref under key in this format (corrupt, of
// another reference, key or format) is another error, which says why.
func decodeCacheEntry(b []byte, ref name.Reference, key string, now time.Time, ttl time.Duration) (Recorded, error) {
	rec, err := decodeRecorded(b, ref, key, now)
	if err != nil {
		return Recorded{}, err
	}
	if now.Sub(rec.Resolved) >= ttl {
		return Recorded{}, ErrCacheEntryExpired
	}
	return rec, nil
}

// decodeRecorded returns the resolution that entry b, written by
// encodeCacheEntry for ref under key, records, whatever its age. An entry
// from the future (a clock that went back) is ErrCacheEntryExpired, and
// not trusted; anything else that is not an entry of ref under key in
// this format (corrupt, of another reference, key or format) is another
// error, which says why.
func decodeRecorded(b []byte, ref name.Reference, key string, now time.Time) (Recorded, error) {
	var e cacheEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return Recorded{}, fmt.Errorf("not a cache entry: %w", err)
	}
	// Entries are found by a hash: check that this one is really ours.
	switch {
	case e.Format != cacheFormat:
		return Recorded{}, fmt.Errorf("cache entry of format %q, want %q", e.Format, cacheFormat)
	case e.Reference != ref.Name() || e.Key != key:
		return Recorded{}, fmt.Errorf("cache entry of %q, not of %q under this key", e.Reference, ref.Name())
	}
	h, err := v1.NewHash(e.Digest)
	if err != nil {
		return Recorded{}, fmt.Errorf("cache entry of %s: %w", ref.Name(), err)
	}
	if e.MediaType != "" && !resolution.ManifestMediaType(e.MediaType) {
		return Recorded{}, fmt.Errorf("cache entry of %s: media type %q is no image manifest or index", ref.Name(), e.MediaType)
	}
	if e.Resolved.IsZero() || now.Before(e.Resolved) {
		return Recorded{}, ErrCacheEntryExpired
	}
	return Recorded{Digest: h, MediaType: e.MediaType, Resolved: e.Resolved}, nil
}

// entries are the typed entries of a Cache, valid for a TTL: what
// CachingResolver reads and writes (tagpolicy keeps its choices alike).
type entries struct {
	c   Cache
	ttl time.Duration
	now func() time.Time
}

// newEntries returns the entries of c valid for ttl.
func newEntries(c Cache, ttl time.Duration) *entries {
	return &entries{c: c, ttl: ttl, now: time.Now}
}

// resolutionRead is how the entry of ref under key is read.
func (e *entries) resolutionRead(ref name.Reference, key string) EntryRead {
	return EntryRead{Max: maxCacheEntry, Check: func(b []byte) error {
		_, err := decodeCacheEntry(b, ref, key, e.now(), e.ttl)
		return err
	}}
}

// recorded returns the resolution of ref under key that the cache
// holds, whatever its age: one past the TTL too, which the caller tells
// with fresh.
func (e *entries) recorded(ctx context.Context, ref name.Reference, key string) (Recorded, bool) {
	read := EntryRead{Max: maxCacheEntry, Check: func(b []byte) error {
		_, err := decodeRecorded(b, ref, key, e.now())
		return err
	}}
	b, ok := e.c.Get(ctx, resolutionKey(ref, key), read)
	if !ok {
		return Recorded{}, false
	}
	rec, err := decodeRecorded(b, ref, key, e.now())
	return rec, err == nil
}

// fresh reports whether rec is younger than the TTL.
func (e *entries) fresh(rec Recorded) bool {
	age := e.now().Sub(rec.Resolved)
	return age >= 0 && age < e.ttl
}

// decode returns the resolution entry b of ref under key records, if it
// is valid and fresh.
func (e *entries) decode(b []byte, ref name.Reference, key string) (Recorded, bool) {
	rec, err := decodeCacheEntry(b, ref, key, e.now(), e.ttl)
	return rec, err == nil
}

// claim is Cache.Claim for the entry of ref under key.
func (e *entries) claim(ctx context.Context, ref name.Reference, key string) (Recorded, bool, func(error), error) {
	b, found, release, err := e.c.Claim(ctx, resolutionKey(ref, key), e.resolutionRead(ref, key))
	if err != nil || !found {
		return Recorded{}, false, release, err
	}
	if rec, ok := e.decode(b, ref, key); ok {
		return rec, true, release, nil
	}
	// An entry the read accepted moments ago that is too old now: the
	// caller asks the registry.
	return Recorded{}, false, release, nil
}

// put stores the resolution of ref under key, resolved now.
func (e *entries) put(ctx context.Context, ref name.Reference, key string, h v1.Hash, mediaType string) error {
	b, err := encodeCacheEntry(ref, key, h, mediaType, e.now())
	if err != nil {
		return err
	}
	return e.c.Put(ctx, resolutionKey(ref, key), b)
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

// NewDirCache returns a cache in dir. It creates dir (mode 0700) when
// missing and checks that it can write there.
func NewDirCache(dir string) (*DirCache, error) {
	if dir == "" {
		return nil, errors.New("cache folder is empty")
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
	return &DirCache{dir: dir}, nil
}

// Dir returns the cache folder.
func (c *DirCache) Dir() string { return c.dir }

// path returns the file of the entry of key: a hex SHA-256 of the key,
// so that no key names a path outside the folder.
func (c *DirCache) path(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:])+".json")
}

// Get implements Cache.
func (c *DirCache) Get(_ context.Context, key string, read EntryRead) ([]byte, bool) {
	b, err := smallfile.Read(c.path(key), int64(read.Max), false)
	if err != nil || read.Check(b) != nil {
		return nil, false
	}
	return b, true
}

// Claim implements Cache: it never waits, and release does nothing; a
// failure is not kept.
func (c *DirCache) Claim(context.Context, string, EntryRead) ([]byte, bool, func(error), error) {
	return nil, false, func(error) {}, nil
}

// Put implements Cache.
func (c *DirCache) Put(_ context.Context, key string, entry []byte) error {
	if err := atomicfile.WriteCacheFile(c.path(key), entry, 0o600); err != nil {
		return fmt.Errorf("writing cache entry %s: %w", key, err)
	}
	return nil
}

// CacheKeyFunc returns what, besides ref, decides the digest a resolver
// gives for ref: a string that differs whenever the answer may (see
// Resolver.CacheKey). ok false means the answer cannot be keyed, and the
// cache is neither read nor written for ref; an error means the same.
type CacheKeyFunc = store.KeyFunc

// CachingResolver answers from a Cache and asks the resolver it wraps on
// a miss, storing the answer. It is safe for concurrent use when the
// wrapped resolver is.
type CachingResolver struct {
	next    resolution.Resolver
	entries *entries
	key     CacheKeyFunc
	warnf   func(format string, args ...any)
	// last holds, by ref.Name(), the *lastRead of what the cache held for
	// the reference when this CachingResolver first read it: before it
	// stored an answer of its own.
	last sync.Map
	// staleIfError is how long past the TTL an entry may stand in for an
	// unavailable registry (StaleIfError); 0: never.
	staleIfError time.Duration
	// warned holds the references whose stale answer was warned about.
	warned sync.Map
}

// CachingOption configures a CachingResolver.
type CachingOption func(*CachingResolver)

// StaleIfError lets a CachingResolver answer with the last digest the
// cache recorded for a reference, when the resolver it wraps fails for a
// reason that says nothing about the image (Unavailable: a registry down,
// hung, 5xx, 429 after its retries) and that digest was resolved at most
// d past the TTL ago: source resolution.Stale, with a warning, once per
// reference, that says how old it is. A refusal, a 404 or a malformed
// answer still fails: the registry said something about the image. The
// cache must keep entries that long (a DirCache keeps them until they are
// replaced; Redis, see internal/redisstore). 0, the default, never
// answers stale.
func StaleIfError(d time.Duration) CachingOption {
	return func(r *CachingResolver) { r.staleIfError = max(d, 0) }
}

// Recorded is a resolution as a cache recorded it: the digest, and when
// it was resolved (the registry asked).
type Recorded struct {
	Digest v1.Hash
	// MediaType is what Digest is (resolution.Resolution.MediaType); ""
	// in an entry written before it was kept.
	MediaType string
	Resolved  time.Time
}

// lastRead is the first read of a reference's entry: the resolution it
// recorded, if any.
type lastRead struct {
	rec Recorded
	ok  bool
}

var (
	_ resolution.Resolver = (*Resolver)(nil)
	_ resolution.Resolver = (*CachingResolver)(nil)
)

// NewCachingResolver returns a resolver that consults c before next, for
// entries younger than ttl (which must be positive), under the key that
// key gives for each reference: everything besides the
// reference that decides next's answer (the platform; for a *Resolver also
// its CacheKey: mirrors, mirror-only, insecure registries and whose
// credentials are asked). A reference that key cannot key (ok false, or an
// error) goes to next without the cache. warnf receives a failure to store
// an entry, which does not fail the resolution; nil discards it.
func NewCachingResolver(next resolution.Resolver, c Cache, ttl time.Duration, key CacheKeyFunc, warnf func(format string, args ...any), opts ...CachingOption) *CachingResolver {
	if warnf == nil {
		warnf = func(string, ...any) {}
	}
	r := &CachingResolver{next: next, entries: newEntries(c, ttl), key: key, warnf: warnf}
	for _, o := range opts {
		o(r)
	}
	return r
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
	// One read of the entry, whatever its age: a fresh one answers, and
	// any is what the cache held before this run (Last).
	rec, ok := r.entries.recorded(ctx, ref, key)
	r.remember(ref, rec, ok)
	if ok && r.entries.fresh(rec) {
		return resolution.Resolution{Digest: rec.Digest, Source: resolution.Cache, MediaType: rec.MediaType}, nil
	}
	// A miss: another process that shares the cache may be asking the
	// registry for ref right now; its answer is as good as ours, and so
	// is its failure.
	claimed, found, release, err := r.entries.claim(ctx, ref, key)
	switch {
	case err != nil:
		// Another process's failure, shared: the same as ours.
		return r.stale(ctx, ref, rec, ok, err)
	case found:
		return resolution.Resolution{Digest: claimed.Digest, Source: resolution.Cache, MediaType: claimed.MediaType}, nil
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
		return r.stale(ctx, ref, rec, ok, err)
	}
	if err := r.entries.put(ctx, ref, key, res.Digest, res.MediaType); err != nil {
		r.warnf("%v", err)
	}
	release(nil)
	return res, nil
}

// stale returns rec, the entry of ref that the cache held (ok), in
// place of err, the failure of the resolver it wraps, when StaleIfError
// allows it: the registry was unavailable, the run goes on, and rec was
// resolved at most the TTL and the allowance ago. Otherwise it returns
// err.
func (r *CachingResolver) stale(ctx context.Context, ref name.Reference, rec Recorded, ok bool, err error) (resolution.Resolution, error) {
	if !ok || r.staleIfError <= 0 || ctx.Err() != nil || !Unavailable(err) {
		return resolution.Resolution{}, err
	}
	age := r.entries.now().Sub(rec.Resolved)
	if age < 0 || age >= r.entries.ttl+r.staleIfError {
		return resolution.Resolution{}, err
	}
	if _, warned := r.warned.LoadOrStore(ref.Name(), true); !warned {
		r.warnf("%s: using %s, resolved %s ago (%s %s past %s %s), since the registry did not answer: %v", ref, rec.Digest, oneline.Duration(age), resolution.OptionName(ctx, "StaleIfError"), oneline.Duration(r.staleIfError), resolution.OptionName(ctx, "CacheTTL"), oneline.Duration(r.entries.ttl), err)
	}
	return resolution.Resolution{Digest: rec.Digest, Source: resolution.Stale, MediaType: rec.MediaType}, nil
}

// Last returns the last resolution of ref that the cache recorded before
// this CachingResolver stored one, whatever its age, past the TTL too:
// what a run compares its digests with, and what may stand in for the
// registry's answer when the registry fails. ok is false when the cache
// holds no entry of ref under its key (a corrupt or foreign entry, or one
// resolved in the future, is none), and for a reference that carries a
// digest or that cannot be keyed. It is what the first read of ref's
// entry found, by Resolve (which reads it anyway) or by Last, for the
// CachingResolver's lifetime: Last costs no read after a Resolve of ref.
// Last is not a hit, and changes no entry. It is safe for concurrent use.
func (r *CachingResolver) Last(ctx context.Context, ref name.Reference) (Recorded, bool) {
	if _, ok := ref.(name.Digest); ok {
		return Recorded{}, false
	}
	if v, ok := r.last.Load(ref.Name()); ok {
		l := v.(*lastRead)
		return l.rec, l.ok
	}
	key, ok, err := r.key(ctx, ref)
	if err != nil || !ok {
		return Recorded{}, false
	}
	rec, found := r.entries.recorded(ctx, ref, key)
	return r.remember(ref, rec, found)
}

// remember keeps the first read of ref's entry, and returns the one
// kept: a read after this CachingResolver stored an entry of its own
// never replaces the one before.
func (r *CachingResolver) remember(ref name.Reference, rec Recorded, ok bool) (Recorded, bool) {
	v, _ := r.last.LoadOrStore(ref.Name(), &lastRead{rec: rec, ok: ok})
	l := v.(*lastRead)
	return l.rec, l.ok
}
