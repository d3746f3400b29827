package resolve

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
)

// pushTags pushes an image for each tag, created a minute apart in order.
func pushTags(t *testing.T, reg *testregistry.Registry, repo string, tags ...string) map[string]string {
	t.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	digests := map[string]string{}
	for i, tag := range tags {
		digests[tag] = reg.PushCreated(t, repo+":"+tag, start.Add(time.Duration(i)*time.Minute)).String()
	}
	return digests
}

func TestTagsPaginated(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushTags(t, reg, "shop/web", "1.4.1", "1.4.2", "1.5.0", "2.0.0-rc.1", "2.0.0")
	reg.PageTags(t, 2)
	r, _ := newTestResolver(t)
	repo := parseRef(t, reg.Ref("shop/web")).Context()
	tags, err := r.Tags(context.Background(), repo)
	must(t, err)
	if diff := cmp.Diff([]string{"1.4.1", "1.4.2", "1.5.0", "2.0.0", "2.0.0-rc.1"}, tags); diff != "" {
		t.Errorf("Tags (-want +got):\n%s", diff)
	}
	if n := reg.Count("GET tags"); n != 3 {
		t.Errorf("%d tags/list requests, want 3 pages of 2", n)
	}
	_, err = r.Tags(context.Background(), parseRef(t, reg.Ref("shop/none")).Context())
	if err == nil || !strings.Contains(err.Error(), "listing tags: "+reg.Ref("shop/none")+": ") || !strings.Contains(err.Error(), "404 Not Found") {
		t.Errorf("Tags(shop/none) = %v, want a 404 naming the repository", err)
	}
}

// newPolicyResolver returns a PolicyResolver over a registry resolver.
func newPolicyResolver(t *testing.T, policies *tagpolicy.TagPolicies, opts ...tagpolicy.PolicyOption) *tagpolicy.PolicyResolver {
	t.Helper()
	r, _ := newTestResolver(t)
	pr, err := tagpolicy.NewPolicyResolver(r, r, policies, opts...)
	must(t, err)
	return pr
}

func TestPolicyResolverStrategies(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	// Created in this order: latest picks 1.4.2, the last pushed, and not
	// 2.0.0, the highest version.
	digests := pushTags(t, reg, "shop/web", "1.4.1", "2.0.0", "1.5.0", "2.0.0-rc.1", "1.4.2")
	for _, tc := range []struct {
		policy, want string
	}{
		{"semver:~1.4", "1.4.2"},
		{"semver:^1", "1.5.0"},
		{"semver:>=1.0.0-0", "2.0.0"},
		{"semver:>=2.0.0-rc.0 <2.0.0", "2.0.0-rc.1"},
		{"latest", "1.4.2"},
		{"name:^1\\.", "1.5.0"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			var ps tagpolicy.TagPolicies
			must(t, ps.Add(reg.Ref("shop/web"), tc.policy))
			pr := newPolicyResolver(t, &ps)
			ref := parseRef(t, reg.Ref("shop/web:1.4"))
			res, err := pr.Resolve(context.Background(), ref)
			must(t, err)
			want := resolution.Resolution{Digest: mustHash(t, digests[tc.want]), Source: resolution.Registry, Tag: tc.want, MediaType: dockerManifest}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
			c, ok := pr.Choice(ref)
			if !ok || c.Tag != tc.want || c.Policy != tc.policy {
				t.Errorf("Choice = %+v, %t", c, ok)
			}
		})
	}
}

