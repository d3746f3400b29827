package pin

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"golang.org/x/sync/errgroup"

	"github.com/digestpin/digestpin/resolve"
)

// BuildTimes tells when the image of a digest was built, as its registry
// says: a zero time with a nil error when it says nothing. The registry
// resolver is one (resolve.Resolver.Built); a Registry of the caller's
// that is one gives the times of the change set too. Implementations
// must be safe for concurrent use.
type BuildTimes interface {
	Built(ctx context.Context, d name.Digest) (time.Time, error)
}

var _ BuildTimes = (*resolve.Resolver)(nil)

// builtJobs bounds the build times asked at once: a change set's moved
// and added images, a few requests each.
const builtJobs = 4

// builtTTL is how long a build time is taken from the cache: what a
// digest names never changes, so as long as the cache keeps it.
const builtTTL = 10 * 365 * 24 * time.Hour

// builtSkew is how far in the future a build time may be and still be
// shown: clocks of build machines drift, a time hours ahead is wrong.
const builtSkew = time.Hour

// builtRecord is a build time as the cache keeps it: as the registry gave
// it, RFC 3339 in UTC, or "" when it gave none.
type builtRecord struct {
	Created string `json:"created"`
}

// addBuilt sets Created on the moved and added images of cs: from the
// cache, else from the registry (Registry if it is a BuildTimes, else the
// chain's registry resolver), each digest once, a few at once, under
// ctx. It asks nothing under Frozen, which asks no registry, nor
// without a previous state. A failure
// leaves the time out, logged; it never fails the Pin.
func (p *Pinner) addBuilt(ctx context.Context, c *chain, cs *ChangeSet) {
	if cs == nil || p.o.Frozen {
		return
	}
	// Without a previous state every image is added, and a first lock
	// file or a first run would cost two GETs an image, which Docker Hub
	// counts as pulls: the times are for what changed.
	if cs.Against == "" {
		return
	}
	src, _ := p.o.Registry.(BuildTimes)
	if c.resolver != nil {
		src = c.resolver
	}
	if src == nil {
		return
	}
	// Each digest once, with the changes it is the digest of.
	byDigest := map[string][]*Change{}
	var order []name.Digest
	for _, list := range [][]Change{cs.Moved, cs.Added} {
		for i := range list {
			ch := &list[i]
			if _, seen := byDigest[ch.Digest]; !seen {
				ref, err := name.ParseReference(ch.Name)
				if err != nil {
					continue
				}
				order = append(order, ref.Context().Digest(ch.Digest))
			}
			byDigest[ch.Digest] = append(byDigest[ch.Digest], ch)
		}
	}
	now := time.Now()
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(builtJobs)
	for _, d := range order {
		g.Go(func() error {
			t, ok := builtTime(ctx, c.built, src, d, c.platform, p.o.logf, p.o.warnf)
			if !ok || !t.After(time.Unix(0, 0)) || t.After(now.Add(builtSkew)) {
				return nil
			}
			t = t.UTC()
			mu.Lock()
			defer mu.Unlock()
			for _, ch := range byDigest[d.DigestStr()] {
				ch.Created = &t
			}
			return nil
		})
	}
	_ = g.Wait()
}

// builtTime returns the build time of d (of platform's image) from
// records, the cache's build times (nil: none), else from src, keeping
// what src said (a time or none) there. ok is false when src failed,
// which logf says; warnf says a failure to keep it.
func builtTime(ctx context.Context, records *resolve.Records, src BuildTimes, d name.Digest, platform string, logf, warnf func(string, ...any)) (time.Time, bool) {
	key := builtKey(d, platform)
	if records != nil {
		if b, ok := records.Get(ctx, key); ok {
			var rec builtRecord
			if json.Unmarshal(b, &rec) == nil {
				if rec.Created == "" {
					return time.Time{}, true
				}
				if t, err := time.Parse(time.RFC3339Nano, rec.Created); err == nil {
					return t, true
				}
			}
		}
	}
	t, err := src.Built(ctx, d)
	if err != nil {
		logf("%v; the change set shows no build time", err)
		return time.Time{}, false
	}
	if records != nil {
		rec := builtRecord{}
		if !t.IsZero() {
			rec.Created = t.UTC().Format(time.RFC3339Nano)
		}
		b, err := json.Marshal(rec)
		if err == nil {
			err = records.Put(ctx, key, b)
		}
		if err != nil {
			warnf("caching the build time of %s: %v", d, err)
		}
	}
	return t, true
}

// builtKey keys the build time of d in the cache: the digest alone names
// the manifest and its config wherever they are, and the platform names
// the image of an index the time is of.
func builtKey(d name.Digest, platform string) string {
	return "built\n" + d.DigestStr() + "\n" + platform
}

// builtLayout is how prose shows a build time: to the minute, in UTC.
const builtLayout = "2006-01-02 15:04 UTC"

// builtNote is " (built 2026-12-01 14:03 UTC)" when the registry said
// when the image of c was built (Change.Created), else "".
func builtNote(c Change) string {
	if c.Created == nil {
		return ""
	}
	return " (built " + c.Created.UTC().Format(builtLayout) + ")"
}

// builtCell is the build time of c on a line of its own in a table
// cell, "<br>built 2026-12-01 14:03 UTC", or "".
func builtCell(c Change) string {
	if c.Created == nil {
		return ""
	}
	return "<br>built " + c.Created.UTC().Format(builtLayout)
}
