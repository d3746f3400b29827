package resolve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// tagLimits bound what a Resolver reads of one repository's tag listing,
// so that a registry that answers in bad faith (an endless or looping
// chain of Link headers, millions of tags) fails the listing with a clear
// error instead of holding the run or its memory. Each page is also
// bounded by maxResponseBody.
type tagLimits struct {
	pages int // tags/list requests
	tags  int // tags, over all pages
	bytes int // bytes of tag names, over all pages
}

// defaultTagLimits are far above what real registries list: the busiest
// repositories have tens of thousands of tags, and registries page at 50
// to 1000 tags a page.
var defaultTagLimits = tagLimits{pages: 1000, tags: 100_000, bytes: 16 << 20}

// Tags lists every tag of repo: one tags/list request per page, following
// the registry's Link headers (go-containerregistry's remote.Lister, which
// follows a Link only to the registry's own scheme and host), at the first
// of its mirrors that answers, then the registry itself unless
// mirror-only, like Resolve. It counts against the Resolver's concurrency
// bound. A listing longer than 1000 pages, 100,000 tags or 16 MiB of tag
// names, or whose Link headers go round in a loop, is an error. The tags
// come as the registry wrote them: names that are not valid tags and
// repeated names are left to the policy (see package tagpolicy). An error names
// the repository and what each registry answered.
func (r *Resolver) Tags(ctx context.Context, repo name.Repository) ([]string, error) {
	var tags []string
	err := r.ask(ctx, repo.Tag("latest"), true, func(ctx context.Context, p *remote.Puller, ref name.Reference) error {
		var err error
		tags, err = r.list(ctx, p, ref.Context())
		if err == nil {
			r.o.logf("listed %d tags of %s", len(tags), ref.Context())
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing tags: %w", err)
	}
	return tags, nil
}

// list reads every page of repo's tags/list within the Resolver's
// tagLimits.
func (r *Resolver) list(ctx context.Context, p *remote.Puller, repo name.Repository) ([]string, error) {
	lim := r.o.tagLimits
	l, err := p.Lister(ctx, repo)
	if err != nil {
		return nil, err
	}
	tags := []string{}
	size := 0
	seen := map[string]bool{} // the pages' Link targets
	for pages := 1; l.HasNext(); pages++ {
		page, err := l.Next(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range page.Tags {
			size += len(t)
		}
		tags = append(tags, page.Tags...)
		switch {
		case len(tags) > lim.tags:
			return nil, fmt.Errorf("more than %d tags in %d pages: too many to choose from", lim.tags, pages)
		case size > lim.bytes:
			return nil, fmt.Errorf("more than %d bytes of tag names in %d pages: too many to choose from", lim.bytes, pages)
		case page.Next == "":
		case seen[page.Next]:
			return nil, fmt.Errorf("page %d links back to an earlier page: the registry's pagination goes round in a loop", pages)
		case pages >= lim.pages:
			return nil, fmt.Errorf("still another page after %d pages of tags: too many to choose from", pages)
		}
		seen[page.Next] = true
	}
	return tags, nil
}

// Created returns the creation time in the config of the image ref names.
// For a multi-platform index it is the config of the platform given by
// WithPlatform, or linux/amd64, or else the index's first image. It costs
// a GET of the manifest (and of the index's child) and of the config.
func (r *Resolver) Created(ctx context.Context, ref name.Reference) (time.Time, error) {
	var created time.Time
	err := r.ask(ctx, ref, false, func(ctx context.Context, p *remote.Puller, ref name.Reference) error {
		d, err := p.Get(ctx, ref)
		if err != nil {
			return err
		}
		img, err := r.imageOf(d)
		if err != nil {
			return err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return fmt.Errorf("reading image config: %w", err)
		}
		created = cf.Created.Time
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("reading creation time: %w", err)
	}
	return created, nil
}

// imageOf returns the image a descriptor names: itself, or the child of
// an index for the platform (see Created).
func (r *Resolver) imageOf(d *remote.Descriptor) (v1.Image, error) {
	if !d.MediaType.IsIndex() {
		return d.Image()
	}
	idx, err := d.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading index: %w", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("reading index: %w", err)
	}
	want := v1.Platform{OS: "linux", Architecture: "amd64"}
	if r.o.platform != nil {
		want = *r.o.platform
	}
	for _, c := range m.Manifests {
		if c.Platform != nil && c.Platform.Satisfies(want) {
			return idx.Image(c.Digest)
		}
	}
	for _, c := range m.Manifests {
		if c.MediaType.IsImage() {
			return idx.Image(c.Digest)
		}
	}
	return nil, errors.New("the index holds no image")
}

// ask runs fn with a puller for ref at each of ref's candidates in turn
// (mirrors, then the registry) until one succeeds, within the concurrency
// bound, as resolve does for a digest. repoOnly names each candidate by
// its repository in the error.
func (r *Resolver) ask(ctx context.Context, ref name.Reference, repoOnly bool, fn func(context.Context, *remote.Puller, name.Reference) error) error {
	cands, done, err := r.slot(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	var fails []tryFailure
	for _, c := range cands {
		c.repoOnly = repoOnly
		tr := &regtransport.Trace{}
		tctx := regtransport.WithRegistry(regtransport.WithTrace(ctx, tr), c.ref.Context().RegistryStr())
		err := r.askOnce(tctx, c, fn)
		if err == nil {
			return nil
		}
		fails = append(fails, tryFailure{c: c, err: err, tr: tr})
		if ctx.Err() != nil {
			break
		}
	}
	return newError(ctx, ref, fails, r.red)
}

// askOnce runs fn with a puller for c, once more when what the auth
// cache kept of the registry fails it (session.relearn), as resolveAt
// does.
func (r *Resolver) askOnce(ctx context.Context, c candidate, fn func(context.Context, *remote.Puller, name.Reference) error) error {
	try := func() error {
		p, err := c.sess.puller(ctx, c.ref.Context().RepositoryStr())
		if err != nil {
			return err
		}
		return fn(ctx, p, c.ref)
	}
	gen := c.sess.generation()
	err := try()
	if err != nil && c.sess.relearn(ctx, gen, err) {
		err = try()
	}
	return err
}
