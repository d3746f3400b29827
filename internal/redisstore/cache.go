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

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/redis/go-redis/v9"

	"github.com/digestpin/digestpin/resolve"
)

// Cache is a resolve.Cache on Redis. An entry is the JSON of
// resolve.EncodeCacheEntry under PREFIX + "resolution:" +
// resolve.CacheEntryID, and a tag choice that of resolve.EncodeChoiceEntry
// under PREFIX + "choice:" + resolve.ChoiceEntryID; each expires with the
// TTL; a reader also checks
// the entry's age against its own TTL, so processes with other TTLs can
// share the server.
//
// Claim takes a short lock per entry (SET NX PX under PREFIX +
// "resolving:" + the same ID; ClaimChoice under "choosing:"), so that of all the processes that miss an
// entry at once, one asks the registry and the others wait for its
// answer, polling, for at most the wait bound. A lock whose holder died
// expires after the same bound. A holder that fails publishes its error
// under PREFIX + "failed:" + the same ID for FailureTTL (or the TTL, if
// shorter), so that the processes that wait, and those that miss the
// entry meanwhile, fail at once with the same error instead of each
// asking the registry in turn. It is safe for concurrent use.
type Cache struct {
	c       *Client
	ttl     time.Duration
	wait    time.Duration
	failTTL time.Duration
	now     func() time.Time
}

var _ resolve.Cache = (*Cache)(nil)

// FailureTTL is how long a failed resolution is shared with the other
// processes (less when the cache's TTL is shorter): long enough for the
// processes of one sync that wait for it, short enough that an image
// pushed after the failure is found by the next render.
const FailureTTL = 5 * time.Second

// failureFormat names the format of a shared failure.
const failureFormat = "digestpin-failure-v1"

// maxFailure bounds what is read of one shared failure, and maxMessage
// what is kept of its message.
const (
	maxFailure = 8 << 10
	maxMessage = 2 << 10
)

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
	return &Cache{c: c, ttl: ttl, wait: wait, failTTL: min(FailureTTL, ttl), now: time.Now}, nil
}

func (k *Cache) entryKey(ref name.Reference, key string) string {
	return k.c.prefix + "resolution:" + resolve.CacheEntryID(ref, key)
}

func (k *Cache) lockKey(ref name.Reference, key string) string {
	return k.c.prefix + "resolving:" + resolve.CacheEntryID(ref, key)
}

func (k *Cache) failKey(ref name.Reference, key string) string {
	return k.c.prefix + "failed:" + resolve.CacheEntryID(ref, key)
}

// failureEntry is a failed resolution, shared briefly.
type failureEntry struct {
	Format    string `json:"format"`
	Reference string `json:"reference"`
	Key       string `json:"key"`
	Error     string `json:"error"`
}

// fail publishes the failure of ref under key for failTTL. The message is
// one line (the resolver's errors are, and have their credentials
// masked), cut to maxMessage.
func (k *Cache) fail(ctx context.Context, ref name.Reference, key string, failure error) {
	msg := strings.Join(strings.Fields(failure.Error()), " ")
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "…"
	}
	b, err := json.Marshal(failureEntry{Format: failureFormat, Reference: ref.Name(), Key: key, Error: msg})
	if err != nil || len(b) > maxFailure {
		return // a key too large to share: the others ask the registry
	}
	k.c.set(ctx, k.failKey(ref, key), b, k.failTTL)
}

