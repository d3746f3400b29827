package pin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/imageglob"
	"github.com/digestpin/digestpin/internal/imageref"
	"github.com/digestpin/digestpin/internal/textlist"
	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
)

// MinAges are waiting periods for new digests, by image (Options.MinAge):
// a default for every image, and periods for the images of repositories
// that match a glob, the most specific glob winning. The zero value, and
// nil, hold nothing back.
type MinAges struct {
	def    time.Duration
	hasDef bool
	globs  []globAge
}

// globAge is the waiting period of the images a glob matches.
type globAge struct {
	glob imageglob.Glob
	d    time.Duration
}

// Add parses spec and adds it: "DURATION" (Go's syntax: 24h, 90m) is the
// period of every image that no glob matches, "IMAGE-GLOB=DURATION" the
// period of the images of repositories the glob matches (as --verify's:
// "*" within a path segment, "**" across them, Docker Hub's spellings as
// one). 0 holds nothing back: "ghcr.io/acme/**=0" exempts a team's own
// images from a default. A negative period, a default given twice and a
// glob given twice are errors.
func (m *MinAges) Add(spec string) error {
	glob, ds, hasGlob := strings.Cut(spec, "=")
	if !hasGlob {
		glob, ds = "", spec
	}
	d, err := time.ParseDuration(ds)
	if err != nil {
		return fmt.Errorf("%q: want DURATION or IMAGE-GLOB=DURATION, e.g. 24h or ghcr.io/acme/**=0: %q is no duration (Go's syntax: 72h, 90m, 1h30m)", spec, ds)
	}
	if d < 0 {
		return fmt.Errorf("%q: a waiting period must not be negative", spec)
	}
	if !hasGlob {
		if m.hasDef {
			return fmt.Errorf("%q: the default waiting period is %s already; give one DURATION, and IMAGE-GLOB=DURATION for others", spec, m.def)
		}
		m.def, m.hasDef = d, true
		return nil
	}
	g, err := imageglob.Compile(glob)
	if err != nil {
		return fmt.Errorf("%q: %w", spec, err)
	}
	for _, ga := range m.globs {
		if ga.glob.Same(g) {
			return fmt.Errorf("%q: %s has a waiting period already (%s=%s)", spec, glob, ga.glob, ga.d)
		}
	}
	m.globs = append(m.globs, globAge{glob: g, d: d})
	return nil
}

// with returns m's periods with over's in place of those of the same
// glob, and over's default in place of m's.
func (m *MinAges) with(over *MinAges) *MinAges {
	out := &MinAges{def: m.def, hasDef: m.hasDef, globs: slices.Clone(m.globs)}
	if over == nil {
		return out
	}
	if over.hasDef {
		out.def, out.hasDef = over.def, true
	}
	for _, ga := range over.globs {
		if i := slices.IndexFunc(out.globs, func(o globAge) bool { return o.glob.Same(ga.glob) }); i >= 0 {
			out.globs[i] = ga
		} else {
			out.globs = append(out.globs, ga)
		}
	}
	return out
}

// For returns the waiting period of the images of repo: that of the
// most specific glob that matches it, else the default.
func (m *MinAges) For(repo name.Repository) time.Duration {
	if m == nil {
		return 0
	}
	best, d := imageglob.Glob{}, m.def
	for _, ga := range m.globs {
		if ga.glob.Match(repo) && ga.glob.MoreSpecific(best) {
			best, d = ga.glob, ga.d
		}
	}
	return d
}

// Enabled reports whether any image may wait: a period above 0.
func (m *MinAges) Enabled() bool {
	if m == nil {
		return false
	}
	return m.def > 0 || slices.ContainsFunc(m.globs, func(ga globAge) bool { return ga.d > 0 })
}

// Pending is a newer digest of an image that a waiting period
// (Options.MinAge) holds back: the digest before it stays pinned until
// Until.
type Pending struct {
	// Digest is the new digest, the one that waits.
	Digest string `json:"digest"`
	// Tag is the tag a tag policy chose, whose digest Digest is; absent
	// for an image that follows its own tag.
	Tag string `json:"tag,omitempty"`
	// MediaType is what Digest is, when the registry said.
	MediaType string `json:"mediaType,omitempty"`
	// Since is when Digest was first seen, in UTC.
	Since time.Time `json:"since"`
	// Created is when the image of Digest was built, as its registry
	// says, when the period is counted from it (Options.MinAgeCreated).
	Created *time.Time `json:"created,omitempty"`
	// Until is when the period ends: the first run after it pins Digest.
	Until time.Time `json:"until"`
}

