package pin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/digestpin/digestpin/internal/atomicfile"
	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
)

// chain is the resolver chain of one Pin and what its layers noticed.
type chain struct {
	resolution.Resolver
	lock     *lockfile.Lock // nil without Options.Lock
	platform string
	missing  notes // Frozen: references not in the lock file
	moved    notes // Check: how the registry differs from the lock file

	// resolver is the registry resolver, nil with Options.Registry or
	// Frozen.
	resolver *resolve.Resolver
	// writeLock is Options.WriteLock; replaced is the file as it was
	// before the run (replacedLock).
	writeLock string
	replaced  struct {
		once sync.Once
		lock *lockfile.Lock
		err  error
	}
	// mirrorOnly is the registry resolver when it is mirror-only, under
	// Frozen too: the mirrors must hold what the lock file pins.
	mirrorOnly *resolve.Resolver
	// asked are the references the render asked the chain about.
	askedMu sync.Mutex
	asked   []name.Reference
	// progress counts the resolutions; nil without Options.Progress.
	progress *progress

	// records keeps signature verifications beside the resolutions, in
	// the Pin's cache; nil without one (and under Frozen and Check, which
	// consult no cache).
	records *resolve.Records
	// cache is the layer of the resolution cache, nil without one (and
	// under Frozen and Check); it says what the cache held before the run.
	cache *resolve.CachingResolver
	// built keeps the build times of digests (BuildTimes) in the same
	// cache, for as long as it keeps them; nil without one.
	built *resolve.Records

	// minAge holds back new digests (Options.MinAge); nil without.
	minAge *minAgeLayer

	// The tag policies of the Pin, and the layer that applies them.
	tags   *tagpolicy.TagPolicies    // nil: none
	policy *tagpolicy.PolicyResolver // nil without TagPolicies or under Frozen
}

// newChain assembles the resolvers of one Pin:
//
//	Lock + Frozen   lock file
//	Lock + Check    registry, compared with the lock file
//	Lock            lock file, then cache, then registry
//	(none)          cache, then registry
//
// The cache (Options.Cache, or a DirCache) is there only with a
// CacheTTL. Each layer is a
// resolution.Resolver; nothing downstream needs to know which.
func newChain(o *Options) (*chain, error) {
	c := &chain{platform: o.platform(), tags: o.TagPolicies, writeLock: o.WriteLock}
	if o.Progress != nil {
		c.progress = &progress{report: o.Progress}
	}
	if o.Lock != "" {
		l, err := lockfile.Read(o.Lock)
		if err != nil {
			return nil, err
		}
		c.lock = l
	}
	if o.Frozen {
		// A resolver that asks nothing unless it is mirror-only; one
		// that cannot be made is not needed to read a lock file.
		if r, err := o.registryResolver(); o.Registry == nil && err == nil && r.MirrorOnly() {
			c.mirrorOnly = r
		}
		c.Resolver = &lockLayer{chain: c}
		return c, nil
	}
	// The cache key holds everything besides the reference that decides
	// the registry's answer: for a registry resolver, the platform, the
	// mirrors, mirror-only, insecure registries and whose credentials are
	// asked (Resolver.CacheKey); a Registry of the caller's answers by
	// reference and platform alone.
	registry := o.Registry
	key := func(context.Context, name.Reference) (string, bool, error) {
		return "platform " + c.platform, true, nil
	}
	// The cache, made once: the registry resolver keeps what it learns of
	// registries' auth there too (resolve.WithAuthCache).
	var cache resolve.Cache
	if o.CacheTTL > 0 && !o.Check {
		var err error
		if cache, err = o.cache(); err != nil {
			return nil, err
		}
	}
	if registry == nil {
		r, err := o.registryResolver(resolve.WithAuthCache(cache))
		if err != nil {
			return nil, err
		}
		registry, key = r, r.CacheKey
		c.resolver = r
		if r.MirrorOnly() {
			c.mirrorOnly = r
		}
	}
	// A tag policy lists tags through the registry resolver (or a
	// Registry of the caller's that can), then resolves the chosen tag
	// through the layers below it.
	var tagSource tagpolicy.TagSource
	if c.tags.Len() > 0 {
		ts, ok := registry.(tagpolicy.TagSource)
		if !ok {
			return nil, &OptionError{Field: "TagPolicies", Reason: "needs a Registry that lists tags (a tagpolicy.TagSource)"}
		}
		tagSource = ts
	}
	if o.Check {
		next, err := c.withPolicies(o, registry, tagSource)
		if err != nil {
			return nil, err
		}
		next = c.withMinAge(o, next, nil, key)
		c.Resolver = &checkLayer{chain: c, next: next}
		return c, nil
	}
	live := registry
	var (
		popts []tagpolicy.PolicyOption
		held  *resolve.Records
	)
	if o.CacheTTL > 0 {
		c.cache = resolve.NewCachingResolver(registry, cache, o.CacheTTL, key, o.warnf, resolve.StaleIfError(o.StaleIfError))
		live = c.cache
		records, err := resolve.NewRecords(cache, o.CacheTTL)
		if err != nil {
			return nil, err
		}
		c.records = records
		if c.built, err = resolve.NewRecords(cache, builtTTL); err != nil {
			return nil, err
		}
		popts = append(popts, tagpolicy.WithChoiceCache(cache, o.CacheTTL, key, o.warnf), tagpolicy.WithStaleIfError(o.StaleIfError, resolve.Unavailable))
		if o.MinAge.Enabled() {
			if held, err = resolve.NewRecords(cache, heldTTL); err != nil {
				return nil, err
			}
		}
	}
	live, err := c.withPolicies(o, live, tagSource, popts...)
	if err != nil {
		return nil, err
	}
	if c.lock != nil {
		c.Resolver = &lockLayer{chain: c, next: c.withMinAge(o, live, held, key)}
		return c, nil
	}
	if o.StaleIfError > 0 && o.WriteLock != "" {
		live = &staleLockLayer{chain: c, next: live, file: o.WriteLock, warnf: o.warnf}
	}
	c.Resolver = c.withMinAge(o, live, held, key)
	return c, nil
}

