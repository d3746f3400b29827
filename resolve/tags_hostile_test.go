package resolve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// tagsPage answers tags/list requests with fn's tags and Link header ("":
// none), counting them.
func tagsPage(n *atomic.Int32, fn func(r *http.Request) (tags []string, link string)) testregistry.Handler {
	return func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, "/tags/list") {
			return false
		}
		n.Add(1)
		tags, link := fn(r)
		if link != "" {
			w.Header().Set("Link", link)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"name": "shop/web", "tags": tags})
		return true
	}
}

// TestTagsHostileRegistry lists the tags of registries that answer
// tags/list in bad faith: each listing ends with a one-line error within
// the Resolver's tag limits, and credentials go to the registry only.
func TestTagsHostileRegistry(t *testing.T) {
	t.Parallel()
	// elsewhere is another loopback server: no request may reach it.
	var elsewhereHits atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhereHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"tags":["stolen"]}`))
	}))
	t.Cleanup(elsewhere.Close)
	lim := tagLimits{pages: 5, tags: 50, bytes: 1000}
	for _, tc := range []struct {
		desc string
		page func(r *http.Request) ([]string, string)
		// want is a substring of the error; pages how many tags/list
		// requests are made.
		want  string
		pages int32
	}{
		{
			desc: "endless pagination",
			page: func(r *http.Request) ([]string, string) {
				n := len(r.URL.Query().Get("last"))
				return []string{"t"}, fmt.Sprintf(`<%s?last=%s>; rel="next"`, r.URL.Path, strings.Repeat("x", n+1))
			},
			want:  "still another page after 5 pages of tags",
			pages: 5,
		},
		{
			desc: "a Link to the page itself",
			page: func(r *http.Request) ([]string, string) {
				return []string{"t"}, fmt.Sprintf(`<%s?last=a>; rel="next"`, r.URL.Path)
			},
			want:  "page 2 links back to an earlier page",
			pages: 2,
		},
		{
			desc: "a loop of two pages",
			page: func(r *http.Request) ([]string, string) {
				next := "a"
				if r.URL.Query().Get("last") == "a" {
					next = "b"
				}
				return []string{"t"}, fmt.Sprintf(`<%s?last=%s>; rel="next"`, r.URL.Path, next)
			},
			want:  "page 3 links back to an earlier page",
			pages: 3,
		},
		{
			desc: "too many tags on one page",
			page: func(*http.Request) ([]string, string) {
				tags := make([]string, 51)
				for i := range tags {
					tags[i] = fmt.Sprint(i)
				}
				return tags, ""
			},
			want:  "more than 50 tags in 1 pages",
			pages: 1,
		},
		{
			desc: "too many tags over several pages",
			page: func(r *http.Request) ([]string, string) {
				last := r.URL.Query().Get("last")
				return make([]string, 20), fmt.Sprintf(`<%s?last=%s>; rel="next"`, r.URL.Path, last+"x")
			},
			want:  "more than 50 tags in 3 pages",
			pages: 3,
		},
		{
			desc: "a huge tag name",
			page: func(*http.Request) ([]string, string) {
				return []string{strings.Repeat("a", 1001)}, ""
			},
			want:  "more than 1000 bytes of tag names in 1 pages",
			pages: 1,
		},
		{
			desc: "a Link to another host",
			page: func(*http.Request) ([]string, string) {
				return []string{"t"}, fmt.Sprintf(`<%s/v2/shop/web/tags/list?last=t>; rel="next"`, elsewhere.URL)
			},
			want:  "pagination URL host does not match registry host",
			pages: 1,
		},
		{
			desc: "a Link to another scheme",
			page: func(r *http.Request) ([]string, string) {
				return []string{"t"}, fmt.Sprintf(`<https://%s/v2/shop/web/tags/list?last=t>; rel="next"`, r.Host)
			},
			want:  `pagination URL scheme "https" does not match registry scheme "http"`,
			pages: 1,
		},
		{
			desc: "a malformed Link",
			page: func(*http.Request) ([]string, string) {
				return []string{"t"}, "next page\nplease"
			},
			want:  "failed to parse link header",
			pages: 1,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			elsewhereHits.Store(0)
			reg := testregistry.New(t)
			// The registry takes Basic credentials; they must never reach
			// another host.
			reg.Handle(testregistry.BasicAuth("dave", "c0rrect-horse"))
			var n atomic.Int32
			reg.Handle(tagsPage(&n, tc.page))
			r, _ := newTestResolver(t, WithKeychain(staticKeychain{"dave", "c0rrect-horse"}))
			r.o.tagLimits = lim
			tags, err := r.Tags(context.Background(), parseRef(t, reg.Ref("shop/web")).Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Tags = %q, %v, want an error with %q", tags, err, tc.want)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || strings.Contains(msg, "c0rrect-horse") {
				t.Errorf("Tags error %q: want one line, without the password", msg)
			}
			if got := n.Load(); got != tc.pages {
				t.Errorf("%d tags/list requests, want %d", got, tc.pages)
			}
			if got := elsewhereHits.Load(); got != 0 {
				t.Errorf("%d requests reached another host", got)
			}
		})
	}
}

