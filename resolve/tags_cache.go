package resolve

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/atomicfile"
)

// choiceFormat names the format of the cache entries of tag choices,
// which share the Cache's folder and TTL with resolutions; their file
// names are hashes of another format, so the two never meet.
const choiceFormat = "digestpin-tag-choice-v1"

// choiceEntry is the content of one cached tag choice.
type choiceEntry struct {
	Format     string    `json:"format"`
	Repository string    `json:"repository"`
	Key        string    `json:"key"`
	Choice     Choice    `json:"choice"`
	Resolved   time.Time `json:"resolved"`
}

// choicePath returns the file of the choice for repo under key.
func (c *DirCache) choicePath(repo name.Repository, key string) string {
	sum := sha256.Sum256([]byte(choiceFormat + "\n" + repo.Name() + "\n" + key))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:])+".json")
}

// getChoice returns the cached choice for repo under key (which holds
// the policy) when one younger than the TTL exists; like Get, anything
// else is a miss.
func (c *DirCache) getChoice(repo name.Repository, key string) (Choice, bool) {
	b, err := readSmallFile(c.choicePath(repo, key), maxCacheEntry, false)
	if err != nil {
		return Choice{}, false
	}
	var e choiceEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return Choice{}, false
	}
	if e.Format != choiceFormat || e.Repository != repo.Name() || e.Key != key || e.Choice.Tag == "" {
		return Choice{}, false
	}
	if age := c.now().Sub(e.Resolved); age < 0 || age >= c.ttl {
		return Choice{}, false
	}
	if _, err := name.NewTag(repo.Name() + ":" + e.Choice.Tag); err != nil {
		return Choice{}, false
	}
	return e.Choice, true
}

// putChoice stores the choice for repo under key, made now.
func (c *DirCache) putChoice(repo name.Repository, key string, ch Choice) error {
	b, err := json.Marshal(choiceEntry{Format: choiceFormat, Repository: repo.Name(), Key: key, Choice: ch, Resolved: c.now().UTC()})
	if err != nil {
		return fmt.Errorf("encoding the tag choice of %s: %w", repo.Name(), err)
	}
	if err := atomicfile.WriteFile(c.choicePath(repo, key), b, 0o644); err != nil {
		return fmt.Errorf("writing the tag choice of %s: %w", repo.Name(), err)
	}
	return nil
}