func TestPolicyResolverCost(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushTags(t, reg, "shop/web", "1.4.1", "1.4.2", "1.5.0", "2.0.0-rc.1", "2.0.0")
	pushTags(t, reg, "shop/api", "a", "b", "c", "d", "e", "f")
	pushTags(t, reg, "shop/db", "1")
	reg.PageTags(t, 2)
	reg.ResetCounts()
	var ps tagpolicy.TagPolicies
	must(t, ps.Add(reg.Ref("shop/web"), "semver:~1.4"))
	must(t, ps.Add(reg.Ref("shop/api"), "latest"))
	pr := newPolicyResolver(t, &ps, tagpolicy.WithMaxTags(2))
	// Many references of the two repositories at once, and one without a
	// policy.
	refs := []string{"shop/web:1.4", "shop/web:1", "shop/web", "shop/api:x", "shop/api:y", "shop/db:1"}
	parsed := make([]name.Reference, len(refs))
	for i, r := range refs {
		parsed[i] = parseRef(t, reg.Ref(r))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(refs)*4)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = pr.Resolve(context.Background(), parsed[i%len(parsed)])
		})
	}
	wg.Wait()
	must(t, errors.Join(errs...))
	// One listing per repository with a policy, all its pages: 3 pages of
	// shop/web, 3 of shop/api; none for shop/db.
	if n := reg.Count("GET tags"); n != 6 {
		t.Errorf("%d tags/list requests, want 6 (3 pages for each repository with a policy)", n)
	}
	// latest read the creation time of 2 candidates (f and e), each a GET
	// of the manifest; then a HEAD of each chosen tag and of shop/db:1.
	if n := reg.Count("GET manifests"); n != 2 {
		t.Errorf("%d manifest GETs, want 2 (--max-tags 2)", n)
	}
	if n := reg.Count("HEAD manifests"); n != 3 {
		t.Errorf("%d manifest HEADs, want 3", n)
	}
	c, _ := pr.Choice(parseRef(t, reg.Ref("shop/api:x")))
	if diff := cmp.Diff(tagpolicy.Choice{Policy: "latest", Tag: "f", Candidates: []string{"f", "e"}}, c); diff != "" {
		t.Errorf("Choice (-want +got):\n%s", diff)
	}
}

func TestPolicyResolverErrors(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushTags(t, reg, "shop/web", "1.4.1", "2.0.0")
	var ps tagpolicy.TagPolicies
	must(t, ps.Add(reg.Ref("shop/web"), "semver:~3"))
	must(t, ps.Add(reg.Ref("shop/none"), "latest"))
	pr := newPolicyResolver(t, &ps)
	_, err := pr.Resolve(context.Background(), parseRef(t, reg.Ref("shop/web:1")))
	if want := reg.Ref("shop/web") + ": policy semver:~3 matches none of its 2 tags; nearest: 2.0.0, 1.4.1"; err == nil || err.Error() != want {
		t.Errorf("Resolve = %v, want %q", err, want)
	}
	_, err = pr.Resolve(context.Background(), parseRef(t, reg.Ref("shop/none:1")))
	if err == nil || !strings.Contains(err.Error(), "listing tags: "+reg.Ref("shop/none")+": ") || !strings.Contains(err.Error(), "404 Not Found") {
		t.Errorf("Resolve = %v, want a 404 listing tags", err)
	}
	// A reference with a digest keeps it, and costs nothing.
	reg.ResetCounts()
	d := pushTags(t, reg, "shop/pinned", "1")["1"]
	reg.ResetCounts()
	must(t, ps.Add(reg.Ref("shop/pinned"), "latest"))
	res, err := pr.Resolve(context.Background(), parseRef(t, reg.Ref("shop/pinned@"+d)))
	if err != nil || res.Source != resolution.Pinned || res.Tag != "" || reg.Total() != 0 {
		t.Errorf("Resolve(pinned) = %+v, %v with %d requests, want it pinned, without requests", res, err, reg.Total())
	}
}

func TestPolicyResolverCache(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	digests := pushTags(t, reg, "shop/web", "1.4.1", "1.4.2")
	var ps tagpolicy.TagPolicies
	must(t, ps.Add(reg.Ref("shop/web"), "semver:~1.4"))
	dir := t.TempDir()
	run := func(policies *tagpolicy.TagPolicies) resolution.Resolution {
		t.Helper()
		r, _ := newTestResolver(t)
		cache, err := NewDirCache(dir)
		must(t, err)
		live := NewCachingResolver(r, cache, time.Hour, r.CacheKey, nil)
		pr, err := tagpolicy.NewPolicyResolver(live, r, policies, tagpolicy.WithChoiceCache(cache, time.Hour, r.CacheKey, nil))
		must(t, err)
		res, err := pr.Resolve(context.Background(), parseRef(t, reg.Ref("shop/web:1.4")))
		must(t, err)
		return res
	}
	if res := run(&ps); res.Tag != "1.4.2" || res.Digest.String() != digests["1.4.2"] || res.Source != resolution.Registry {
		t.Errorf("first run = %+v", res)
	}
	// A new matching tag within the TTL: the cached choice holds, and
	// costs no request.
	pushTags(t, reg, "shop/web", "1.4.3")
	reg.ResetCounts()
	if res := run(&ps); res.Tag != "1.4.2" || res.Source != resolution.Cache || reg.Total() != 0 {
		t.Errorf("second run = %+v with %d requests, want the cached choice without requests", res, reg.Total())
	}
	// Another policy is another key: it lists the tags again.
	var other tagpolicy.TagPolicies
	must(t, other.Add(reg.Ref("shop/web"), "semver:~1.4.0"))
	if res := run(&other); res.Tag != "1.4.3" || reg.Count("GET tags") != 1 {
		t.Errorf("other policy = %+v after %d listings, want 1.4.3 from a new listing", res, reg.Count("GET tags"))
	}
}