// withMinAge puts the waiting periods of o (MinAge) in front of next,
// keeping their state in records (nil: the lock file only) under the
// resolution cache's key; without a period it returns next.
func (c *chain) withMinAge(o *Options, next resolution.Resolver, records *resolve.Records, key resolve.CacheKeyFunc) resolution.Resolver {
	if !o.MinAge.Enabled() {
		return next
	}
	l := &minAgeLayer{chain: c, next: next, ages: o.MinAge, records: records, key: key, now: time.Now, warnf: o.warnf, logf: o.logf, waiting: map[string]Pending{}, first: map[string]string{}, before: map[string]held{}}
	if o.now != nil {
		l.now = o.now
	}
	if o.MinAgeCreated {
		src, _ := o.Registry.(BuildTimes)
		if c.resolver != nil {
			src = c.resolver
		}
		if src != nil {
			l.created = func(ctx context.Context, d name.Digest) (time.Time, bool) {
				t, ok := builtTime(ctx, c.built, src, d, c.platform, o.logf, o.warnf)
				if !ok || !t.After(time.Unix(0, 0)) || t.After(l.now().Add(builtSkew)) {
					return time.Time{}, false
				}
				return t, true
			}
		}
	}
	c.minAge = l
	return l
}

// replacedLock is the lock file the run replaces (Options.WriteLock as it
// was, without a Lock file), read once, when first asked for: nil when
// there is none (a first lock file, missing or empty), or when it cannot
// be read (another version's), which err says; the run replaces it all
// the same.
func (c *chain) replacedLock() (*lockfile.Lock, error) {
	c.replaced.once.Do(func() {
		if c.writeLock == "" || c.lock != nil {
			return
		}
		if fi, err := os.Stat(c.writeLock); err != nil || fi.Size() == 0 {
			return
		}
		c.replaced.lock, c.replaced.err = lockfile.Read(c.writeLock)
	})
	return c.replaced.lock, c.replaced.err
}

// staleLockLayer answers with the digest of the lock file that the run
// replaces when the registry cannot answer (resolve.Unavailable) and no
// cache stood in: a CI step that records the lock file during an outage
// records what it holds, with a warning, rather than failing. The lock
// file does not say when its digests were resolved, so no age bounds it.
type staleLockLayer struct {
	chain  *chain
	next   resolution.Resolver
	file   string
	warnf  func(format string, args ...any)
	warned sync.Map
}

// Resolve implements resolution.Resolver.
func (l *staleLockLayer) Resolve(ctx context.Context, ref name.Reference) (resolution.Resolution, error) {
	res, err := l.next.Resolve(ctx, ref)
	if err == nil || ctx.Err() != nil || !resolve.Unavailable(err) {
		return res, err
	}
	lock, _ := l.chain.replacedLock()
	if lock == nil {
		return res, err
	}
	stale, ok := l.chain.locked(lock, ref, resolution.Stale)
	if !ok {
		return res, err
	}
	if _, warned := l.warned.LoadOrStore(ref.String(), true); !warned {
		l.warnf("%s: using %s from %s, the lock file this run replaces, since the registry did not answer (%s; a lock file does not say how old its digests are): %v", ref, stale.Digest, l.file, resolution.OptionName(ctx, "StaleIfError"), err)
	}
	return stale, nil
}