// heldRecord is what the cache keeps of a reference under a waiting
// period: the digest that renders pin, and the newer one that waits.
type heldRecord struct {
	Digest    string       `json:"digest"`
	MediaType string       `json:"mediaType,omitempty"`
	Tag       string       `json:"tag,omitempty"`
	Pending   *heldPending `json:"pending,omitempty"`
}

// heldPending is the digest that waits, as the cache keeps it.
type heldPending struct {
	Digest    string    `json:"digest"`
	MediaType string    `json:"mediaType,omitempty"`
	Tag       string    `json:"tag,omitempty"`
	Since     time.Time `json:"since"`
}

// heldTTL is how long a held record is taken from the cache: it is a
// state, not a finding, so as long as the cache keeps it (Records.Last
// reads it at any age).
const heldTTL = builtTTL

// heldRefresh is how old a held record may get before a run that
// changes nothing writes it again: a shared cache (Redis) drops entries
// a while after their last write.
const heldRefresh = 24 * time.Hour

// held is the previous state of a reference under a waiting period: the
// digest pinned before this run, and the one that waits, if any.
type held struct {
	digest    v1.Hash
	tag       string
	mediaType string
	pending   *heldDigest
	// stored is when the cache's record was written; zero when the
	// state came from a lock file, or the cache has no record.
	stored time.Time
	cached bool
}

// heldDigest is a digest that waits, first seen at since.
type heldDigest struct {
	digest    v1.Hash
	tag       string
	mediaType string
	since     time.Time
}

// minAgeLayer holds back a digest that is new for a reference until it
// has been seen for the reference's waiting period (Options.MinAge),
// answering with the digest pinned before it (source resolution.Held) in
// the meantime. The digest pinned before, and when the new one was first
// seen, come from the lock file (the one read, or the one the run
// replaces, with its pending entries) and from the cache (records that
// every process sharing it reads, a Redis for Argo CD's replicas); the
// run writes both: the cache as it resolves, the lock file with the
// others (pendings). A reference seen for the first time has nothing to
// keep: it is pinned at once, and said so.
type minAgeLayer struct {
	chain *chain
	next  resolution.Resolver
	ages  *MinAges
	// records keep the held state in the cache under key; nil without
	// a cache.
	records *resolve.Records
	key     resolve.CacheKeyFunc
	// created, when the period counts from the build time, returns it.
	created func(ctx context.Context, d name.Digest) (time.Time, bool)
	now     func() time.Time
	warnf   func(format string, args ...any)
	logf    func(format string, args ...any)

	mu      sync.Mutex
	waiting map[string]Pending // by waitKey
	// before are the digests pinned before the run, by waitKey: what
	// the run compares with against the cache, whose resolutions are the
	// registry's answers, not what was pinned.
	before map[string]held
	first  map[string]string // references seen for the first time, by waitKey
	warned bool              // a store failure was warned about
}

// waitKey keys what waits by reference name and tag policy, as the lock
// file does.
func waitKey(ref, policy string) string { return ref + "\n" + policy }

// Resolve implements resolution.Resolver.
func (l *minAgeLayer) Resolve(ctx context.Context, ref name.Reference) (resolution.Resolution, error) {
	res, err := l.next.Resolve(ctx, ref)
	if err != nil {
		return res, err
	}
	if _, ok := ref.(name.Digest); ok || res.Source == resolution.Pinned {
		return res, nil
	}
	period := l.ages.For(ref.Context())
	if period <= 0 {
		return res, nil
	}
	policy := l.chain.policyOf(ref)
	prev, ok := l.previous(ctx, ref, policy)
	now := l.now()
	if ok {
		l.mu.Lock()
		l.before[waitKey(ref.Name(), policy)] = prev
		l.mu.Unlock()
	}
	if !ok {
		l.mu.Lock()
		l.first[waitKey(ref.Name(), policy)] = ref.String()
		l.mu.Unlock()
		l.store(ctx, ref, policy, heldRecord{Digest: res.Digest.String(), MediaType: res.MediaType, Tag: res.Tag})
		return res, nil
	}
	if prev.digest == res.Digest {
		if prev.pending != nil || !prev.cached || now.Sub(prev.stored) >= heldRefresh || prev.stored.After(now) {
			l.store(ctx, ref, policy, heldRecord{Digest: res.Digest.String(), MediaType: res.MediaType, Tag: res.Tag})
		}
		return res, nil
	}
	// A new digest: first seen now, unless it is the one that waits
	// already. A time in the future (a clock that went back) is not
	// trusted: the wait starts again rather than end early.
	since := now
	if p := prev.pending; p != nil && p.digest == res.Digest && !p.since.After(now) {
		since = p.since
	}
	since = since.UTC().Truncate(time.Second)
	pending := Pending{Digest: res.Digest.String(), Tag: res.Tag, MediaType: res.MediaType, Since: since, Until: since.Add(period)}
	if l.created != nil {
		if t, ok := l.created(ctx, ref.Context().Digest(res.Digest.String())); ok {
			t = t.UTC()
			pending.Created, pending.Until = &t, t.Add(period)
		}
	}
	if !now.Before(pending.Until) {
		l.logf("%s: %s waited %s (%s): pinned", ref, res.Digest, resolution.OptionName(ctx, "MinAge"), period)
		l.store(ctx, ref, policy, heldRecord{Digest: res.Digest.String(), MediaType: res.MediaType, Tag: res.Tag})
		return res, nil
	}
	l.mu.Lock()
	l.waiting[waitKey(ref.Name(), policy)] = pending
	l.mu.Unlock()
	if p := prev.pending; p == nil || p.digest != res.Digest || !p.since.Equal(since) || !prev.cached || now.Sub(prev.stored) >= heldRefresh {
		l.store(ctx, ref, policy, heldRecord{Digest: prev.digest.String(), MediaType: prev.mediaType, Tag: prev.tag, Pending: &heldPending{Digest: pending.Digest, MediaType: pending.MediaType, Tag: pending.Tag, Since: since}})
	}
	return resolution.Resolution{Digest: prev.digest, Tag: prev.tag, MediaType: prev.mediaType, Source: resolution.Held}, nil
}

