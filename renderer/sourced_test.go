package renderer

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// sourced answers like fixed and names a source per reference.
type sourced struct {
	*fixed
	sources map[string]string // by fully qualified name
}

var _ SourcedResolver = sourced{}

func (s sourced) ResolveSource(ctx context.Context, ref name.Reference) (v1.Hash, string, error) {
	h, err := s.Resolve(ctx, ref)
	return h, s.sources[ref.Name()], err
}

func TestRenderImageSourcesAndSpelling(t *testing.T) {
	pinned := "nginx@" + dg("x")
	in := "---\n" + strings.Replace(deployment, "IMAGE", "nginx:1.27", 1) +
		"---\n" + strings.Replace(strings.Replace(deployment, "web", "api", 1), "IMAGE", "docker.io/library/nginx:1.27", 1) +
		"---\n" + strings.Replace(strings.Replace(deployment, "web", "job", 1), "IMAGE", "registry.example/app:1", 1) +
		"---\n" + strings.Replace(strings.Replace(deployment, "web", "old", 1), "IMAGE", pinned, 1)
	type image struct{ Reference, Written, Source string }
	for _, tc := range []struct {
		desc string
		res  Resolver
		want []image
	}{
		{
			desc: "a plain Resolver is the resolver",
			res:  newFixed(),
			want: []image{
				{"index.docker.io/library/nginx:1.27", "nginx:1.27", "resolver"},
				{"index.docker.io/library/nginx@" + dg("x"), pinned, "pinned"},
				{"registry.example/app:1", "registry.example/app:1", "resolver"},
			},
		},
		{
			desc: "a SourcedResolver names the source",
			res: sourced{fixed: newFixed(), sources: map[string]string{
				"index.docker.io/library/nginx:1.27": "cache",
				"registry.example/app:1":             "lock",
			}},
			want: []image{
				{"index.docker.io/library/nginx:1.27", "nginx:1.27", "cache"},
				{"index.docker.io/library/nginx@" + dg("x"), pinned, "pinned"},
				{"registry.example/app:1", "registry.example/app:1", "lock"},
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{Resolver: tc.res}
			res, err := r.Render(context.Background(), []byte(in))
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			var got []image
			for _, im := range res.Images {
				got = append(got, image{im.Reference, im.Written, string(im.Source)})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Render().Images mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