// registryResolver returns the registry resolver of ResolveOptions,
// resolving for Platform, with more options.
func (o *Options) registryResolver(more ...resolve.Option) (*resolve.Resolver, error) {
	// The run's warnings first: ResolveOptions may set their own.
	opts := append(append([]resolve.Option{resolve.WithWarnf(o.warnf)}, more...), o.ResolveOptions...)
	if o.Platform != nil {
		opts = append(opts[:len(opts):len(opts)], resolve.WithPlatform(o.Platform))
	}
	return resolve.New(opts...)
}

// cache returns the resolution cache: Cache, else a DirCache in CacheDir
// (resolve.DefaultCacheDir when "").
func (o *Options) cache() (resolve.Cache, error) {
	if o.Cache != nil {
		return o.Cache, nil
	}
	dir := o.CacheDir
	if dir == "" {
		d, err := resolve.DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	dc, err := resolve.NewDirCache(dir)
	if err != nil {
		return nil, err
	}
	o.logf("resolution cache in %s, TTL %s", dir, o.CacheTTL)
	return dc, nil
}

// verdict is what the lock layers noticed, as the error that fails the
// Pin: references missing from the lock file under Frozen (with
// KeepUnresolved the renderer kept them, but Frozen still fails), or
// where the registry differs from it under Check.
func (c *chain) verdict(ctx context.Context, lockPath string) error {
	if missing := c.missing.sorted(); len(missing) > 0 {
		return fmt.Errorf("%d image(s) not in lock file %s (%s asks no registry): %s", len(missing), lockPath, resolution.OptionName(ctx, "Frozen"), strings.Join(missing, ", "))
	}
	if moved := c.moved.sorted(); len(moved) > 0 {
		errs := []error{fmt.Errorf("the registry differs from lock file %s for %d image(s)", lockPath, len(moved))}
		for _, m := range moved {
			errs = append(errs, errors.New("  "+m))
		}
		return &DiffersError{err: errors.Join(errs...)}
	}
	return nil
}

// ErrLockDiffers is what the error of a Pin under Options.Check is, by
// errors.Is, when the registry serves other digests than the lock file
// (or an image is missing from it): a difference, not a failure.
// digestpin exits with status 3 for it. The error is a *DiffersError.
var ErrLockDiffers = errors.New("the registry differs from the lock file")

// DiffersError is the error of a Pin under Options.Check that found
// differences: its message lists them, one line each, and it is
// ErrLockDiffers. It holds what the run would report, so that a check
// that fails still says what moved: the change set, and the report and
// summary files, which WriteFiles writes (the lock file never is).
type DiffersError struct {
	// Changes is the change set against the lock file; nil when no
	// option asked for it (Report, Summary, SummaryText, Changes).
	Changes *ChangeSet
	err     error
	files   []output
}

func (e *DiffersError) Error() string { return e.err.Error() }

// Is reports whether target is ErrLockDiffers.
func (e *DiffersError) Is(target error) bool { return target == ErrLockDiffers }

// WriteFiles writes the report and the summaries of the run, each in
// place at once (the output of the run is not written, so nothing waits
// for it). It tries every file and returns every failure.
func (e *DiffersError) WriteFiles() error {
	var errs []error
	for _, o := range e.files {
		f, err := atomicfile.Prepare(o.path, o.data, 0o644)
		if err != nil {
			errs = append(errs, fmt.Errorf("writing %s %w", o.what, err))
			continue
		}
		if err := f.Commit(); err != nil {
			errs = append(errs, fmt.Errorf("writing %w", err))
		}
	}
	e.files = nil
	return errors.Join(errs...)
}

// lockLayer answers from the lock file. A reference missing from it is
// asked of next or, when next is nil (Frozen), noted and refused. It is
// safe for concurrent use when next is.
type lockLayer struct {
	chain *chain
	next  resolution.Resolver
}

// Resolve implements resolution.Resolver.
func (l *lockLayer) Resolve(ctx context.Context, ref name.Reference) (resolution.Resolution, error) {
	if res, ok := l.chain.locked(l.chain.lock, ref, resolution.Lock); ok {
		return l.held(ctx, ref, res)
	}
	if l.next == nil {
		l.chain.missing.add(ref.String())
		return resolution.Resolution{}, fmt.Errorf("%s: not in the lock file, and %s asks no registry", ref, resolution.OptionName(ctx, "Frozen"))
	}
	return l.next.Resolve(ctx, ref)
}

// locked is lock's answer for ref with source: the entry of ref's tag
// policy, if it has one, else of ref's own tag, for the chain's platform.
func (c *chain) locked(lock *lockfile.Lock, ref name.Reference, source resolution.Source) (resolution.Resolution, bool) {
	policy := ""
	if p := c.tags.For(ref); p != nil {
		policy = p.String()
	}
	var (
		h   v1.Hash
		tag string
		ok  bool
	)
	if policy != "" {
		tag, h, ok = lock.LookupPolicy(ref, c.platform, policy)
	} else {
		h, ok = lock.Lookup(ref, c.platform)
	}
	if !ok {
		return resolution.Resolution{}, false
	}
	return resolution.Resolution{Digest: h, Source: source, Tag: tag, MediaType: lock.MediaType(ref, c.platform, policy)}, true
}

// held returns res, the lock file's answer for ref, once a mirror holds
// its digest when the registry resolver is mirror-only: the cluster pulls
// it from there (resolve.Resolver.Holds).
func (l *lockLayer) held(ctx context.Context, ref name.Reference, res resolution.Resolution) (resolution.Resolution, error) {
	if l.chain.mirrorOnly == nil {
		return res, nil
	}
	if _, err := l.chain.mirrorOnly.Holds(ctx, ref.Context().Digest(res.Digest.String())); err != nil {
		return resolution.Resolution{}, fmt.Errorf("%s: the lock file's digest: %w", ref, err)
	}
	return res, nil
}

// checkLayer asks next (the registry) and notes every digest that differs
// from the lock file, or is missing from it. It returns the registry's
// answer, so that the render goes on and every difference is found.
type checkLayer struct {
	chain *chain
	next  resolution.Resolver
}

// Resolve implements resolution.Resolver.
func (c *checkLayer) Resolve(ctx context.Context, ref name.Reference) (resolution.Resolution, error) {
	res, err := c.next.Resolve(ctx, ref)
	if err != nil {
		return res, err
	}
	if p := c.chain.tags.For(ref); p != nil {
		c.chain.checkPolicy(ref, p.String(), res)
		return res, nil
	}
	switch locked, ok := c.chain.lock.Lookup(ref, c.chain.platform); {
	case !ok:
		c.chain.moved.add(fmt.Sprintf("%s: not in the lock file; the registry serves %s", ref, res.Digest))
	case locked != res.Digest:
		c.chain.moved.add(fmt.Sprintf("%s: moved from %s (lock file) to %s (registry)%s", ref, locked, res.Digest, formChange(c.chain.lock.MediaType(ref, c.chain.platform, ""), res.MediaType)))
	}
	return res, nil
}

// formChange says when a digest moved from an index to a single image's
// manifest or back: ", an index, now an image manifest"; "" when both
// are of one form, or either is not known.
func formChange(before, now string) string {
	form := func(mt string) string {
		if types.MediaType(mt).IsIndex() {
			return "an index"
		}
		return "an image manifest"
	}
	if before == "" || now == "" || form(before) == form(now) {
		return ""
	}
	return ", " + form(before) + ", now " + form(now)
}

var (
	// The registry resolver lists tags for the tag policies.
	_ tagpolicy.TagSource = (*resolve.Resolver)(nil)

	_ resolution.Resolver = (*lockLayer)(nil)
	_ resolution.Resolver = (*checkLayer)(nil)
	_ resolution.Resolver = (*staleLockLayer)(nil)
)

// notes collects lines from concurrent resolutions.
type notes struct {
	mu    sync.Mutex
	lines []string
}

func (n *notes) add(s string) {
	n.mu.Lock()
	n.lines = append(n.lines, s)
	n.mu.Unlock()
}

func (n *notes) sorted() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Sorted(slices.Values(n.lines))
}