// dockerManifest is the media type of the images the test registries
// push (random.Image's).
const dockerManifest = "application/vnd.docker.distribution.manifest.v2+json"

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustHash(t *testing.T, s string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(s)
	must(t, err)
	return h
}

// indexCreated is an index of linux images, one per architecture, each
// created at the time that follows it: ("arm64", t1, "amd64", t2).
func indexCreated(t *testing.T, archTimes ...any) v1.ImageIndex {
	t.Helper()
	var idx v1.ImageIndex = empty.Index
	for i := 0; i+1 < len(archTimes); i += 2 {
		img, err := random.Image(64, 1)
		must(t, err)
		img, err = mutate.CreatedAt(img, v1.Time{Time: archTimes[i+1].(time.Time)})
		must(t, err)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: archTimes[i].(string)}}})
	}
	return idx
}

// TestCreatedIndex: the creation time of a multi-platform image is its
// linux/amd64 image's, or the configured platform's.
func TestCreatedIndex(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	t1, t2 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	idx := indexCreated(t, "arm64", t2, "amd64", t1)
	ref := parseRef(t, reg.Ref("multi:1"))
	must(t, remote.WriteIndex(ref, idx))
	for _, tc := range []struct {
		opts []Option
		want time.Time
	}{
		{nil, t1},
		{[]Option{WithPlatform(&v1.Platform{OS: "linux", Architecture: "arm64"})}, t2},
	} {
		r, _ := newTestResolver(t, tc.opts...)
		got, err := r.Created(context.Background(), ref)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("Created = %s, %v, want %s", got, err, tc.want)
		}
	}
}

// TestPolicyResolverOneListingPerRepository: references of one repository
// under different policies (Keel's, per reference) share one listing.
func TestPolicyResolverOneListingPerRepository(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	digests := pushTags(t, reg, "shop/web", "1.4.1", "1.4.2", "1.5.0", "2.0.0")
	reg.ResetCounts()
	var ps tagpolicy.TagPolicies
	must(t, ps.Add(reg.Ref("shop/web"), "semver:~1.4"))
	minor, patch := parseRef(t, reg.Ref("shop/web:1.4.1")), parseRef(t, reg.Ref("shop/web:1.5.0"))
	must(t, ps.AddReference(minor, "semver:>=1.4.1, <2.0.0-0"))
	must(t, ps.AddReference(patch, "digest"))
	pr := newPolicyResolver(t, &ps)
	for _, tc := range []struct {
		ref      string
		wantTag  string
		wantFrom string
	}{
		{"shop/web:1.4.1", "1.5.0", "1.5.0"},
		{"shop/web:1", "1.4.2", "1.4.2"},
		{"shop/web:1.5.0", "", "1.5.0"},
	} {
		res, err := pr.Resolve(context.Background(), parseRef(t, reg.Ref(tc.ref)))
		if err != nil || res.Tag != tc.wantTag || res.Digest.String() != digests[tc.wantFrom] {
			t.Errorf("Resolve(%s) = %+v, %v, want tag %q of %s", tc.ref, res, err, tc.wantTag, tc.wantFrom)
		}
	}
	if n := reg.Count("GET tags"); n != 1 {
		t.Errorf("%d tags/list requests, want 1 for the repository", n)
	}
}