// failure returns the failure of ref under key that another process
// published, if any: an error that says it is that process's answer.
func (k *Cache) failure(ctx context.Context, ref name.Reference, key string) error {
	fk := k.failKey(ref, key)
	b, ok := k.c.get(ctx, fk, maxFailure)
	if !ok {
		return nil
	}
	var e failureEntry
	switch err := json.Unmarshal(b, &e); {
	case err != nil:
		k.c.ignore(fk, fmt.Errorf("not a shared failure: %w", err))
		return nil
	case e.Format != failureFormat || e.Reference != ref.Name() || e.Key != key:
		k.c.ignore(fk, fmt.Errorf("a shared failure of format %q of %q, not of %q under this key", e.Format, e.Reference, ref.Name()))
		return nil
	case e.Error == "" || len(e.Error) > maxMessage+len("…") || strings.ContainsFunc(e.Error, unicode.IsControl):
		k.c.ignore(fk, errors.New("a shared failure whose message is empty, too long or not one line"))
		return nil
	}
	return fmt.Errorf("%s (the answer another process had moments ago, shared through Redis for %s)", e.Error, k.failTTL)
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

func (k *Cache) choiceKey(repo name.Repository, key string) string {
	return k.c.prefix + "choice:" + resolve.ChoiceEntryID(repo, key)
}

// GetChoice implements resolve.Cache: every process that shares the
// server shares the tag choices, so a repository's tags are listed once
// per TTL, not once per process.
func (k *Cache) GetChoice(ctx context.Context, repo name.Repository, key string) (resolve.Choice, bool) {
	ck := k.choiceKey(repo, key)
	b, ok := k.c.get(ctx, ck, resolve.MaxChoiceEntry)
	if !ok {
		return resolve.Choice{}, false
	}
	c, err := resolve.DecodeChoiceEntry(b, repo, key, k.now(), k.ttl)
	switch {
	case errors.Is(err, resolve.ErrCacheEntryExpired):
		return resolve.Choice{}, false
	case err != nil:
		k.c.ignore(ck, err)
		return resolve.Choice{}, false
	}
	return c, true
}

// PutChoice implements resolve.Cache. A failure of Redis is not an
// error: the Client warned about it.
func (k *Cache) PutChoice(ctx context.Context, repo name.Repository, key string, c resolve.Choice) error {
	b, err := resolve.EncodeChoiceEntry(repo, key, c, k.now())
	if err != nil {
		return err
	}
	k.c.set(ctx, k.choiceKey(repo, key), b, k.ttl)
	return nil
}

// releaseScript deletes a lock only if it still holds the caller's token:
// a lock that expired and was taken by another process stays.
var releaseScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Claim implements resolve.Cache: it takes the lock of the entry, or
// waits for the answer of the process that holds it: a digest, or a
// failure it published. The lock is released by release, or expires after
// the wait bound. When the holder gives up without an answer (its lock is
// gone), a waiter takes the lock itself; when the bound passes, or Redis
// fails, the caller asks the registry without a lock.
func (k *Cache) Claim(ctx context.Context, ref name.Reference, key string) (v1.Hash, bool, func(error), error) {
	var h v1.Hash
	found, unlock, err := k.claim(ctx, k.lockKey(ref, key), ref.String(), func() (bool, error) {
		var ok bool
		if h, ok = k.Get(ctx, ref, key); ok {
			return true, nil
		}
		return false, k.failure(ctx, ref, key)
	})
	switch {
	case err != nil || found:
		return h, found, func(error) {}, err
	case unlock == nil:
		return v1.Hash{}, false, func(error) {}, nil
	}
	return v1.Hash{}, false, func(failure error) {
		if failure != nil && k.failTTL > 0 {
			// Before the lock goes, so that a waiter finds it.
			k.fail(context.WithoutCancel(ctx), ref, key, failure)
		}
		unlock()
	}, nil
}

// ClaimChoice implements resolve.Cache as Claim does, for the tag choice
// of repo under key (a failure is not shared), so that of the processes
// that miss a choice at once, one lists the tags.
func (k *Cache) ClaimChoice(ctx context.Context, repo name.Repository, key string) (resolve.Choice, bool, func()) {
	var c resolve.Choice
	found, unlock, _ := k.claim(ctx, k.c.prefix+"choosing:"+resolve.ChoiceEntryID(repo, key), repo.String(), func() (bool, error) {
		var ok bool
		c, ok = k.GetChoice(ctx, repo, key)
		return ok, nil
	})
	if found {
		return c, true, func() {}
	}
	if unlock == nil {
		unlock = func() {}
	}
	return resolve.Choice{}, false, unlock
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
			k.c.logf("%s: no answer from the process resolving it within %s; asking the registry", what, k.wait)
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

var _ resolve.RecordCache = (*Cache)(nil)

func (k *Cache) recordKey(key string) string {
	return k.c.prefix + "record:" + resolve.RecordEntryID(key)
}

// GetRecord implements resolve.RecordCache: every process that shares
// the server shares the records (signature verifications).
func (k *Cache) GetRecord(ctx context.Context, key string) ([]byte, bool) {
	rk := k.recordKey(key)
	b, ok := k.c.get(ctx, rk, resolve.MaxRecord)
	if !ok {
		return nil, false
	}
	r, err := resolve.DecodeRecordEntry(b, key, k.now(), k.ttl)
	switch {
	case errors.Is(err, resolve.ErrCacheEntryExpired):
		return nil, false
	case err != nil:
		k.c.ignore(rk, err)
		return nil, false
	}
	return r, true
}

// PutRecord implements resolve.RecordCache. A failure of Redis is not an
// error: the Client warned about it.
func (k *Cache) PutRecord(ctx context.Context, key string, b []byte) error {
	e, err := resolve.EncodeRecordEntry(key, b, k.now())
	if err != nil {
		return err
	}
	k.c.set(ctx, k.recordKey(key), e, k.ttl)
	return nil
}