// previous returns the state of ref (under policy) before the run: the
// lock file's entry, when it has one (the lock file read, else the one
// the run replaces), with the cache's pending digest when the lock file
// knows none or a later first sighting; else the cache's record. ok is
// false when neither knows the reference.
func (l *minAgeLayer) previous(ctx context.Context, ref name.Reference, policy string) (held, bool) {
	cached, inCache := l.cached(ctx, ref, policy)
	lock := l.chain.lock
	if lock == nil {
		lock, _ = l.chain.replacedLock()
	}
	if lock == nil {
		return cached, inCache
	}
	res, ok := l.chain.locked(lock, ref, resolution.Lock)
	if !ok {
		return cached, inCache
	}
	h := held{digest: res.Digest, tag: res.Tag, mediaType: res.MediaType, stored: cached.stored, cached: inCache}
	if p := lock.Pending(ref, l.chain.platform, policy); p != nil {
		if d, err := v1.NewHash(p.Digest); err == nil {
			h.pending = &heldDigest{digest: d, tag: p.Tag, mediaType: p.MediaType, since: p.Since}
		}
	}
	// The cache may have seen the new digest first (an Argo CD replica,
	// before the CI step that writes the lock file).
	if c := cached.pending; inCache && cached.digest == h.digest && c != nil {
		if h.pending == nil || (h.pending.digest == c.digest && c.since.Before(h.pending.since)) {
			h.pending = c
		}
	}
	if !inCache || cached.digest != h.digest || !samePending(cached.pending, h.pending) {
		// The cache's record is not this state: write it.
		h.cached = false
	}
	return h, true
}

// samePending reports whether a and b are the same pending digest, or
// both none.
func samePending(a, b *heldDigest) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.digest == b.digest && a.tag == b.tag && a.since.Equal(b.since)
}

// recordKey keys the held record of ref under policy in the cache: the
// reference, the policy, the waiting period and the resolution cache's
// key (platform, mirrors, credentials), as the resolutions are keyed. A
// render under a shorter period (another Application's configuration
// file, on the same Redis) keeps a state of its own: the new digest it
// pins once its period is over must not end a longer period's wait. ok is false
// without a cache, or for a reference the cache does not key.
func (l *minAgeLayer) recordKey(ctx context.Context, ref name.Reference, policy string) (string, bool) {
	if l.records == nil {
		return "", false
	}
	key, ok, err := l.key(ctx, ref)
	if err != nil || !ok {
		return "", false
	}
	return "held\n" + ref.Name() + "\n" + policy + "\n" + l.ages.For(ref.Context()).String() + "\n" + key, true
}

// cached returns the cache's held record of ref under policy, if it has
// one that reads as one.
func (l *minAgeLayer) cached(ctx context.Context, ref name.Reference, policy string) (held, bool) {
	key, ok := l.recordKey(ctx, ref, policy)
	if !ok {
		return held{}, false
	}
	b, stored, ok := l.records.Last(ctx, key)
	if !ok {
		return held{}, false
	}
	h, err := decodeHeld(b)
	if err != nil {
		l.warnf("%s: ignoring the cache's record of its waiting period (%s): %v", ref, resolution.OptionName(ctx, "MinAge"), err)
		return held{}, false
	}
	h.stored, h.cached = stored, true
	return h, true
}

