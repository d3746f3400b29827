package tagpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/imageref"
	"github.com/digestpin/digestpin/resolve/internal/store"
)

// choiceFormat names the format of the cache entries of tag choices,
// which share the Cache and its TTL with resolutions; their IDs are hashes
// of another format, so the two never meet.
const choiceFormat = "digestpin-tag-choice-v1"

// maxChoiceEntry caps what a Cache reads of one tag choice: its
// candidates may be every matching tag of a repository.
const maxChoiceEntry = 1 << 20

// choiceEntry is the content of one cached tag choice.
type choiceEntry struct {
	Format     string    `json:"format"`
	Repository string    `json:"repository"`
	Key        string    `json:"key"`
	Choice     Choice    `json:"choice"`
	Resolved   time.Time `json:"resolved"`
}

// choiceKeyOf is the Cache key of the choice for repo under key: a hex
// SHA-256 of the format, the repository and the key.
func choiceKeyOf(repo name.Repository, key string) string {
	sum := sha256.Sum256([]byte(choiceFormat + "\n" + repo.Name() + "\n" + key))
	return "choice:" + hex.EncodeToString(sum[:])
}

// encodeChoiceEntry returns the entry that says the policy in key chose
// c for repo at resolved, as JSON. An entry larger than maxChoiceEntry is
// an error: no Cache would read it back.
func encodeChoiceEntry(repo name.Repository, key string, c Choice, resolved time.Time) ([]byte, error) {
	b, err := json.Marshal(choiceEntry{Format: choiceFormat, Repository: repo.Name(), Key: key, Choice: c, Resolved: resolved.UTC()})
	if err != nil {
		return nil, fmt.Errorf("encoding the tag choice of %s: %w", repo.Name(), err)
	}
	if len(b) > maxChoiceEntry {
		return nil, fmt.Errorf("encoding the tag choice of %s: %d bytes, more than %d", repo.Name(), len(b), maxChoiceEntry)
	}
	return b, nil
}

// decodeChoiceEntry returns the choice of the entry b, written by
// encodeChoiceEntry for repo under key, when it is younger than ttl at
// now. An entry too old (or from the future) is store.ErrCacheEntryExpired;
// anything else that is not a choice of repo under key in this format, or
// whose tag or candidates are not valid tags, is another error, which
// says why.
func decodeChoiceEntry(b []byte, repo name.Repository, key string, now time.Time, ttl time.Duration) (Choice, error) {
	c, resolved, err := decodeRecordedChoice(b, repo, key, now)
	if err != nil {
		return Choice{}, err
	}
	if now.Sub(resolved) >= ttl {
		return Choice{}, store.ErrCacheEntryExpired
	}
	return c, nil
}

// decodeRecordedChoice is decodeChoiceEntry whatever the entry's age, with
// when the choice was made; an entry from the future is still
// store.ErrCacheEntryExpired.
func decodeRecordedChoice(b []byte, repo name.Repository, key string, now time.Time) (Choice, time.Time, error) {
	var e choiceEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return Choice{}, time.Time{}, fmt.Errorf("not a tag choice: %w", err)
	}
	switch {
	case e.Format != choiceFormat:
		return Choice{}, time.Time{}, fmt.Errorf("tag choice of format %q, want %q", e.Format, choiceFormat)
	case e.Repository != repo.Name() || e.Key != key:
		return Choice{}, time.Time{}, fmt.Errorf("tag choice of %q, not of %q under this key", e.Repository, repo.Name())
	case !imageref.ValidTag(e.Choice.Tag) || e.Choice.Policy == "":
		return Choice{}, time.Time{}, fmt.Errorf("tag choice of %s: %q is not a valid tag", repo.Name(), e.Choice.Tag)
	}
	for _, t := range e.Choice.Candidates {
		if !imageref.ValidTag(t) {
			return Choice{}, time.Time{}, fmt.Errorf("tag choice of %s: candidate %q is not a valid tag", repo.Name(), t)
		}
	}
	if _, err := name.NewTag(repo.Name() + ":" + e.Choice.Tag); err != nil {
		return Choice{}, time.Time{}, fmt.Errorf("tag choice of %s: %w", repo.Name(), err)
	}
	if e.Resolved.IsZero() || now.Before(e.Resolved) {
		return Choice{}, time.Time{}, store.ErrCacheEntryExpired
	}
	return e.Choice, e.Resolved, nil
}

// choices are the tag choices in a Cache, valid for a TTL.
type choices struct {
	c   store.Cache
	ttl time.Duration
	now func() time.Time
}

// choiceRead is how the choice for repo under key is read.
func (e *choices) choiceRead(repo name.Repository, key string) store.EntryRead {
	return store.EntryRead{Max: maxChoiceEntry, Check: func(b []byte) error {
		_, err := decodeChoiceEntry(b, repo, key, e.now(), e.ttl)
		return err
	}}
}

// getChoice returns the tag choice cached for repo under key (which names
// the policy, see WithChoiceCache) when one younger than the TTL exists.
func (e *choices) getChoice(ctx context.Context, repo name.Repository, key string) (Choice, bool) {
	b, ok := e.c.Get(ctx, choiceKeyOf(repo, key), e.choiceRead(repo, key))
	if !ok {
		return Choice{}, false
	}
	c, err := decodeChoiceEntry(b, repo, key, e.now(), e.ttl)
	return c, err == nil
}

// recordedChoice returns the tag choice cached for repo under key
// whatever its age, with when it was made: what may stand in for a
// registry that cannot list the tags (WithStaleIfError).
func (e *choices) recordedChoice(ctx context.Context, repo name.Repository, key string) (Choice, time.Time, bool) {
	read := store.EntryRead{Max: maxChoiceEntry, Check: func(b []byte) error {
		_, _, err := decodeRecordedChoice(b, repo, key, e.now())
		return err
	}}
	b, ok := e.c.Get(ctx, choiceKeyOf(repo, key), read)
	if !ok {
		return Choice{}, time.Time{}, false
	}
	c, at, err := decodeRecordedChoice(b, repo, key, e.now())
	return c, at, err == nil
}

// claimChoice is Cache.Claim for the tag choice of repo under key: it
// may wait for the choice of another process that is making it and
// return it with found true; otherwise the caller lists the tags, stores
// its choice with putChoice and then calls release, which is never nil.
// A failure is not shared.
func (e *choices) claimChoice(ctx context.Context, repo name.Repository, key string) (Choice, bool, func()) {
	b, found, release, err := e.c.Claim(ctx, choiceKeyOf(repo, key), e.choiceRead(repo, key))
	done := func() { release(nil) }
	if err != nil || !found {
		// A failure shared under a choice's key is none of ours: the
		// caller lists the tags itself.
		return Choice{}, false, done
	}
	c, err := decodeChoiceEntry(b, repo, key, e.now(), e.ttl)
	if err != nil {
		return Choice{}, false, done
	}
	return c, true, done
}

// putChoice stores the tag choice for repo under key, made now.
func (e *choices) putChoice(ctx context.Context, repo name.Repository, key string, c Choice) error {
	b, err := encodeChoiceEntry(repo, key, c, e.now())
	if err != nil {
		return err
	}
	return e.c.Put(ctx, choiceKeyOf(repo, key), b)
}

// choiceCacheKey returns the cache key of a choice under policy p: the
// resolution's key, the policy and the bound on latest's candidates, as
// JSON, so that no two of them run together.
func choiceCacheKey(key string, p *TagPolicy, maxTags int) string {
	b, _ := json.Marshal([]any{key, p.String(), maxTags}) // strings and an int always encode
	return string(b)
}
