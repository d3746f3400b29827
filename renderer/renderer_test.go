package renderer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testfiles"

	"github.com/digestpin/digestpin/resolution"
)

// fixed is a map-backed Resolver: the digest of a reference is the
// SHA-256 of its fully qualified name, unless the map says otherwise.
// References listed in fail return that error. The source is
// resolution.Registry unless sources says otherwise.
type fixed struct {
	mu      sync.Mutex
	calls   map[string]int
	moved   map[string]string
	failed  map[string]error
	sources map[string]resolution.Source
}

var _ resolution.Resolver = (*fixed)(nil)

func newFixed() *fixed {
	return &fixed{calls: map[string]int{}, moved: map[string]string{}, failed: map[string]error{}, sources: map[string]resolution.Source{}}
}

func (f *fixed) Resolve(_ context.Context, ref name.Reference) (resolution.Resolution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[ref.Name()]++
	if err, ok := f.failed[ref.Name()]; ok {
		return resolution.Resolution{}, fmt.Errorf("resolving %s: %w", ref, err)
	}
	src, ok := f.sources[ref.Name()]
	if !ok {
		src = resolution.Registry
	}
	return resolution.Resolution{Digest: fakeDigest(ref.Name() + f.moved[ref.Name()]), Source: src}, nil
}

// fakeDigest is the digest fixed gives a reference.
func fakeDigest(s string) v1.Hash {
	sum := sha256.Sum256([]byte(s))
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// dg is the digest string of a fully qualified reference, for expectations.
func dg(ref string) string { return fakeDigest(ref).String() }

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - name: app
        image: IMAGE
`

func TestRenderImageForms(t *testing.T) {
	t.Parallel()
	nginx := "index.docker.io/library/nginx:1.27"
	for _, tc := range []struct {
		desc, image, want string
		mode              Mode
	}{
		{desc: "pin keeps the short name", image: "nginx:1.27", want: "nginx:1.27@" + dg(nginx)},
		{desc: "pin keeps the long name", image: "docker.io/library/nginx:1.27", want: "docker.io/library/nginx:1.27@" + dg(nginx)},
		{desc: "pin names the implicit tag", image: "nginx", want: "nginx:latest@" + dg("index.docker.io/library/nginx:latest")},
		{desc: "pin with a registry port", image: "localhost:5000/team/app:2", want: "localhost:5000/team/app:2@" + dg("localhost:5000/team/app:2")},
		{desc: "digest drops the tag", image: "nginx:1.27", mode: ModeDigest, want: "nginx@" + dg(nginx)},
		{desc: "digest with a registry port", image: "localhost:5000/app:2", mode: ModeDigest, want: "localhost:5000/app@" + dg("localhost:5000/app:2")},
		{desc: "annotate leaves the field", image: "nginx:1.27", mode: ModeAnnotate, want: "nginx:1.27"},
		{desc: "a digest is kept", image: "nginx:1.27@" + dg("x"), want: "nginx:1.27@" + dg("x")},
		{desc: "digest mode shortens a pinned image", image: "nginx:1.27@" + dg("x"), mode: ModeDigest, want: "nginx@" + dg("x")},
		{desc: "a bare digest is kept", image: "nginx@" + dg("x"), want: "nginx@" + dg("x")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{Resolver: newFixed(), Mode: tc.mode}
			res, err := r.Render(context.Background(), []byte(strings.Replace(deployment, "IMAGE", tc.image, 1)))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			got := imageOf(t, string(res.Bytes()))
			if got != tc.want {
				t.Errorf("image = %s, want %s", got, tc.want)
			}
		})
	}
}

// imageOf returns the value of the first image field of a rendered stream.
func imageOf(t *testing.T, out string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "image: "); ok {
			return strings.Trim(v, `"'`)
		}
	}
	t.Fatalf("no image in %q", out)
	return ""
}