// decodeHeld reads a held record, checking every field.
func decodeHeld(b []byte) (held, error) {
	var r heldRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return held{}, fmt.Errorf("not a record of a waiting period: %w", err)
	}
	d, err := checkHeld(r.Digest, r.MediaType, r.Tag)
	if err != nil {
		return held{}, err
	}
	h := held{digest: d, tag: r.Tag, mediaType: r.MediaType}
	if p := r.Pending; p != nil {
		pd, err := checkHeld(p.Digest, p.MediaType, p.Tag)
		switch {
		case err != nil:
			return held{}, fmt.Errorf("pending: %w", err)
		case p.Since.IsZero():
			return held{}, errors.New("pending digest without a time first seen")
		case pd == d:
			return held{}, errors.New("pending digest is the held one")
		}
		h.pending = &heldDigest{digest: pd, tag: p.Tag, mediaType: p.MediaType, since: p.Since}
	}
	return h, nil
}

// checkHeld checks the digest, media type and tag of a held record.
func checkHeld(digest, mediaType, tag string) (v1.Hash, error) {
	d, err := v1.NewHash(digest)
	switch {
	case err != nil:
		return v1.Hash{}, fmt.Errorf("digest %q: %w", digest, err)
	case mediaType != "" && !resolution.ManifestMediaType(mediaType):
		return v1.Hash{}, fmt.Errorf("media type %q is no image manifest or index", mediaType)
	case tag != "" && !imageref.ValidTag(tag):
		return v1.Hash{}, fmt.Errorf("tag %q: want %s", tag, imageref.TagRule)
	}
	return d, nil
}

// store writes rec as the held record of ref under policy; a failure is
// warned about once, and never fails the run: the lock file, when there
// is one, keeps the state too.
func (l *minAgeLayer) store(ctx context.Context, ref name.Reference, policy string, rec heldRecord) {
	key, ok := l.recordKey(ctx, ref, policy)
	if !ok {
		return
	}
	b, err := json.Marshal(rec)
	if err == nil {
		err = l.records.Put(ctx, key, b)
	}
	if err == nil {
		return
	}
	l.mu.Lock()
	warned := l.warned
	l.warned = true
	l.mu.Unlock()
	if !warned {
		l.warnf("keeping the state of %s's waiting period (%s) in the cache: %v", ref, resolution.OptionName(ctx, "MinAge"), err)
	}
}

// pinnedBefore returns the digest pinned before the run for the image
// name under policy, and the tag a policy had chosen, when a waiting
// period knew it.
func (l *minAgeLayer) pinnedBefore(name, policy string) (v1.Hash, string, bool) {
	if l == nil {
		return v1.Hash{}, "", false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.before[waitKey(name, policy)]
	return h.digest, h.tag, ok
}

// waits returns what waits, by waitKey.
func (l *minAgeLayer) waits() map[string]Pending {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

// say warns about what waits, until when, and about the references
// seen for the first time, which were pinned at once: a line each, with
// the first few images.
func (l *minAgeLayer) say(ctx context.Context) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	flag := resolution.OptionName(ctx, "MinAge")
	if len(l.waiting) > 0 {
		keys := slices.Sorted(maps.Keys(l.waiting))
		var items []string
		for _, k := range keys {
			ref, _, _ := strings.Cut(k, "\n")
			w := l.waiting[k]
			items = append(items, fmt.Sprintf("%s (%s until %s)", ref, ShortDigest(w.Digest), w.Until.Format(builtLayout)))
		}
		l.warnf("%s for %s: the digest pinned before stays until then: %s", plural(len(keys), "new digest waits", "new digests wait"), flag, listed(items))
	}
	if len(l.first) > 0 {
		refs := slices.Sorted(maps.Values(l.first))
		l.warnf("%s seen for the first time, pinned at once: %s has no earlier digest of theirs to keep: %s", plural(len(refs), "image", "images"), flag, listed(refs))
	}
}

// sayMax is how many images a line of say names.
const sayMax = 5

// listed lists at most sayMax of items and, when there are more, where
// to find them all.
func listed(items []string) string {
	s := textlist.Some(items, sayMax)
	if len(items) > sayMax {
		s += " (the report lists every image)"
	}
	return s
}

// plural is "1 one" or "N many".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// policyOf returns the tag policy of ref's repository as the lock file
// writes it, or "".
func (c *chain) policyOf(ref name.Reference) string {
	if p := c.tags.For(ref); p != nil {
		return p.String()
	}
	return ""
}

// toLockPending is the lock file's pending entry of p.
func toLockPending(p Pending) *lockfile.Pending {
	return &lockfile.Pending{Digest: p.Digest, MediaType: p.MediaType, Tag: p.Tag, Since: p.Since}
}

var _ resolution.Resolver = (*minAgeLayer)(nil)
