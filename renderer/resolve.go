package renderer

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/textlist"
	"github.com/digestpin/digestpin/resolution"
)

// resolveAll waits for the resolutions of the distinct references without
// a digest that c collected (begun by the parse, see inflight), and
// returns every image (sorted by reference) and the digest of each
// reference ("" for one kept unresolved). Every unresolvable image is
// returned, joined, unless KeepUnresolved keeps it.
func (r *Renderer) resolveAll(ctx context.Context, c *collection) ([]Image, map[string]string, error) {
	images := make([]Image, len(c.order))
	var asked []int // the images the resolver answers, by index
	for i, k := range c.order {
		u := c.pending[k].first
		images[i] = Image{Reference: k, Written: u.image}
		d, pinned := u.ref.(name.Digest)
		switch {
		case pinned:
			images[i].Digest, images[i].Source = d.DigestStr(), resolution.Pinned
		case r.Resolver == nil:
			images[i].Source, images[i].Err = resolution.Unresolved, errors.New("no resolver")
		default:
			// The parse began each one; start is for one it did not.
			r.inflight.start(u.ref)
			asked = append(asked, i)
		}
	}
	for _, i := range asked {
		r.settle(ctx, &images[i], c.pending[c.order[i]].first.ref)
	}
	// A resolver stopped by ctx fails every image; with KeepUnresolved
	// that would write the stream unpinned.
	if err := ctx.Err(); err != nil {
		var left []string
		for i := range images {
			if images[i].Err != nil {
				left = append(left, images[i].Written)
			}
		}
		if len(left) == 0 {
			return nil, nil, fmt.Errorf("resolving %d images: %w", len(c.order), context.Cause(ctx))
		}
		return nil, nil, fmt.Errorf("resolving %d images: %w, with %s unresolved", len(c.order), context.Cause(ctx), textlist.Some(left, 5))
	}
	digests := make(map[string]string, len(c.order))
	var errs []error
	for i, k := range c.order {
		ru := c.pending[k]
		images[i].Workloads = ru.workloads
		if err := images[i].Err; err != nil {
			u := ru.first
			// The resolver names the reference, as the callee does in Go.
			err = fmt.Errorf("%s: %s: %w", u.where(), u.workload, err)
			if !r.KeepUnresolved {
				errs = append(errs, err)
				continue
			}
			r.warnf("keeping %s unpinned: %v", u.image, err)
		}
		digests[k] = pinOf(images[i])
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	sort.Slice(images, func(a, b int) bool { return images[a].Reference < images[b].Reference })
	return images, digests, nil
}

// settle waits for the resolution of ref and records it in img: its
// digest, or why it is unresolved.
func (r *Renderer) settle(ctx context.Context, img *Image, ref name.Reference) {
	res, err := r.inflight.wait(ref)
	h := res.Digest
	if err == nil {
		// What goes into the manifest must be a digest, whatever the
		// resolver (or the registry behind it) says.
		_, err = v1.NewHash(h.String())
		if err != nil {
			err = fmt.Errorf("resolving %s: resolver gave an invalid digest: %w", ref, err)
		}
	}
	if err == nil {
		err = checkTag(ctx, ref, res.Tag, r.mode())
	}
	if err != nil {
		img.Source, img.Err = resolution.Unresolved, err
		return
	}
	img.Digest, img.Source, img.Tag, img.Mirror, img.MediaType = h.String(), res.Source, res.Tag, res.Mirror, res.MediaType
}
