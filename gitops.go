package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolve"
)

// sourceLock is the source of a digest that came from the lock file.
const sourceLock = "lock"

// gitopsOptions are the flags of the lock, cache and report workflows.
type gitopsOptions struct {
	writeLock string
	lock      string
	frozen    bool
	check     bool
	cacheDir  string
	cacheTTL  time.Duration
	report    string
}

// bind defines the lock, cache and report flags on fs.
func (g *gitopsOptions) bind(fs *pflag.FlagSet) {
	fs.StringVar(&g.writeLock, "write-lock", "", "after a successful run, write every resolution to the lock `FILE` (may be the --lock file)")
	fs.StringVar(&g.lock, "lock", "", "take digests from the lock `FILE`; references missing from it are resolved, or fail with --frozen")
	fs.BoolVar(&g.frozen, "frozen", false, "with --lock: never contact a registry; a reference missing from the lock file is an error")
	fs.BoolVar(&g.check, "check", false, "with --lock: resolve every reference at its registry and fail, naming each image, when a digest differs from the lock file")
	fs.StringVar(&g.cacheDir, "cache-dir", "", "keep resolutions in `DIR` for --cache-ttl (default: digestpin in the user cache folder, $XDG_CACHE_HOME or ~/.cache)")
	fs.DurationVar(&g.cacheTTL, "cache-ttl", 0, "reuse a cached resolution younger than `DURATION` (e.g. 5m) without asking the registry; 0 disables the cache")
	fs.StringVar(&g.report, "report", "", "after a successful run, write a JSON report of every image (reference, digest, source, workloads) to `FILE`")
}

// validate rejects flag combinations that cannot mean anything.
func (g *gitopsOptions) validate() error {
	switch {
	case g.frozen && g.check:
		return errors.New("--frozen and --check exclude each other: --frozen never asks a registry, --check asks it about every image")
	case g.frozen && g.lock == "":
		return errors.New("--frozen needs --lock FILE")
	case g.check && g.lock == "":
		return errors.New("--check needs --lock FILE")
	case g.cacheTTL < 0:
		return fmt.Errorf("--cache-ttl must not be negative, got %s", g.cacheTTL)
	case g.cacheDir != "" && g.cacheTTL == 0:
		return errors.New("--cache-dir needs --cache-ttl DURATION, how long a resolution stays valid")
	}
	return nil
}

// gitopsRun is the state of one run's lock, cache and report layers.
type gitopsRun struct {
	opts     *gitopsOptions
	platform string // canonical --platform, or ""
	lock     *lockfile.Lock
	rep      *reporter

	mu      sync.Mutex
	missing []string // --frozen: references not in the lock
	moved   []string // --check: how the registry differs from the lock
}

// start reads the lock file and puts the lock and cache layers in front
// of r's registry resolver:
//
//	--lock --frozen   lock
//	--lock --check    registry, compared with the lock
//	--lock            lock, then cache, then registry
//	(none)            cache, then registry
//
// The cache layer is there only with --cache-ttl.
func (g *gitopsOptions) start(r *renderer.Renderer, platform string, rep *reporter) (*gitopsRun, error) {
	if err := g.validate(); err != nil {
		return nil, &usageError{err}
	}
	run := &gitopsRun{opts: g, rep: rep}
	if platform != "" {
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			return nil, &usageError{fmt.Errorf("parsing --platform %q: %w", platform, err)}
		}
		run.platform = p.String()
	}
	if g.lock != "" {
		l, err := lockfile.Read(g.lock)
		if err != nil {
			return nil, err
		}
		run.lock = l
	}
	registry, ok := r.Resolver.(resolve.Interface)
	if !ok {
		return run, nil
	}
	live := registry
	if g.cacheTTL > 0 && !g.frozen && !g.check {
		dir := g.cacheDir
		if dir == "" {
			d, err := resolve.DefaultCacheDir()
			if err != nil {
				return nil, err
			}
			dir = d
		}
		c, err := resolve.NewCache(dir, g.cacheTTL)
		if err != nil {
			return nil, err
		}
		rep.debugf("resolution cache in %s, TTL %s", dir, g.cacheTTL)
		live = resolve.NewCachingResolver(registry, c, run.platform, rep.warnf)
	}
	switch {
	case g.frozen:
		r.Resolver = &lockResolver{run: run}
	case g.check:
		r.Resolver = &checkResolver{run: run, next: registry}
	case g.lock != "":
		r.Resolver = &lockResolver{run: run, next: live}
	default:
		r.Resolver = live
	}
	return run, nil
}

