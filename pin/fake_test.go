package pin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
)

// fakeEpoch is when the first image of a fakeRegistry was created.
var fakeEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeRegistry is a registry of fixed images, for the workflows where
// resolution is not the point (as ko's tests use fixed builders): each
// pushed "repository:tag" resolves to the SHA-256 of its name and how
// often it was pushed, and was created a minute after the image pushed
// before it. It lists tags in push order and counts what it is asked.
// It is safe for concurrent use.
type fakeRegistry struct {
	mu       sync.Mutex
	tags     map[string][]string // repository → tags, first push order
	pushes   map[string]int      // "repository:tag" → pushes
	created  map[string]time.Time
	built    map[v1.Hash]time.Time // by digest: the creation time of its push
	asked    int                   // Resolve calls
	listings int                   // Tags calls
	builds   int                   // Built calls
}

var (
	_ resolution.Resolver = (*fakeRegistry)(nil)
	_ tagpolicy.TagSource = (*fakeRegistry)(nil)
	_ BuildTimes          = (*fakeRegistry)(nil)
)

// newFake returns a fakeRegistry with images ("host/repository:tag")
// pushed in order.
func newFake(images ...string) *fakeRegistry {
	f := &fakeRegistry{tags: map[string][]string{}, pushes: map[string]int{}, created: map[string]time.Time{}, built: map[v1.Hash]time.Time{}}
	for _, im := range images {
		f.push(im)
	}
	return f
}

// push pushes image anew: a tag pushed before moves to a new digest.
func (f *fakeRegistry) push(image string) v1.Hash {
	t, err := name.NewTag(image)
	if err != nil {
		panic(fmt.Sprintf("fakeRegistry.push(%q): %v", image, err))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := t.Context().Name() + ":" + t.TagStr()
	if f.pushes[key] == 0 {
		f.tags[t.Context().Name()] = append(f.tags[t.Context().Name()], t.TagStr())
	}
	f.pushes[key]++
	f.created[key] = fakeEpoch.Add(time.Duration(len(f.created)) * time.Minute)
	h := fakeDigest(key, f.pushes[key])
	f.built[h] = f.created[key]
	return h
}

// reproducible makes the image image resolves to now one built
// reproducibly, as ko and bazel build: its config says it was created at
// the Unix epoch.
func (f *fakeRegistry) reproducible(image string) *fakeRegistry {
	h := f.digest(image)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.built[h] = time.Unix(0, 0).UTC()
	return f
}

// digest is the digest image resolves to now.
func (f *fakeRegistry) digest(image string) v1.Hash {
	t, err := name.NewTag(image)
	if err != nil {
		panic(fmt.Sprintf("fakeRegistry.digest(%q): %v", image, err))
	}
	key := t.Context().Name() + ":" + t.TagStr()
	f.mu.Lock()
	defer f.mu.Unlock()
	return fakeDigest(key, f.pushes[key])
}

func fakeDigest(key string, push int) v1.Hash {
	sum := sha256.Sum256([]byte(key + "#" + strconv.Itoa(push)))
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// counts returns how many resolutions and tag listings were asked for,
// and starts counting anew (build times too).
func (f *fakeRegistry) counts() (asked, listings int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	asked, listings = f.asked, f.listings
	f.asked, f.listings, f.builds = 0, 0, 0
	return asked, listings
}

// buildCount returns how many build times were asked for since counts.
func (f *fakeRegistry) buildCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.builds
}

// Built implements BuildTimes: the creation time of the push that made
// the digest.
func (f *fakeRegistry) Built(_ context.Context, d name.Digest) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.builds++
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		return time.Time{}, err
	}
	t, ok := f.built[h]
	if !ok {
		return time.Time{}, fmt.Errorf("%s: MANIFEST_UNKNOWN: manifest unknown", d)
	}
	return t, nil
}

// Resolve implements resolution.Resolver.
func (f *fakeRegistry) Resolve(_ context.Context, ref name.Reference) (resolution.Resolution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	key := ref.Context().Name() + ":" + ref.Identifier()
	n := f.pushes[key]
	if n == 0 {
		return resolution.Resolution{}, fmt.Errorf("%s: MANIFEST_UNKNOWN: manifest unknown", ref)
	}
	return resolution.Resolution{Digest: fakeDigest(key, n), Source: resolution.Registry}, nil
}

// Tags implements tagpolicy.TagSource.
func (f *fakeRegistry) Tags(_ context.Context, repo name.Repository) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listings++
	tags, ok := f.tags[repo.Name()]
	if !ok {
		return nil, fmt.Errorf("listing tags of %s: NAME_UNKNOWN: repository name not known to registry", repo)
	}
	return append([]string(nil), tags...), nil
}

// Created implements tagpolicy.TagSource.
func (f *fakeRegistry) Created(_ context.Context, ref name.Reference) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.created[ref.Context().Name()+":"+ref.Identifier()]
	if !ok {
		return time.Time{}, fmt.Errorf("%s: MANIFEST_UNKNOWN: manifest unknown", ref)
	}
	return c, nil
}
