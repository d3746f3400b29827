package resolve

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/atomicfile"
	"github.com/digestpin/digestpin/internal/imageref"
)

// choiceFormat names the format of the cache entries of tag choices,
// which share the Cache and its TTL with resolutions; their IDs are hashes
// of another format, so the two never meet.
const choiceFormat = "digestpin-tag-choice-v1"

// MaxChoiceEntry caps what a Cache reads of one tag choice: its
// candidates may be every matching tag of a repository.
const MaxChoiceEntry = 1 << 20

// choiceEntry is the content of one cached tag choice.
type choiceEntry struct {
	Format     string    `json:"format"`
	Repository string    `json:"repository"`
	Key        string    `json:"key"`
	Choice     Choice    `json:"choice"`
	Resolved   time.Time `json:"resolved"`
}

// ChoiceEntryID names the choice for repo under key, for every Cache: a
// hex SHA-256 of the format, the repository and the key.
func ChoiceEntryID(repo name.Repository, key string) string {
	sum := sha256.Sum256([]byte(choiceFormat + "\n" + repo.Name() + "\n" + key))
	return hex.EncodeToString(sum[:])
}

// EncodeChoiceEntry returns the entry that says the policy in key chose
// c for repo at resolved, as JSON. An entry larger than MaxChoiceEntry is
// an error: no Cache would read it back.
func EncodeChoiceEntry(repo name.Repository, key string, c Choice, resolved time.Time) ([]byte, error) {
	b, err := json.Marshal(choiceEntry{Format: choiceFormat, Repository: repo.Name(), Key: key, Choice: c, Resolved: resolved.UTC()})
	if err != nil {
		return nil, fmt.Errorf("encoding the tag choice of %s: %w", repo.Name(), err)
	}
	if len(b) > MaxChoiceEntry {
		return nil, fmt.Errorf("encoding the tag choice of %s: %d bytes, more than %d", repo.Name(), len(b), MaxChoiceEntry)
	}
	return b, nil
}

// DecodeChoiceEntry returns the choice of the entry b, written by
// EncodeChoiceEntry for repo under key, when it is younger than ttl at
// now. An entry too old (or from the future) is ErrCacheEntryExpired;
// anything else that is not a choice of repo under key in this format, or
// whose tag or candidates are not valid tags, is another error, which
// says why.
func DecodeChoiceEntry(b []byte, repo name.Repository, key string, now time.Time, ttl time.Duration) (Choice, error) {
	var e choiceEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return Choice{}, fmt.Errorf("not a tag choice: %w", err)
	}
	switch {
	case e.Format != choiceFormat:
		return Choice{}, fmt.Errorf("tag choice of format %q, want %q", e.Format, choiceFormat)
	case e.Repository != repo.Name() || e.Key != key:
		return Choice{}, fmt.Errorf("tag choice of %q, not of %q under this key", e.Repository, repo.Name())
	case !imageref.ValidTag(e.Choice.Tag) || e.Choice.Policy == "":
		return Choice{}, fmt.Errorf("tag choice of %s: %q is not a valid tag", repo.Name(), e.Choice.Tag)
	}
	for _, t := range e.Choice.Candidates {
		if !imageref.ValidTag(t) {
			return Choice{}, fmt.Errorf("tag choice of %s: candidate %q is not a valid tag", repo.Name(), t)
		}
	}
	if _, err := name.NewTag(repo.Name() + ":" + e.Choice.Tag); err != nil {
		return Choice{}, fmt.Errorf("tag choice of %s: %w", repo.Name(), err)
	}
	if age := now.Sub(e.Resolved); age < 0 || age >= ttl {
		return Choice{}, ErrCacheEntryExpired
	}
	return e.Choice, nil
}

// choicePath returns the file of the choice for repo under key.
func (c *DirCache) choicePath(repo name.Repository, key string) string {
	return filepath.Join(c.dir, ChoiceEntryID(repo, key)+".json")
}

// GetChoice implements Cache. Like Get, anything but a valid choice
// younger than the TTL is a miss.
func (c *DirCache) GetChoice(_ context.Context, repo name.Repository, key string) (Choice, bool) {
	b, err := readSmallFile(c.choicePath(repo, key), MaxChoiceEntry, false)
	if err != nil {
		return Choice{}, false
	}
	ch, err := DecodeChoiceEntry(b, repo, key, c.now(), c.ttl)
	if err != nil {
		return Choice{}, false
	}
	return ch, true
}

// PutChoice implements Cache.
func (c *DirCache) PutChoice(_ context.Context, repo name.Repository, key string, ch Choice) error {
	b, err := EncodeChoiceEntry(repo, key, ch, c.now())
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(c.choicePath(repo, key), b, 0o644); err != nil {
		return fmt.Errorf("writing the tag choice of %s: %w", repo.Name(), err)
	}
	return nil
}

// choiceCacheKey returns the cache key of a choice under policy p: the
// resolution's key, the policy and the bound on latest's candidates, as
// JSON, so that no two of them run together.
func choiceCacheKey(key string, p *TagPolicy, maxTags int) string {
	b, _ := json.Marshal([]any{key, p.String(), maxTags}) // strings and an int always encode
	return string(b)
}
