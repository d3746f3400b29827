package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/redis/go-redis/v9"

	"github.com/digestpin/digestpin/resolve"
)

// Cache is a resolve.Cache on Redis. An entry is the JSON of
// resolve.EncodeCacheEntry under PREFIX + "resolution:" +
// resolve.CacheEntryID, which expires with the TTL; a reader also checks
// the entry's age against its own TTL, so processes with other TTLs can
// share the server.
//
// Claim takes a short lock per entry (SET NX PX under PREFIX +
// "resolving:" + the same ID), so that of all the processes that miss an
// entry at once, one asks the registry and the others wait for its
// answer, polling, for at most the wait bound. A lock whose holder died
// expires after the same bound. It is safe for concurrent use.
type Cache struct {
	c    *Client
	ttl  time.Duration
	wait time.Duration
	now  func() time.Time
}

var _ resolve.Cache = (*Cache)(nil)

// maxEntry bounds what is read of one entry; an entry is a few hundred
// bytes, like one of resolve.DirCache.
const maxEntry = 64 << 10

// Polling for another process's answer starts at firstPoll and doubles up
// to lastPoll: a registry answers in tens of milliseconds, and hundreds of
// waiters must not flood the server.
const (
	firstPoll = 10 * time.Millisecond
	lastPoll  = 100 * time.Millisecond
)

// Cache returns the resolution cache on c, whose entries are valid for
// ttl, which must be positive. wait bounds how long Claim waits for
// another process's answer before the caller asks the registry itself,
// and how long a lock lives; 0 means no waiting and no locks.
func (c *Client) Cache(ttl, wait time.Duration) (*Cache, error) {
	switch {
	case ttl <= 0:
		return nil, errors.New("cache TTL must be positive, got " + ttl.String())
	case wait < 0:
		return nil, errors.New("cache wait must not be negative, got " + wait.String())
	}
	return &Cache{c: c, ttl: ttl, wait: wait, now: time.Now}, nil
}

func (k *Cache) entryKey(ref name.Reference, key string) string {
	return k.c.prefix + "resolution:" + resolve.CacheEntryID(ref, key)
}

func (k *Cache) lockKey(ref name.Reference, key string) string {
	return k.c.prefix + "resolving:" + resolve.CacheEntryID(ref, key)
}

// Get implements resolve.Cache.
func (k *Cache) Get(ctx context.Context, ref name.Reference, key string) (v1.Hash, bool) {
	ek := k.entryKey(ref, key)
	b, ok := k.c.get(ctx, ek, maxEntry)
	if !ok {
		return v1.Hash{}, false
	}
	h, err := resolve.DecodeCacheEntry(b, ref, key, k.now(), k.ttl)
	switch {
	case errors.Is(err, resolve.ErrCacheEntryExpired):
		return v1.Hash{}, false
	case err != nil:
		k.c.ignore(ek, err)
		return v1.Hash{}, false
	}
	return h, true
}

// Put implements resolve.Cache. A failure of Redis is not an error: the
// Client warned about it.
func (k *Cache) Put(ctx context.Context, ref name.Reference, key string, h v1.Hash) error {
	b, err := resolve.EncodeCacheEntry(ref, key, h, k.now())
	if err != nil {
		return err
	}
	if len(b) > maxEntry {
		// Get would ignore it.
		return fmt.Errorf("storing cache entry for %s: %d bytes, more than %d", ref.Name(), len(b), maxEntry)
	}
	k.c.set(ctx, k.entryKey(ref, key), b, k.ttl)
	return nil
}

// releaseScript deletes a lock only if it still holds the caller's token:
// a lock that expired and was taken by another process stays.
var releaseScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Claim implements resolve.Cache: it takes the lock of the entry, or
// waits for the answer of the process that holds it. The lock is
// released by release, or expires after the wait bound. When the holder
// gives up without an answer (its lock is gone), a waiter takes the lock
// itself; when the bound passes, or Redis fails, the caller asks the
// registry without a lock.
func (k *Cache) Claim(ctx context.Context, ref name.Reference, key string) (v1.Hash, bool, func()) {
	none := func() {}
	if k.wait <= 0 {
		return v1.Hash{}, false, none
	}
	lock := k.lockKey(ref, key)
	var tok [16]byte
	_, _ = rand.Read(tok[:]) // crypto/rand.Read never fails
	token := hex.EncodeToString(tok[:])
	deadline := time.Now().Add(k.wait)
	poll := firstPoll
	for {
		var got bool
		err := k.c.call(ctx, "locking "+lock, func(ctx context.Context) error {
			var err error
			got, err = k.c.rdb.SetNX(ctx, lock, token, k.wait).Result()
			return err
		})
		if err != nil {
			return v1.Hash{}, false, none
		}
		if got {
			// Another process may have stored the answer between the
			// caller's miss and this lock.
			if h, ok := k.Get(ctx, ref, key); ok {
				k.release(ctx, lock, token)
				return h, true, none
			}
			return v1.Hash{}, false, func() { k.release(ctx, lock, token) }
		}
		// Another process is asking the registry: wait for its answer.
		if time.Now().Add(poll).After(deadline) {
			k.c.logf("%s: no answer from the process resolving it within %s; asking the registry", ref, k.wait)
			return v1.Hash{}, false, none
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return v1.Hash{}, false, none
		case <-t.C:
		}
		poll = min(2*poll, lastPoll)
		if h, ok := k.Get(ctx, ref, key); ok {
			return h, true, none
		}
	}
}

// release deletes the lock if it is still the caller's. It runs even when
// ctx has ended (the run stops), bounded by the Client's timeout, so that
// the other processes need not wait for the lock to expire.
func (k *Cache) release(ctx context.Context, lock, token string) {
	_ = k.c.call(context.WithoutCancel(ctx), "unlocking "+lock, func(ctx context.Context) error {
		return releaseScript.Run(ctx, k.c.rdb, []string{lock}, token).Err()
	})
}