// TestTagsWithinLimits lists exactly as much as the limits allow.
func TestTagsWithinLimits(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	var n atomic.Int32
	reg.Handle(tagsPage(&n, func(r *http.Request) ([]string, string) {
		last := r.URL.Query().Get("last")
		if len(last) == 4 {
			return []string{"abcd"}, ""
		}
		return []string{"abcd"}, fmt.Sprintf(`<%s?last=%s>; rel="next"`, r.URL.Path, last+"x")
	}))
	r, _ := newTestResolver(t)
	r.o.tagLimits = tagLimits{pages: 5, tags: 5, bytes: 20}
	tags, err := r.Tags(context.Background(), parseRef(t, reg.Ref("shop/web")).Context())
	if err != nil || len(tags) != 5 || n.Load() != 5 {
		t.Errorf("Tags = %q, %v after %d requests, want 5 tags in 5 pages", tags, err, n.Load())
	}
}

// TestCreatedHostileConfig reads the creation time of images whose config
// blob is not what the manifest says: another blob, more than a registry
// answer may hold, or not JSON. Each is an error naming the image.
func TestCreatedHostileConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		body func(served []byte) []byte
		want string
	}{
		{"another blob (a newer creation time)", func(served []byte) []byte {
			return []byte(strings.Replace(string(served), "2026", "2099", 1))
		}, "error verifying sha256 checksum"},
		// The manifest says the size, and the digest, of a config larger
		// than a registry answer may be.
		{"a huge config", nil, "more than"},
		{"not JSON", func([]byte) []byte { return []byte("{") }, "reading image config"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			reg := testregistry.New(t)
			img, err := random.Image(64, 1)
			must(t, err)
			img, err = mutate.CreatedAt(img, v1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
			must(t, err)
			if tc.body == nil {
				img, err = mutate.Config(img, v1.Config{Labels: map[string]string{"padding": strings.Repeat("x", regtransport.MaxResponseBody)}})
				must(t, err)
			}
			reg.Push(t, "shop/web:1", img)
			cfg, err := img.ConfigName()
			must(t, err)
			raw, err := img.RawConfigFile()
			must(t, err)
			reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
				if tc.body == nil || !strings.HasSuffix(r.URL.Path, "/blobs/"+cfg.String()) {
					return false
				}
				_, _ = w.Write(tc.body(raw))
				return true
			})
			r, _ := newTestResolver(t)
			got, err := r.Created(context.Background(), parseRef(t, reg.Ref("shop/web:1")))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), reg.Ref("shop/web:1")) {
				t.Errorf("Created = %s, %v, want an error with %q naming the image", got, err, tc.want)
			}
		})
	}
}

// TestPolicyChosenTagGone lists a tag whose manifest the registry does not
// have: the resolution fails, naming the policy and the tag.
func TestPolicyChosenTagGone(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushTags(t, reg, "shop/web", "1.0.0")
	var n atomic.Int32
	reg.Handle(tagsPage(&n, func(*http.Request) ([]string, string) { return []string{"1.0.0", "9.9.9"}, "" }))
	var ps tagpolicy.TagPolicies
	must(t, ps.Add(reg.Ref("shop/web"), "semver:*"))
	pr := newPolicyResolver(t, &ps)
	_, err := pr.Resolve(context.Background(), parseRef(t, reg.Ref("shop/web:1")))
	want := reg.Ref("shop/web:1") + ": policy semver:* chose 9.9.9: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "404") {
		t.Errorf("Resolve = %v, want an error that begins %q and says 404", err, want)
	}
}
