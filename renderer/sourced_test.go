package renderer

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/resolution"
)

func TestRenderImageSourcesAndSpelling(t *testing.T) {
	t.Parallel()
	pinned := "nginx@" + dg("x")
	in := "---\n" + strings.Replace(deployment, "IMAGE", "nginx:1.27", 1) +
		"---\n" + strings.Replace(strings.Replace(deployment, "web", "api", 1), "IMAGE", "docker.io/library/nginx:1.27", 1) +
		"---\n" + strings.Replace(strings.Replace(deployment, "web", "job", 1), "IMAGE", "registry.example/app:1", 1) +
		"---\n" + strings.Replace(strings.Replace(deployment, "web", "old", 1), "IMAGE", pinned, 1)
	type image struct{ Reference, Written, Source string }
	for _, tc := range []struct {
		desc    string
		sources map[string]resolution.Source
		want    []image
	}{
		{
			desc:    "registry answers",
			sources: map[string]resolution.Source{},
			want: []image{
				{"index.docker.io/library/nginx:1.27", "nginx:1.27", "registry"},
				{"index.docker.io/library/nginx@" + dg("x"), pinned, "pinned"},
				{"registry.example/app:1", "registry.example/app:1", "registry"},
			},
		},
		{
			desc: "the resolver names the source",
			sources: map[string]resolution.Source{
				"index.docker.io/library/nginx:1.27": resolution.Cache,
				"registry.example/app:1":             resolution.Lock,
			},
			want: []image{
				{"index.docker.io/library/nginx:1.27", "nginx:1.27", "cache"},
				{"index.docker.io/library/nginx@" + dg("x"), pinned, "pinned"},
				{"registry.example/app:1", "registry.example/app:1", "lock"},
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixed()
			f.sources = tc.sources
			r := &Renderer{Resolver: f}
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
