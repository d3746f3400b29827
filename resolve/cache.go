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

// Cache is an on-disk cache of resolutions: one small JSON file per
// reference and platform in one folder. Entries expire after the TTL; an
// expired, unreadable or foreign entry counts as a miss and is overwritten
// by the next resolution.
//
// Several processes may share one folder at once: each entry is written to
// a temporary file and renamed into place, so a reader sees a whole entry
// or none, and the last writer wins. A Cache is safe for concurrent use.
type Cache struct {
	dir string
	ttl time.Duration
	now func() time.Time
}

// cacheEntry is the content of one cache file.
type cacheEntry struct {
	Reference string    `json:"reference"`
	Platform  string    `json:"platform,omitempty"`
	Digest    string    `json:"digest"`
	Resolved  time.Time `json:"resolved"`
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

// NewCache returns a cache in dir whose entries are valid for ttl, which
// must be positive. It creates dir (mode 0700) when missing and checks
// that it can write there.
func NewCache(dir string, ttl time.Duration) (*Cache, error) {
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
	return &Cache{dir: dir, ttl: ttl, now: time.Now}, nil
}

// Dir returns the cache folder.
func (c *Cache) Dir() string { return c.dir }

// path returns the file of the entry for ref and platform.
func (c *Cache) path(ref name.Reference, platform string) string {
	sum := sha256.Sum256([]byte(ref.Name() + "\n" + platform))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:])+".json")
}

// Get returns the cached digest of ref for platform ("" for none, else as
// v1.Platform.String formats it) when an entry younger than the TTL
// exists.
func (c *Cache) Get(ref name.Reference, platform string) (v1.Hash, bool) {
	b, err := os.ReadFile(c.path(ref, platform))
	if err != nil {
		return v1.Hash{}, false
	}
	var e cacheEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return v1.Hash{}, false
	}
	// The file name is a hash: check that the entry is really ours.
	if e.Reference != ref.Name() || e.Platform != platform {
		return v1.Hash{}, false
	}
	// An entry from the future (a clock that went back) is not trusted.
	if age := c.now().Sub(e.Resolved); age < 0 || age >= c.ttl {
		return v1.Hash{}, false
	}
	h, err := v1.NewHash(e.Digest)
	if err != nil {
		return v1.Hash{}, false
	}
	return h, true
}

// Put stores the digest of ref for platform, resolved now.
func (c *Cache) Put(ref name.Reference, platform string, h v1.Hash) error {
	b, err := json.Marshal(cacheEntry{Reference: ref.Name(), Platform: platform, Digest: h.String(), Resolved: c.now().UTC()})
	if err != nil {
		return fmt.Errorf("encoding cache entry for %s: %w", ref.Name(), err)
	}
	if err := atomicfile.WriteFile(c.path(ref, platform), b, 0o644); err != nil {
		return fmt.Errorf("writing cache entry for %s: %w", ref.Name(), err)
	}
	return nil
}

// CachingResolver answers from a Cache and asks the resolver it wraps on
// a miss, storing the answer. It is safe for concurrent use when the
// wrapped resolver is.
type CachingResolver struct {
	next     resolution.Resolver
	cache    *Cache
	platform string
	warnf    func(format string, args ...any)
}

var (
	_ resolution.Resolver = (*Resolver)(nil)
	_ resolution.Resolver = (*CachingResolver)(nil)
)

// NewCachingResolver returns a resolver that consults c before next.
// platform is the platform next pins to, as v1.Platform.String formats
// it, or "" when next keeps index digests; it is part of the cache key.
// warnf receives a failure to store an entry, which does not fail the
// resolution; nil discards it.
func NewCachingResolver(next resolution.Resolver, c *Cache, platform string, warnf func(format string, args ...any)) *CachingResolver {
	if warnf == nil {
		warnf = func(string, ...any) {}
	}
	return &CachingResolver{next: next, cache: c, platform: platform, warnf: warnf}
}

// Resolve resolves ref: from the cache, with source resolution.Cache, on
// a hit; on a miss, as the wrapped resolver says, storing its answer. A
// reference that carries a digest is passed to the wrapped resolver as it
// is.
func (r *CachingResolver) Resolve(ctx context.Context, ref name.Reference) (resolution.Resolution, error) {
	_, pinned := ref.(name.Digest)
	if !pinned {
		if h, ok := r.cache.Get(ref, r.platform); ok {
			return resolution.Resolution{Digest: h, Source: resolution.Cache}, nil
		}
	}
	res, err := r.next.Resolve(ctx, ref)
	if err != nil {
		return resolution.Resolution{}, err
	}
	if !pinned {
		if err := r.cache.Put(ref, r.platform, res.Digest); err != nil {
			r.warnf("%v", err)
		}
	}
	return res, nil
}
