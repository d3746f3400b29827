package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/digestpin/digestpin/resolve"
)

// Cache is a resolve.Cache on Redis: the entry of a key (resolve's:
// "resolution:…" or "choice:…"; digestpin template's sealed keys,
// "key:…") under PREFIX + key, kept for Keep or the
// TTL, whichever is longer; a reader checks an entry's age against its
// own TTL (resolve does, through the resolve.EntryRead), so processes with
// other TTLs can share the server, and an entry past the TTL is still
// what the cache last recorded (resolve.CachingResolver.Last). A value the reader does not accept is ignored with a
// warning that names its Redis key.
//
// Claim takes a short lock per entry (SET NX PX under PREFIX + "lock:" +
// key), so that of all the processes that miss an entry at once, one asks
// the registry and the others wait for its answer, polling, for at most
// the wait bound. A lock whose holder died expires after the same bound.
// A holder that fails publishes its error under PREFIX + "failed:" + key
// for FailureTTL (or the TTL, if shorter), so that the processes that
// wait, and those that miss the entry meanwhile, fail at once with the
// same error instead of each asking the registry in turn. It is safe for
// concurrent use.
type Cache struct {
	c       *Client
	ttl     time.Duration
	wait    time.Duration
	failTTL time.Duration
}

var _ resolve.Cache = (*Cache)(nil)

// Keep is how long Redis keeps an entry at least, past the TTL: a
// resolution past its TTL is no answer, but it is the digest the last
// render pinned, which the next one is compared with (and which may stand
// in for a registry that is down). An entry is about 300 bytes.
const Keep = 7 * 24 * time.Hour

// FailureTTL is how long a failed resolution is shared with the other
// processes (less when the cache's TTL is shorter): long enough for the
// processes of one sync that wait for it, short enough that an image
// pushed after the failure is found by the next render.
const FailureTTL = 5 * time.Second

// failureFormat names the format of a shared failure.
const failureFormat = "digestpin-failure-v2"

// maxFailure bounds what is read of one shared failure, and maxMessage
// what is kept of its message.
const (
	maxFailure = 8 << 10
	maxMessage = 2 << 10
)

// Polling for another process's answer starts at firstPoll and doubles up
// to lastPoll: a registry answers in tens of milliseconds, and hundreds of
// waiters must not flood the server.
const (
	firstPoll = 10 * time.Millisecond
	lastPoll  = 100 * time.Millisecond
)

// Cache returns the resolution cache on c, whose entries are valid for
// ttl, which must not be negative: a ttl of 0 makes a cache that keeps
// nothing, which pin.New refuses (a Cache needs a CacheTTL), so that the
// command that makes one names the missing TTL as pin does. wait bounds how long Claim waits for
// another process's answer before the caller asks the registry itself,
// and how long a lock lives; 0 means no waiting and no locks.
func (c *Client) Cache(ttl, wait time.Duration) (*Cache, error) {
	switch {
	case ttl < 0:
		return nil, errors.New("cache TTL must not be negative, got " + ttl.String())
	case wait < 0:
		return nil, errors.New("cache wait must not be negative, got " + wait.String())
	}
	return &Cache{c: c, ttl: ttl, wait: wait, failTTL: min(FailureTTL, ttl)}, nil
}

func (k *Cache) entryKey(key string) string { return k.c.prefix + key }

func (k *Cache) lockKey(key string) string { return k.c.prefix + "lock:" + key }

func (k *Cache) failKey(key string) string { return k.c.prefix + "failed:" + key }

// failureEntry is a failed resolution, shared briefly.
type failureEntry struct {
	Format string `json:"format"`
	Key    string `json:"key"`
	Error  string `json:"error"`
	// Unavailable is resolve.Unavailable of the failure: whether the
	// others may answer with a stale entry (resolve.StaleIfError).
	Unavailable bool `json:"unavailable,omitempty"`
}

// sharedFailure is the failure another process published.
type sharedFailure struct {
	msg         string
	unavailable bool
}

func (f *sharedFailure) Error() string { return f.msg }

// Unavailable tells resolve.Unavailable what the process that failed
// knew of the cause.
func (f *sharedFailure) Unavailable() bool { return f.unavailable }

// fail publishes the failure of key for failTTL. The message is one line
// (the resolver's errors are, and have their credentials masked), cut to
// maxMessage.
func (k *Cache) fail(ctx context.Context, key string, failure error) {
	msg := strings.Join(strings.Fields(failure.Error()), " ")
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "…"
	}
	b, err := json.Marshal(failureEntry{Format: failureFormat, Key: key, Error: msg, Unavailable: resolve.Unavailable(failure)})
	if err != nil || len(b) > maxFailure {
		return // a key too large to share: the others ask the registry
	}
	k.c.set(ctx, k.failKey(key), b, k.failTTL)
}