// finish runs after a successful render, before anything is written to
// stdout: it fails on --frozen misses and --check differences, then writes
// the lock file and the report.
func (run *gitopsRun) finish(res renderer.Result) error {
	for _, im := range res.Images {
		if im.Digest != "" {
			run.rep.debugf("%s: %s (%s)", im.Written, im.Digest, im.Source)
		}
	}
	run.mu.Lock()
	missing, moved := slices.Sorted(slices.Values(run.missing)), slices.Sorted(slices.Values(run.moved))
	run.mu.Unlock()
	// With --on-error=keep the renderer kept these unpinned; --frozen
	// still fails the run.
	if len(missing) > 0 {
		return fmt.Errorf("%d image(s) not in lock file %s (--frozen asks no registry): %s", len(missing), run.opts.lock, strings.Join(missing, ", "))
	}
	if len(moved) > 0 {
		errs := []error{fmt.Errorf("the registry differs from lock file %s for %d image(s)", run.opts.lock, len(moved))}
		for _, m := range moved {
			errs = append(errs, errors.New("  "+m))
		}
		return errors.Join(errs...)
	}
	if run.opts.writeLock != "" {
		if err := run.writeLock(res.Images); err != nil {
			return err
		}
	}
	if run.opts.report != "" {
		if err := writeReport(run.opts.report, res.Images, run.platform); err != nil {
			return err
		}
	}
	return nil
}

// writeLock writes every image the run resolved (not those written with a
// digest, nor those kept unresolved) to the --write-lock file.
func (run *gitopsRun) writeLock(images []renderer.Image) error {
	var entries []lockfile.Entry
	for _, im := range images {
		if im.Digest == "" || im.Source == renderer.SourcePinned || im.Source == renderer.SourceNone {
			continue
		}
		entries = append(entries, lockfile.Entry{Reference: im.Reference, Platform: run.platform, Digest: im.Digest})
	}
	l, err := lockfile.New(entries)
	if err != nil {
		return fmt.Errorf("writing lock file %s: %w", run.opts.writeLock, err)
	}
	if err := l.WriteFile(run.opts.writeLock); err != nil {
		return err
	}
	run.rep.debugf("wrote %d entries to lock file %s", l.Len(), run.opts.writeLock)
	return nil
}

// lockResolver answers from the lock file. A reference missing from it is
// asked of next, or, when next is nil (--frozen), is an error. It is safe
// for concurrent use when next is.
type lockResolver struct {
	run  *gitopsRun
	next resolve.Interface
}

// errNotLocked is the reason of a --frozen miss.
var errNotLocked = errors.New("not in the lock file, and --frozen asks no registry")

var (
	_ renderer.SourcedResolver = (*lockResolver)(nil)
	_ renderer.SourcedResolver = (*checkResolver)(nil)
)

// Resolve implements renderer.Resolver.
func (l *lockResolver) Resolve(ctx context.Context, ref name.Reference) (v1.Hash, error) {
	h, _, err := l.ResolveSource(ctx, ref)
	return h, err
}

// ResolveSource implements renderer.SourcedResolver.
func (l *lockResolver) ResolveSource(ctx context.Context, ref name.Reference) (v1.Hash, string, error) {
	if h, ok := l.run.lock.Lookup(ref, l.run.platform); ok {
		return h, sourceLock, nil
	}
	if l.next == nil {
		l.run.mu.Lock()
		l.run.missing = append(l.run.missing, ref.String())
		l.run.mu.Unlock()
		return v1.Hash{}, "", fmt.Errorf("%s: %w", ref, errNotLocked)
	}
	return l.next.ResolveSource(ctx, ref)
}

// checkResolver asks the registry and notes every digest that differs
// from the lock file, or is missing from it. It returns the registry's
// answer, so the render goes on and every difference is found.
type checkResolver struct {
	run  *gitopsRun
	next resolve.Interface
}

// Resolve implements renderer.Resolver.
func (c *checkResolver) Resolve(ctx context.Context, ref name.Reference) (v1.Hash, error) {
	h, _, err := c.ResolveSource(ctx, ref)
	return h, err
}

// ResolveSource implements renderer.SourcedResolver.
func (c *checkResolver) ResolveSource(ctx context.Context, ref name.Reference) (v1.Hash, string, error) {
	h, src, err := c.next.ResolveSource(ctx, ref)
	if err != nil {
		return h, src, err
	}
	var diff string
	switch locked, ok := c.run.lock.Lookup(ref, c.run.platform); {
	case !ok:
		diff = fmt.Sprintf("%s: not in the lock file; the registry serves %s", ref, h)
	case locked != h:
		diff = fmt.Sprintf("%s: moved from %s (lock file) to %s (registry)", ref, locked, h)
	}
	if diff != "" {
		c.run.mu.Lock()
		c.run.moved = append(c.run.moved, diff)
		c.run.mu.Unlock()
	}
	return h, src, nil
}
