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
// before the run, past the TTL too (resolve.CachingResolver.Last). An
// image a tag policy chose a tag for is looked up under that tag. The
// cache knows no render, so nothing is ever removed against it, and an
// image it never held is added.
func previousCache(ctx context.Context, cr *resolve.CachingResolver, images []renderer.Image, choices map[string]ReportPolicy) *previous {
	prev := &previous{against: AgainstCache, byName: map[string]int{}}
	for _, im := range images {
		if im.Digest == "" || im.Source == resolution.Pinned || im.Source == resolution.Unresolved {
			continue
		}
		ref, err := name.ParseReference(im.Reference)
		if err != nil {
			continue
		}
		if im.Tag != "" {
			ref = ref.Context().Tag(im.Tag)
		}
		rec, ok := cr.Last(ctx, ref)
		tagged := taggedName(im.Reference, im.Written)
		if !ok || tagged == "" {
			continue
		}
		written := im.Written
		if written == "" {
			written = im.Reference
		}
		prev.byName[tagged+"\x00"+choices[im.Reference].Policy] = len(prev.images)
		prev.images = append(prev.images, prevImage{name: tagged, repo: ref.Context().Name(), written: written, digest: rec.Digest.String(), tag: im.Tag})
	}
	return prev
}