// Resolve implements resolution.Resolver: the chain's layers, noting
// each reference asked about for unusedMirrors.
func (c *chain) Resolve(ctx context.Context, ref name.Reference) (resolution.Resolution, error) {
	c.askedMu.Lock()
	c.asked = append(c.asked, ref)
	c.askedMu.Unlock()
	if c.progress == nil {
		return c.Resolver.Resolve(ctx, ref)
	}
	c.progress.begin()
	defer c.progress.end()
	return c.Resolver.Resolve(ctx, ref)
}

// unusedMirrors returns the mirrors of the registry resolver that no
// image is from: none of images (those of a render that succeeded, pinned
// ones included) and none of the references the render asked about (also
// when it failed). A typo in a mirror's FROM (registry.exmple) leaves it
// unused, and the images go to their registry, or fail with mirror-only,
// without a word about the mirror.
func (c *chain) unusedMirrors(images []renderer.Image) []resolve.Mirror {
	if c.resolver == nil {
		return nil
	}
	c.askedMu.Lock()
	refs := slices.Clone(c.asked)
	c.askedMu.Unlock()
	for _, im := range images {
		if ref, err := name.ParseReference(im.Reference); err == nil {
			refs = append(refs, ref)
		}
	}
	var unused []resolve.Mirror
	for _, m := range c.resolver.Mirrors() {
		if !slices.ContainsFunc(refs, func(ref name.Reference) bool { return resolve.UsesMirror(m, ref) }) {
			unused = append(unused, m)
		}
	}
	return unused
}