func TestRenderUnchanged(t *testing.T) {
	t.Parallel()
	pinned := "nginx:1.27@" + dg("x")
	sum := Checksum([]string{"app=" + pinned})
	for _, tc := range []struct{ desc, in string }{
		{desc: "empty stream", in: ""},
		{desc: "only a separator", in: "---\n"},
		{desc: "only comments", in: "# just a comment\n---\n# Source: x.yaml\n"},
		{desc: "no image field", in: "---\n# Source: c/templates/svc.yaml\napiVersion: v1\nkind: Service\nmetadata:\n    name: \"web\"   # odd spacing\nspec: {ports: [{port: 80}]}\n"},
		{desc: "image key in a ConfigMap", in: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  image: nginx:1.27\n"},
		{desc: "containers in an unknown kind", in: "apiVersion: example.com/v1\nkind: Widget\nspec:\n  template:\n    spec:\n      containers:\n      - name: a\n        image: nginx:1\n"},
		{desc: "a Deployment of another API group", in: "apiVersion: example.com/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: a\n        image: nginx:1\n"},
		{desc: "already pinned with its checksum", in: "---\n# Source: c/templates/d.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n    name: web\nspec:\n    template:\n        metadata:\n            annotations:\n                checksum/images: \"" + sum + "\"\n        spec:\n            containers:\n              -   name: app\n                  image: " + pinned + "\n"},
		{desc: "a container without image", in: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: a\n    imagePullPolicy: Always\n"},
		{desc: "no trailing newline", in: "apiVersion: v1\nkind: ConfigMap\ndata:\n  image: x"},
		// The parser reads the first "---" as the document's start, and
		// "..." ends it at once: empty, as Kubernetes reads it.
		{desc: "an end marker right after ---", in: "---\n... # image\n"},
		{desc: "CRD schema mentioning image", in: "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec:\n  versions:\n  - schema:\n      properties:\n        image: {type: string}\n"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixed()
			r := &Renderer{Resolver: f}
			in := []byte(tc.in)
			res, err := r.Render(context.Background(), in)
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			out := res.Bytes()
			if diff := cmp.Diff(tc.in, string(out)); diff != "" {
				t.Errorf("Render() changed the stream (-want +got):\n%s", diff)
			}
			// Nothing changed: the output is the input, not a copy, and
			// appending to it cannot write into the caller's input.
			if len(in) > 0 && (&out[0] != &in[0] || cap(out) != len(in)) {
				t.Errorf("Render().Bytes() copied an unchanged stream (cap %d, len %d), want the input itself", cap(out), len(in))
			}
			// WriteTo writes it in one write, straight from the input.
			w := &recordingWriter{}
			if n, err := res.WriteTo(w); err != nil || n != int64(len(in)) || res.Len() != len(in) {
				t.Errorf("Render().WriteTo() = %d, %v; Len() = %d; want %d, nil", n, err, res.Len(), len(in))
			}
			if len(in) > 0 && (len(w.writes) != 1 || &w.writes[0][0] != &in[0]) {
				t.Errorf("Render().WriteTo() wrote %d slices, want the input itself in one", len(w.writes))
			}
			if len(f.calls) != 0 {
				t.Errorf("Render() asked the resolver %v, want no calls", f.calls)
			}
		})
	}
}

func TestRenderResolvesEachReferenceOnce(t *testing.T) {
	t.Parallel()
	in := strings.Repeat(strings.Replace(deployment, "IMAGE", "nginx:1.27", 1)+"---\n", 3) +
		strings.Replace(deployment, "IMAGE", "docker.io/library/nginx:1.27", 1) + "---\n" +
		strings.Replace(deployment, "IMAGE", "index.docker.io/library/nginx:1.27", 1) + "---\n" +
		strings.Replace(deployment, "IMAGE", "ghcr.io/org/tool:v2", 1)
	f := newFixed()
	res, err := (&Renderer{Resolver: f}).Render(context.Background(), []byte(in))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	want := map[string]int{"index.docker.io/library/nginx:1.27": 1, "ghcr.io/org/tool:v2": 1}
	if diff := cmp.Diff(want, f.calls); diff != "" {
		t.Errorf("resolver calls (-want +got):\n%s", diff)
	}
	if len(res.Images) != 2 || len(res.Images[1].Workloads) != 5 {
		t.Errorf("Images = %+v, want 2 images, the second used 5 times", res.Images)
	}
	for _, want := range []string{"image: nginx:1.27@", "image: docker.io/library/nginx:1.27@", "image: index.docker.io/library/nginx:1.27@"} {
		if !strings.Contains(string(res.Bytes()), want) {
			t.Errorf("output lacks %q: the user's spelling must stay", want)
		}
	}
}

func TestChecksum(t *testing.T) {
	t.Parallel()
	a := Checksum([]string{"app=nginx:1@sha256:aa", "sidecar=envoy:2@sha256:bb"})
	b := Checksum([]string{"sidecar=envoy:2@sha256:bb", "app=nginx:1@sha256:aa"})
	if a != b {
		t.Errorf("Checksum depends on order: %s != %s", a, b)
	}
	// The definition, spelt out: sorted lines, each ending in a newline.
	sum := sha256.Sum256([]byte("app=nginx:1@sha256:aa\nsidecar=envoy:2@sha256:bb\n"))
	if want := hex.EncodeToString(sum[:]); a != want {
		t.Errorf("Checksum = %s, want %s", a, want)
	}
	if c := Checksum([]string{"app=nginx:1@sha256:ab", "sidecar=envoy:2@sha256:bb"}); c == a {
		t.Errorf("Checksum ignores a digest change")
	}
}

func TestRenderMovedTagChangesOnlyItsTemplates(t *testing.T) {
	t.Parallel()
	in := strings.Replace(deployment, "IMAGE", "app:1", 1) + "---\n" +
		strings.Replace(strings.Replace(deployment, "IMAGE", "db:1", 1), "name: web", "name: db", 1)
	f := newFixed()
	r := &Renderer{Resolver: f}
	before, err := r.Render(context.Background(), []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	f.moved["index.docker.io/library/app:1"] = "v2"
	after, err := r.Render(context.Background(), []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	b, a := mustSplit(t, before.Bytes()), mustSplit(t, after.Bytes())
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("want 2 documents, got %d and %d", len(b), len(a))
	}
	if string(a[0].Raw) == string(b[0].Raw) {
		t.Errorf("the app Deployment did not change after its tag moved")
	}
	if string(a[1].Raw) != string(b[1].Raw) {
		t.Errorf("the db Deployment changed although its image did not:\n%s\n%s", b[1].Raw, a[1].Raw)
	}
}

// TestRenderOutputOwnsItsBytes: a stream with something changed, even in
// its last document only, is written into a buffer of its own.
func TestRenderOutputOwnsItsBytes(t *testing.T) {
	for _, in := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n---\n" + strings.Replace(deployment, "IMAGE", "app:1", 1),
		strings.Replace(deployment, "IMAGE", "app:1", 1) + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
	} {
		b := []byte(in)
		res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		out := res.Bytes()
		if string(out) == in {
			t.Fatalf("Render() changed nothing in:\n%s", in)
		}
		want := string(out)
		for i := range out {
			out[i] = 'x'
		}
		if string(b) != in {
			t.Errorf("writing into Render().Bytes() changed its input:\n%s", b)
		}
		// Nor the output that the Result still holds.
		if got := string(res.Bytes()); got != want {
			t.Errorf("writing into Render().Bytes() changed the next Bytes():\n%s", got)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	notFound := errors.New("MANIFEST_UNKNOWN: manifest unknown")
	for _, tc := range []struct {
		desc, in string
		want     []string // substrings of the error
	}{
		{
			desc: "malformed YAML",
			in:   "---\n# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\n---\n# Source: c/templates/b.yaml\napiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: [x\n",
			want: []string{"document 2 (c/templates/b.yaml)", "line 1", "malformed YAML"},
		},
		{
			desc: "a sequence where an object belongs",
			in:   "- image: nginx\n",
			want: []string{"document 1", "line 1", "want a Kubernetes object (a mapping), found a sequence"},
		},
		{
			desc: "an image that is a number",
			in:   strings.Replace(deployment, "IMAGE", "42", 1),
			want: []string{"document 1, line 10", `Deployment/web container "app"`, "image is int 42"},
		},
		{
			desc: "an empty image",
			in:   strings.Replace(deployment, "IMAGE", `""`, 1),
			want: []string{"line 10", "image is empty"},
		},
		{
			desc: "a map as image",
			in:   strings.Replace(deployment, "IMAGE", "{repo: x}", 1),
			want: []string{"line 10", "image is a mapping"},
		},
		{
			desc: "an invalid reference",
			in:   strings.Replace(deployment, "IMAGE", "Nginx:1", 1),
			want: []string{"line 10", `parsing image "Nginx:1"`},
		},
		{
			desc: "an invalid digest",
			in:   strings.Replace(deployment, "IMAGE", "nginx@sha256:abc", 1),
			want: []string{"line 10", `parsing image "nginx@sha256:abc"`},
		},
		{
			desc: "every unresolvable image is listed",
			in: "# Source: c/templates/d.yaml\n" + strings.Replace(deployment, "IMAGE", "gone:1", 1) + "---\n" +
				strings.Replace(strings.Replace(deployment, "IMAGE", "ghcr.io/x/missing:2", 1), "name: web", "name: api", 1),
			want: []string{
				`document 1 (c/templates/d.yaml), line 11 (rendered line 10 of the template): Deployment/web container "app": resolving gone:1: MANIFEST_UNKNOWN`,
				`document 2, line 22: Deployment/api container "app": resolving ghcr.io/x/missing:2: MANIFEST_UNKNOWN`,
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixed()
			f.failed["index.docker.io/library/gone:1"] = notFound
			f.failed["ghcr.io/x/missing:2"] = notFound
			res, err := (&Renderer{Resolver: f}).Render(context.Background(), []byte(tc.in))
			if err == nil {
				t.Fatalf("Render() = nil error, want one mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Render() error = %q, want it to contain %q", err, w)
				}
			}
			if res.Bytes() != nil {
				t.Errorf("Render() returned output with an error: %q", res.Bytes())
			}
		})
	}
}

func TestRenderKeepUnresolved(t *testing.T) {
	t.Parallel()
	in := strings.Replace(deployment, "IMAGE", "gone:1", 1) + "---\n" +
		strings.Replace(strings.Replace(deployment, "IMAGE", "here:1", 1), "name: web", "name: api", 1)
	f := newFixed()
	f.failed["index.docker.io/library/gone:1"] = errors.New("unauthorized")
	var warnings []string
	r := &Renderer{Resolver: f, KeepUnresolved: true, Warnf: func(format string, args ...any) {
		warnings = append(warnings, fmt.Sprintf(format, args...))
	}}
	res, err := r.Render(context.Background(), []byte(in))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	docs := mustSplit(t, res.Bytes())
	if got := imageOf(t, string(docs[0].Raw)); got != "gone:1" {
		t.Errorf("unresolved image = %s, want it kept as gone:1", got)
	}
	if got := imageOf(t, string(docs[1].Raw)); !strings.HasPrefix(got, "here:1@sha256:") {
		t.Errorf("resolved image = %s, want it pinned", got)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "gone:1") || !strings.Contains(warnings[0], "unauthorized") {
		t.Errorf("warnings = %q, want one naming gone:1 and the cause", warnings)
	}
}

func TestRenderConcurrentCallsAgree(t *testing.T) {
	t.Parallel()
	// One Renderer serves concurrent renders; the output never depends on
	// scheduling.
	in := []byte(strings.Replace(deployment, "IMAGE", "a:1", 1) + "---\n" + strings.Replace(deployment, "IMAGE", "b:1", 1))
	r := &Renderer{Resolver: newFixed()}
	want, err := r.Render(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			got, err := r.Render(context.Background(), in)
			if err != nil || string(got.Bytes()) != string(want.Bytes()) {
				t.Errorf("concurrent Render() = %v, output differs: %v", err, string(got.Bytes()) != string(want.Bytes()))
			}
		})
	}
	wg.Wait()
}

func TestRenderLargeStream(t *testing.T) {
	t.Parallel()
	testfiles.Slow(t)
	// More than maxKeptBytes of documents wait for the resolver: the first
	// keep their parse, the rest are parsed again; both must agree.
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 3000}); err != nil {
		t.Fatal(err)
	}
	if buf.Len() < 2*maxKeptBytes {
		t.Fatalf("stream of %d bytes is too small to need parsing twice", buf.Len())
	}
	r := &Renderer{Resolver: newFixed()}
	res, err := r.Render(context.Background(), buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(res.Bytes(), []byte("@sha256:")); n != 6000 {
		t.Errorf("%d images pinned, want 6000", n)
	}
	if n := bytes.Count(res.Bytes(), []byte("checksum/images: '")); n != 3000 {
		t.Errorf("%d checksums, want 3000", n)
	}
	again, err := r.Render(context.Background(), res.Bytes())
	if err != nil || !bytes.Equal(again.Bytes(), res.Bytes()) {
		t.Errorf("the output of a large stream is not a fixed point (err %v)", err)
	}
}
