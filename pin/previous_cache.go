package pin

import (
	"context"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
)

// previousCache is the previous state of the resolution cache: for each
// image the run resolved, the last digest the cache recorded for it
// before the run, past the TTL too (resolve.CachingResolver.Last); or,
// for an image under a waiting period (minAge, nil without), the digest
// pinned before, which the cache's resolution is not while a newer one
// waits. An image a tag policy chose a tag for is looked up under that
// tag. The
// cache knows no render, so nothing is ever removed against it, and an
// image it never held is added.
func previousCache(ctx context.Context, cr *resolve.CachingResolver, minAge *minAgeLayer, images []renderer.Image, choices map[string]ReportPolicy) *previous {
	prev := &previous{against: AgainstCache, byName: map[string]int{}}
	for _, im := range images {
		if im.Digest == "" || im.Source == resolution.Pinned || im.Source == resolution.Unresolved {
			continue
		}
		ref, err := name.ParseReference(im.Reference)
		if err != nil {
			continue
		}
		policy := choices[im.Reference].Policy
		digest, tag, ok := minAge.pinnedBefore(im.Reference, policy)
		if !ok {
			if im.Tag != "" {
				ref = ref.Context().Tag(im.Tag)
			}
			var rec resolve.Recorded
			rec, ok = cr.Last(ctx, ref)
			digest, tag = rec.Digest, im.Tag
		}
		tagged := taggedName(im.Reference, im.Written)
		if !ok || tagged == "" {
			continue
		}
		written := im.Written
		if written == "" {
			written = im.Reference
		}
		prev.byName[tagged+"\x00"+policy] = len(prev.images)
		prev.images = append(prev.images, prevImage{name: tagged, repo: ref.Context().Name(), written: written, digest: digest.String(), tag: tag})
	}
	return prev
}
