package renderer

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/resolution"
)

// chooser plays a tag policy in front of fixed: a repository listed in
// tags resolves to the tag given there, and says so.
type chooser struct {
	mu   sync.Mutex
	tags map[string]string // fully qualified repository → chosen tag
	next *fixed
}

func (c *chooser) Resolve(ctx context.Context, ref name.Reference) (resolution.Resolution, error) {
	c.mu.Lock()
	tag, ok := c.tags[ref.Context().Name()]
	c.mu.Unlock()
	if !ok {
		return c.next.Resolve(ctx, ref)
	}
	res, err := c.next.Resolve(ctx, ref.Context().Tag(tag))
	res.Tag = tag
	return res, err
}

func (c *chooser) set(repo, tag string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tags[repo] = tag
}

func newChooser() *chooser {
	return &chooser{tags: map[string]string{
		"registry.example/shop/web": "1.4.7",
		"registry.example/shop/api": "main-20",
	}, next: newFixed()}
}

// TestGoldenTags renders testdata/tags/policy.input.yaml with tag policies
// in each mode, and the golden file again to prove it a fixed point.
func TestGoldenTags(t *testing.T) {
	t.Parallel()
	in := filepath.Join("testdata", "tags", "policy.input.yaml")
	for _, mode := range []Mode{ModePin, ModeDigest} {
		t.Run(string(mode), func(t *testing.T) {
			_, res := checkGolden(t, &Renderer{Mode: mode, Resolver: newChooser()}, in, filepath.Join("testdata", "tags", "policy."+string(mode)+".golden.yaml"))
			var tags []string
			for _, im := range res.Images {
				tags = append(tags, im.Written+" "+im.Tag)
			}
			want := []string{
				"registry.example/shop/api main-20",
				"registry.example/shop/proxy:2.1 ",
				"registry.example/shop/web:1.4 1.4.7",
				"registry.example/shop/web:1.4@sha256:1111111111111111111111111111111111111111111111111111111111111111 ",
			}
			if diff := cmp.Diff(want, tags); diff != "" {
				t.Errorf("Images' tags (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTagMovesOnlyItsWorkloads: a new tag chosen for one repository
// changes the documents that use it, and no other byte.
func TestTagMovesOnlyItsWorkloads(t *testing.T) {
	t.Parallel()
	src := []byte(deployments("web", "registry.example/shop/web:1.4", "api", "registry.example/shop/api:1", "db", "postgres:16"))
	c := newChooser()
	r := &Renderer{Resolver: c}
	before, err := r.Render(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	c.set("registry.example/shop/api", "main-21")
	after, err := r.Render(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	b, a := mustSplit(t, before.Bytes()), mustSplit(t, after.Bytes())
	if len(a) != 3 || len(b) != 3 {
		t.Fatalf("want 3 documents, got %d and %d", len(b), len(a))
	}
	for i, changed := range []bool{false, true, false} {
		if got := !bytes.Equal(a[i].Raw, b[i].Raw); got != changed {
			t.Errorf("document %d changed = %t, want %t:\n%s\n---\n%s", i+1, got, changed, b[i].Raw, a[i].Raw)
		}
	}
	if !strings.Contains(string(a[1].Raw), "image: registry.example/shop/api:main-21@"+dg("registry.example/shop/api:main-21")) {
		t.Errorf("api not pinned to main-21:\n%s", a[1].Raw)
	}
}

// deployments returns a stream of Deployments, one for each name and
// image pair.
func deployments(pairs ...string) string {
	var docs []string
	for i := 0; i < len(pairs); i += 2 {
		docs = append(docs, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: "+pairs[i]+"\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: "+pairs[i+1]+"\n")
	}
	return strings.Join(docs, "---\n")
}

// TestTagInvalid: a tag that is not one fails the image, whatever the
// resolver says.
func TestTagInvalid(t *testing.T) {
	t.Parallel()
	// Tags go-containerregistry takes, but the kubelet refuses, too.
	for _, tag := range []string{"1.4/../x", "-bad", ".1"} {
		c := newChooser()
		c.set("registry.example/shop/web", tag)
		_, err := (&Renderer{Resolver: c}).Render(context.Background(), []byte(deployments("web", "registry.example/shop/web:1.4")))
		if err == nil || !strings.Contains(err.Error(), `resolver chose an invalid tag "`+tag+`"`) {
			t.Errorf("Render with tag %q = %v, want an invalid tag", tag, err)
		}
	}
	// In annotate mode the image field keeps its tag: a chosen tag would
	// leave the pods running another image than the checksum covers.
	_, err := (&Renderer{Resolver: newChooser(), Mode: ModeAnnotate}).Render(context.Background(), []byte(deployments("web", "registry.example/shop/web:1.4")))
	if want := "document 1, line 10: Deployment/web container \"app\": resolving registry.example/shop/web:1.4: a tag policy chose 1.4.7, but Mode annotate keeps the tag as written; use Mode pin or digest"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Render(annotate) = %v, want %q", err, want)
	}
}

func TestPinnedTo(t *testing.T) {
	t.Parallel()
	d := "sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		image, pin string
		mode       Mode
		want       string
	}{
		{"shop/web:1.4", "1.4.7@" + d, ModePin, "shop/web:1.4.7@" + d},
		{"shop/web", "1.4.7@" + d, ModePin, "shop/web:1.4.7@" + d},
		{"localhost:5000/shop/web:1.4", "1.4.7@" + d, ModePin, "localhost:5000/shop/web:1.4.7@" + d},
		{"shop/web:1.4", "1.4.7@" + d, ModeDigest, "shop/web@" + d},
		{"shop/web:1.4", "1.4.7@" + d, ModeAnnotate, "shop/web:1.4.7@" + d},
		{"shop/web:1.4", d, ModePin, "shop/web:1.4@" + d},
		{"shop/web", d, ModePin, "shop/web:latest@" + d},
	} {
		if got := pinnedTo(tc.image, tc.pin, tc.mode); got != tc.want {
			t.Errorf("pinnedTo(%q, %q, %s) = %q, want %q", tc.image, tc.pin, tc.mode, got, tc.want)
		}
	}
}
