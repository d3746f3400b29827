package helmcmd

import (
	"context"

	"github.com/digestpin/digestpin/detgen"
	"github.com/digestpin/digestpin/internal/cli"
	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/resolve"
)

// keyCache returns where a render keeps the keys it derives between runs:
// the resolution cache's store, under keys of their own ("key:…"): the
// Redis of --cache, else the cache folder when --cache-ttl is set (its
// entries there readable by their owner only); nil without a cache. A
// folder that cannot be used is said once, and the render goes on without
// it (the resolution cache then fails as it does).
func keyCache(ctx context.Context, popts pin.Options, log *cli.Logger) detgen.KeyCache {
	if popts.Cache != nil {
		return storeKeys{ctx: ctx, c: popts.Cache}
	}
	if popts.CacheTTL <= 0 {
		return nil
	}
	dir := popts.CacheDir
	if dir == "" {
		d, err := resolve.DefaultCacheDir()
		if err != nil {
			log.Warnf("key cache: %v; deriving every key", err)
			return nil
		}
		dir = d
	}
	dc, err := resolve.NewDirCache(dir)
	if err != nil {
		log.Warnf("key cache: %v; deriving every key", err)
		return nil
	}
	log.Debugf("key cache in %s", dir)
	return storeKeys{ctx: ctx, c: dc}
}

// storeKeys is a detgen.KeyCache on a resolve.Cache.
type storeKeys struct {
	ctx context.Context
	c   resolve.Cache
}

var _ detgen.KeyCache = storeKeys{}

// anyEntry is how storeKeys reads an entry: whatever it holds, up to
// detgen.MaxKeyEntry bytes. The generator opens and checks every entry
// itself, and says once in a render how many it ignored and why; a Check
// that refused them would have the store warn of each.
var anyEntry = resolve.EntryRead{Max: detgen.MaxKeyEntry, Check: func([]byte) error { return nil }}

func (s storeKeys) Get(key string) ([]byte, bool) { return s.c.Get(s.ctx, key, anyEntry) }

func (s storeKeys) Put(key string, entry []byte) error { return s.c.Put(s.ctx, key, entry) }

// warnKeyCache says, once each in a render, that the key cache held
// entries that were not used or failed to store keys, and how many keys
// it served (-v).
func warnKeyCache(log *cli.Logger, gen *detgen.Generator) {
	s := gen.KeyCacheStats()
	if s.Rejected > 0 {
		log.Warnf("key cache: ignored %d entr%s that could not be used, derived %s again and replaced %s (the first, %s)",
			s.Rejected, plural(s.Rejected, "y", "ies"), plural(s.Rejected, "its key", "their keys"), plural(s.Rejected, "it", "them"), s.FirstRejected)
	}
	if s.Unstored > 0 {
		log.Warnf("key cache: could not store %d derived key%s, which the next render derives again (the first, %s)",
			s.Unstored, plural(s.Unstored, "", "s"), s.FirstUnstored)
	}
	if s.Hits+s.Derived > 0 {
		log.Debugf("key cache: %d RSA and DSA keys read from the cache, %d derived", s.Hits, s.Derived)
	}
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
