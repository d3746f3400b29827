package tagpolicy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/oneline"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/internal/store"
)

// TagSource lists a repository's tags and tells when the image of a tag
// was created: what a TagPolicy needs of a registry. Implementations must
// be safe for concurrent use.
type TagSource interface {
	// Tags lists every tag of repo, all pages of the registry's answer.
	Tags(ctx context.Context, repo name.Repository) ([]string, error)
	// Created returns the creation time in the config of the image ref
	// names.
	Created(ctx context.Context, ref name.Reference) (time.Time, error)
}

// DefaultMaxTags is how many candidates StrategyLatest asks the creation
// time of, unless WithMaxTags says otherwise: each costs two or three
// requests (manifest, config, and an index's child).
const DefaultMaxTags = 10

// Choice is the tag a policy chose for a repository, and the candidates
// it considered, best first.
type Choice struct {
	// Policy is the policy, as TagPolicy.String writes it.
	Policy string `json:"policy"`
	// Tag is the chosen tag.
	Tag string `json:"tag"`
	// Candidates are the tags the policy considered (those its filters and
	// its constraint or regular expression let through; for latest, the
	// ones whose creation time was read), best first.
	Candidates []string `json:"candidates"`
}

// PolicyResolver resolves images whose repository has a tag policy: it
// lists the repository's tags once per run, chooses one, and resolves that
// tag with the resolver it wraps; the Resolution's Tag names it. Images
// without a policy, and references that carry a digest, go to the wrapped
// resolver as they are, and cost no listing. It is safe for concurrent
// use when the wrapped resolver and the TagSource are.
type PolicyResolver struct {
	policies *TagPolicies
	tags     TagSource
	next     resolution.Resolver
	maxTags  int
	cache    *choices      // nil: none
	key      store.KeyFunc // with cache
	warnf    func(format string, args ...any)
	choices  sync.Map // choiceKey → *choiceCall
	lists    sync.Map // repository name → *listCall
	// stale and unavailable: WithStaleIfError.
	stale       time.Duration
	unavailable func(error) bool
	staleWarned sync.Map // repository and key → true
}

// listCall is one repository's tag listing, in flight or done.
type listCall struct {
	done chan struct{}
	tags []string
	err  error
}

// choiceKey is the key of a repository's choice under a policy.
func choiceKey(ref name.Reference, p *TagPolicy) string {
	return ref.Context().Name() + "\n" + p.String()
}

// choiceCall is one repository's choice, in flight or done.
type choiceCall struct {
	done   chan struct{}
	choice Choice
	err    error
}

// PolicyOption configures a PolicyResolver.
type PolicyOption func(*PolicyResolver) error

// WithMaxTags bounds how many candidates StrategyLatest reads the
// creation time of: the first n in natural order, highest first. It must
// be positive; the default is DefaultMaxTags.
func WithMaxTags(n int) PolicyOption {
	return func(r *PolicyResolver) error {
		if n <= 0 {
			return fmt.Errorf("WithMaxTags: must be positive, got %d", n)
		}
		r.maxTags = n
		return nil
	}
}

// WithChoiceCache keeps each repository's choice in c (a resolve.Cache,
// the resolution cache: a folder, or Redis shared by every process), taken for ttl, which
// must be positive, under key's key for the repository plus the policy,
// so that a cached choice costs no listing. warnf receives a failure to store one; nil discards
// it. By default choices are not cached.
func WithChoiceCache(c store.Cache, ttl time.Duration, key store.KeyFunc, warnf func(format string, args ...any)) PolicyOption {
	return func(r *PolicyResolver) error {
		if ttl <= 0 {
			return fmt.Errorf("cache TTL must be positive, got %s", ttl)
		}
		r.cache, r.key, r.warnf = &choices{c: c, ttl: ttl, now: time.Now}, key, warnf
		return nil
	}
}

// WithStaleIfError lets the choice cache (WithChoiceCache) answer for a
// registry that cannot list a repository's tags, or say when they were
// made, for a reason that unavailable says says nothing about the image
// (resolve.Unavailable): the last choice it recorded, when that was made
// at most d past the cache's TTL ago, warned about once per repository
// with its age. 0, the default, never does.
func WithStaleIfError(d time.Duration, unavailable func(error) bool) PolicyOption {
	return func(r *PolicyResolver) error {
		if d > 0 && unavailable == nil {
			return errors.New("stale choices need a test of unavailability")
		}
		r.stale, r.unavailable = max(d, 0), unavailable
		return nil
	}
}

// NewPolicyResolver returns a resolver that applies policies, listing tags
// through tags and resolving the chosen tags (and every other reference)
// through next.
func NewPolicyResolver(next resolution.Resolver, tags TagSource, policies *TagPolicies, opts ...PolicyOption) (*PolicyResolver, error) {
	r := &PolicyResolver{policies: policies, tags: tags, next: next, maxTags: DefaultMaxTags}
	for _, opt := range opts {
		if err := opt(r); err != nil {
			return nil, err
		}
	}
	if r.warnf == nil {
		r.warnf = func(string, ...any) {}
	}
	return r, nil
}

var _ resolution.Resolver = (*PolicyResolver)(nil)

