package testregistry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// PageTags makes the registry answer tags/list in pages of at most n
// tags, in name order, each page but the last with a Link header to the
// next one (the distribution spec's pagination), whatever page size the
// client asks for. Without it the registry answers with every tag.
func (r *Registry) PageTags(t TB, n int) {
	t.Helper()
	if n < 1 {
		t.Fatalf("PageTags(%d): want a positive page size", n)
	}
	r.Handle(func(w http.ResponseWriter, req *http.Request) bool {
		if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/tags/list") {
			return false
		}
		// The whole list from the registry, then the page.
		all := req.Clone(req.Context())
		all.URL.RawQuery = ""
		rec := httptest.NewRecorder()
		r.inner.ServeHTTP(rec, all)
		var list struct {
			Name string   `json:"name"`
			Tags []string `json:"tags"`
		}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &list) != nil {
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return true
		}
		slices.Sort(list.Tags)
		size := n
		if k, err := strconv.Atoi(req.URL.Query().Get("n")); err == nil && k > 0 && k < n {
			size = k
		}
		if last := req.URL.Query().Get("last"); last != "" {
			i, _ := slices.BinarySearch(list.Tags, last)
			for i < len(list.Tags) && list.Tags[i] <= last {
				i++
			}
			list.Tags = list.Tags[i:]
		}
		if len(list.Tags) > size {
			list.Tags = list.Tags[:size]
			w.Header().Set("Link", fmt.Sprintf(`<%s?n=%d&last=%s>; rel="next"`, req.URL.Path, size, list.Tags[size-1]))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
		return true
	})
}

// PushCreated pushes a small random image created at the given time as
// repo:tag (e.g. "app:1.0") and returns its digest.
func (r *Registry) PushCreated(t TB, repoTag string, created time.Time) v1.Hash {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatalf("random image: %v", err)
	}
	if img, err = mutate.CreatedAt(img, v1.Time{Time: created}); err != nil {
		t.Fatalf("setting the creation time: %v", err)
	}
	return r.Push(t, repoTag, img)
}

// PushConfig pushes an image without layers whose config is the bytes
// config, as they are (a "created" that is the epoch, not a time, or
// missing; a config of megabytes), with annotations on its manifest, as
// repo:tag, and returns its digest: for the images a v1.ConfigFile cannot
// write.
func (r *Registry) PushConfig(t TB, repoTag string, config []byte, annotations map[string]string) v1.Hash {
	t.Helper()
	ref := r.parse(t, repoTag)
	cfg := static.NewLayer(config, types.OCIConfigJSON)
	if err := remote.WriteLayer(ref.Context(), cfg, pushOption()); err != nil {
		t.Fatalf("pushing the config of %s: %v", ref, err)
	}
	h, err := cfg.Digest()
	if err != nil {
		t.Fatalf("config digest: %v", err)
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(config)), Digest: h},
		Layers:        []v1.Descriptor{},
		Annotations:   annotations,
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if err := remote.Put(ref, rawManifest(b), pushOption()); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, _, err := v1.SHA256(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("manifest digest: %v", err)
	}
	return d
}

// rawManifest is an OCI image manifest as bytes, for remote.Put.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)      { return m, nil }
func (rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