// failure returns the failure of key that another process published, if
// any: an error that says it is that process's answer.
func (k *Cache) failure(ctx context.Context, key string) error {
	fk := k.failKey(key)
	b, ok := k.c.get(ctx, fk, maxFailure)
	if !ok {
		return nil
	}
	var e failureEntry
	switch err := json.Unmarshal(b, &e); {
	case err != nil:
		k.c.ignore(fk, fmt.Errorf("not a shared failure: %w", err))
		return nil
	case e.Format != failureFormat || e.Key != key:
		k.c.ignore(fk, fmt.Errorf("a shared failure of format %q of key %q, not of this key", e.Format, e.Key))
		return nil
	case e.Error == "" || len(e.Error) > maxMessage+len("…") || strings.ContainsFunc(e.Error, unicode.IsControl):
		k.c.ignore(fk, errors.New("a shared failure whose message is empty, too long or not one line"))
		return nil
	}
	return &sharedFailure{msg: fmt.Sprintf("%s (the answer another process had moments ago, shared through Redis for %s)", e.Error, k.failTTL), unavailable: e.Unavailable}
}

// Get implements resolve.Cache. Every process that shares the server
// shares the entries, so a reference is resolved, and a repository's tags
// are listed, once per TTL, not once per process.
func (k *Cache) Get(ctx context.Context, key string, read resolve.EntryRead) ([]byte, bool) {
	ek := k.entryKey(key)
	b, ok := k.c.get(ctx, ek, read.Max)
	if !ok {
		return nil, false
	}
	switch err := read.Check(b); {
	case errors.Is(err, resolve.ErrCacheEntryExpired):
		return nil, false
	case err != nil:
		k.c.ignore(ek, err)
		return nil, false
	}
	return b, true
}

// Put implements resolve.Cache: the entry expires after Keep, or the TTL
// if longer. A failure of Redis is not an error: the Client warned about
// it.
func (k *Cache) Put(ctx context.Context, key string, entry []byte) error {
	keep := k.ttl
	if keep > 0 {
		keep = max(keep, Keep)
	}
	k.c.set(ctx, k.entryKey(key), entry, keep)
	return nil
}

// releaseScript deletes a lock only if it still holds the caller's token:
// a lock that expired and was taken by another process stays.
var releaseScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Claim implements resolve.Cache: it takes the lock of the entry, or
// waits for the answer of the process that holds it: an entry read
// accepts, or a failure it published. The lock is released by release,
// or expires after the wait bound. When the holder gives up without an
// answer (its lock is gone), a waiter takes the lock itself; when the
// bound passes, or Redis fails, the caller asks the registry without a
// lock.
func (k *Cache) Claim(ctx context.Context, key string, read resolve.EntryRead) ([]byte, bool, func(error), error) {
	var b []byte
	found, unlock, err := k.claim(ctx, k.lockKey(key), "cache entry "+key, func() (bool, error) {
		var ok bool
		if b, ok = k.Get(ctx, key, read); ok {
			return true, nil
		}
		return false, k.failure(ctx, key)
	})
	switch {
	case err != nil || found:
		return b, found, func(error) {}, err
	case unlock == nil:
		return nil, false, func(error) {}, nil
	}
	return nil, false, func(failure error) {
		if failure != nil && k.failTTL > 0 {
			// Before the lock goes, so that a waiter finds it.
			k.fail(context.WithoutCancel(ctx), key, failure)
		}
		unlock()
	}, nil
}

// claim takes lock, or polls answered for the answer of the process that
// holds it, for at most the wait bound. It returns found or err as
// answered gives them; unlock, when the caller holds the lock and is to
// find the answer itself; or none of them, when the bound passed, ctx
// ended or Redis failed, and the caller asks without a lock. what names
// the object in messages.
func (k *Cache) claim(ctx context.Context, lock, what string, answered func() (bool, error)) (found bool, unlock func(), err error) {
	if k.wait <= 0 {
		return false, nil, nil
	}
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
			return false, nil, nil
		}
		if got {
			// Another process may have stored the answer, or its
			// failure, between the caller's miss and this lock.
			if found, err := answered(); found || err != nil {
				k.release(ctx, lock, token)
				return found, nil, err
			}
			return false, func() { k.release(ctx, lock, token) }, nil
		}
		// Another process is asking: wait for its answer.
		if time.Now().Add(poll).After(deadline) {
			k.c.logf("%s: no answer from the process finding it within %s; going on without it", what, k.wait)
			return false, nil, nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, nil, nil
		case <-t.C:
		}
		poll = min(2*poll, lastPoll)
		if found, err := answered(); found || err != nil {
			return found, nil, err
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
