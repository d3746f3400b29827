package resolve

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// TestBuilt reads the build time of images on a loopback registry: from
// the manifest's annotation without a config request, else from the
// config; a time that is not one is none, a config too large or a blob
// the registry fails is an error. It counts the requests of each.
func TestBuilt(t *testing.T) {
	t.Parallel()
	built := time.Date(2026, 12, 1, 14, 3, 0, 0, time.UTC)
	annotated := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	config := func(created string) []byte {
		return []byte(`{"architecture":"amd64","os":"linux","created":` + created + `,"rootfs":{"type":"layers","diff_ids":[]}}`)
	}
	for _, tc := range []struct {
		desc        string
		config      []byte
		annotations map[string]string
		failBlob    bool
		want        time.Time
		wantErr     string
		blobs       int // GET blobs wanted
	}{
		{desc: "config", config: config(`"2026-12-01T14:03:00Z"`), want: built, blobs: 1},
		{desc: "config with fractions and a zone", config: config(`"2026-12-01T15:03:00.5+01:00"`), want: built.Add(500 * time.Millisecond), blobs: 1},
		{desc: "annotation", config: config(`"2026-12-01T14:03:00Z"`), annotations: map[string]string{AnnotationCreated: "2026-11-30T09:00:00Z"}, want: annotated, blobs: 0},
		{desc: "annotation not a time", config: config(`"2026-12-01T14:03:00Z"`), annotations: map[string]string{AnnotationCreated: "yesterday"}, want: built, blobs: 1},
		{desc: "annotation at the epoch", config: config(`"2026-12-01T14:03:00Z"`), annotations: map[string]string{AnnotationCreated: "1970-01-01T00:00:00Z"}, want: built, blobs: 1},
		{desc: "config at the epoch (ko, bazel)", config: config(`"1970-01-01T00:00:00Z"`), want: time.Unix(0, 0), blobs: 1},
		{desc: "config without created", config: []byte(`{"os":"linux"}`), blobs: 1},
		{desc: "config created not a time", config: config(`"yesterday"`), blobs: 1},
		{desc: "config created a number", config: config(`12`), blobs: 1},
		{desc: "config not JSON", config: []byte(`{`), wantErr: "reading image config", blobs: 1},
		{desc: "config too large", config: config(`"2026-12-01T14:03:00Z","padding":"` + strings.Repeat("x", maxBuiltConfig) + `"`), wantErr: "larger than", blobs: 1},
		{desc: "config refused", config: config(`"2026-12-01T14:03:00Z"`), failBlob: true, wantErr: "403", blobs: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			reg := testregistry.New(t)
			h := reg.PushConfig(t, "shop/web:1", tc.config, tc.annotations)
			if tc.failBlob {
				reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
					if !strings.Contains(r.URL.Path, "/blobs/") {
						return false
					}
					w.WriteHeader(http.StatusForbidden)
					return true
				})
			}
			reg.ResetCounts()
			r, _ := newTestResolver(t)
			d := parseRef(t, reg.Ref("shop/web:1")).Context().Digest(h.String())
			got, err := r.Built(context.Background(), d)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), h.String()) {
					t.Errorf("Built = %s, %v, want an error with %q naming the digest", got, err, tc.wantErr)
				}
			case err != nil || !got.Equal(tc.want):
				t.Errorf("Built = %s, %v, want %s", got, err, tc.want)
			}
			if m, b := reg.Count("GET manifests"), reg.Count("GET blobs"); m != 1 || b != tc.blobs {
				t.Errorf("Built asked %d manifests and %d blobs, want 1 and %d", m, b, tc.blobs)
			}
		})
	}
}

// TestBuiltIndex reads the build time of a multi-platform image: the
// index's annotation, without its child; else the linux/amd64 image's,
// or the configured platform's.
func TestBuiltIndex(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	amd, arm, idxTime := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	idx := indexCreated(t, "arm64", arm, "amd64", amd)
	annotatedIdx := mutate.Annotations(idx, map[string]string{AnnotationCreated: idxTime.Format(time.RFC3339)}).(v1.ImageIndex)
	digest := func(repo string, idx v1.ImageIndex) name.Digest {
		ref := parseRef(t, reg.Ref(repo))
		must(t, remote.WriteIndex(ref, idx))
		h, err := idx.Digest()
		must(t, err)
		return ref.Context().Digest(h.String())
	}
	plain, annotated := digest("multi:1", idx), digest("annotated:1", annotatedIdx)
	for _, tc := range []struct {
		desc      string
		d         name.Digest
		opts      []Option
		want      time.Time
		manifests int
		blobs     int
	}{
		{"linux/amd64", plain, nil, amd, 2, 1},
		{"the platform", plain, []Option{WithPlatform(&v1.Platform{OS: "linux", Architecture: "arm64"})}, arm, 2, 1},
		{"annotated index", annotated, nil, idxTime, 1, 0},
	} {
		reg.ResetCounts()
		r, _ := newTestResolver(t, tc.opts...)
		got, err := r.Built(context.Background(), tc.d)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("%s: Built = %s, %v, want %s", tc.desc, got, err, tc.want)
		}
		if m, b := reg.Count("GET manifests"), reg.Count("GET blobs"); m != tc.manifests || b != tc.blobs {
			t.Errorf("%s: Built asked %d manifests and %d blobs, want %d and %d", tc.desc, m, b, tc.manifests, tc.blobs)
		}
	}
}

// TestBuiltSharesTheToken reads the build time of a digest just resolved
// on a registry behind a token server: the resolution's token and
// credentials serve, with no second token request.
func TestBuiltSharesTheToken(t *testing.T) {
	reg := testregistry.New(t)
	ts := testregistry.NewTokenServer(t, "bob", "hunter22")
	want := time.Date(2026, 12, 1, 14, 3, 0, 0, time.UTC)
	reg.PushCreated(t, "team/a:1", want)
	reg.Handle(ts.Guard())
	writeDockerConfig(t, reg.Host(), "bob", "hunter22")
	r, _ := newTestResolver(t, WithKeychain(authn.DefaultKeychain))
	ref := parseRef(t, reg.Ref("team/a:1"))
	res, err := r.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Built(context.Background(), ref.Context().Digest(res.Digest.String()))
	if err != nil || !got.Equal(want) {
		t.Errorf("Built = %s, %v, want %s", got, err, want)
	}
	if n := ts.Exchanges(); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}
}