// Resolve resolves ref: the tag its repository's policy chooses, or ref as
// it is when it has none or carries a digest. An error names the image.
func (r *PolicyResolver) Resolve(ctx context.Context, ref name.Reference) (resolution.Resolution, error) {
	p := r.policies.For(ref)
	if _, pinned := ref.(name.Digest); pinned || p == nil {
		return r.next.Resolve(ctx, ref)
	}
	c, err := r.choose(ctx, ref, p)
	if err != nil {
		return resolution.Resolution{}, err
	}
	res, err := r.next.Resolve(ctx, ref.Context().Tag(c.Tag))
	if err != nil {
		return resolution.Resolution{}, fmt.Errorf("%s: policy %s chose %s: %w", ref, c.Policy, c.Tag, err)
	}
	res.Tag = c.Tag
	return res, nil
}

// Choice returns the choice made for ref's repository under ref's policy
// during the resolver's lifetime, if any.
func (r *PolicyResolver) Choice(ref name.Reference) (Choice, bool) {
	p := r.policies.For(ref)
	if p == nil {
		return Choice{}, false
	}
	v, ok := r.choices.Load(choiceKey(ref, p))
	if !ok {
		return Choice{}, false
	}
	c := v.(*choiceCall)
	select {
	case <-c.done:
		return c.choice, c.err == nil
	default:
		return Choice{}, false
	}
}

// choose returns the choice for ref's repository under policy p, made
// once per repository and policy: later callers wait for the first. A
// failure is forgotten, so that it is not remembered as a choice.
func (r *PolicyResolver) choose(ctx context.Context, ref name.Reference, p *TagPolicy) (Choice, error) {
	k := choiceKey(ref, p)
	c := &choiceCall{done: make(chan struct{})}
	if v, loaded := r.choices.LoadOrStore(k, c); loaded {
		c = v.(*choiceCall)
		select {
		case <-c.done:
			return c.choice, c.err
		case <-ctx.Done():
			return Choice{}, fmt.Errorf("%s: %w", ref, ctx.Err())
		}
	}
	c.choice, c.err = r.chooseNow(ctx, ref, p)
	if c.err != nil {
		r.choices.CompareAndDelete(k, c)
	}
	close(c.done)
	return c.choice, c.err
}

// chooseNow makes the choice for ref's repository: from the cache, or by
// listing its tags.
func (r *PolicyResolver) chooseNow(ctx context.Context, ref name.Reference, p *TagPolicy) (Choice, error) {
	repo := ref.Context()
	var key string
	cached := false
	if r.cache != nil {
		k, ok, err := r.key(ctx, ref)
		if err == nil && ok {
			key, cached = choiceCacheKey(k, p, r.maxTags), true
			if c, ok := r.cache.getChoice(ctx, repo, key); ok {
				return c, nil
			}
			// Another process that shares the cache may be making
			// this choice right now.
			c, found, release := r.cache.claimChoice(ctx, repo, key)
			if found {
				return c, nil
			}
			defer release()
		}
	}
	tags, err := r.list(ctx, repo)
	if err != nil {
		return r.staleChoice(ctx, repo, key, cached, err)
	}
	created := func(tag string) (time.Time, error) { return r.tags.Created(ctx, repo.Tag(tag)) }
	tag, cands, err := p.choose(RepositoryOf(ref), tags, r.maxTags, created)
	if err != nil {
		return r.staleChoice(ctx, repo, key, cached, err)
	}
	c := Choice{Policy: p.String(), Tag: tag, Candidates: cands}
	if cached {
		if err := r.cache.putChoice(ctx, repo, key, c); err != nil {
			r.warnf("%v", err)
		}
	}
	return c, nil
}

// staleChoice returns the choice the cache last recorded for repo under
// key in place of err, the failure to make it now, when WithStaleIfError
// allows it; otherwise err.
func (r *PolicyResolver) staleChoice(ctx context.Context, repo name.Repository, key string, cached bool, err error) (Choice, error) {
	if !cached || r.stale <= 0 || ctx.Err() != nil || !r.unavailable(err) {
		return Choice{}, err
	}
	c, at, ok := r.cache.recordedChoice(ctx, repo, key)
	age := r.cache.now().Sub(at)
	if !ok || age >= r.cache.ttl+r.stale {
		return Choice{}, err
	}
	if _, warned := r.staleWarned.LoadOrStore(repo.Name()+"\n"+key, true); !warned {
		r.warnf("%s: keeping tag %s, chosen %s ago (%s), since the registry did not answer: %v", repo, c.Tag, oneline.Duration(age), resolution.OptionName(ctx, "StaleIfError"), err)
	}
	return c, nil
}

// list lists repo's tags once for the resolver's lifetime, whatever the
// policies that ask: later callers wait for the first. A failure is
// forgotten, so that a later caller asks again.
func (r *PolicyResolver) list(ctx context.Context, repo name.Repository) ([]string, error) {
	c := &listCall{done: make(chan struct{})}
	if v, loaded := r.lists.LoadOrStore(repo.Name(), c); loaded {
		c = v.(*listCall)
		select {
		case <-c.done:
			return c.tags, c.err
		case <-ctx.Done():
			return nil, fmt.Errorf("listing tags of %s: %w", repo, ctx.Err())
		}
	}
	c.tags, c.err = r.tags.Tags(ctx, repo)
	if c.err != nil {
		r.lists.CompareAndDelete(repo.Name(), c)
	}
	close(c.done)
	return c.tags, c.err
}
