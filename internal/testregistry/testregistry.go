// Package testregistry runs go-containerregistry's in-process registry on
// loopback for tests, benchmarks and the demo: real HTTP, real registry
// protocol, with request counting, injected latency and injected faults.
package testregistry

import (
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TB is the part of testing.TB the registry needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Registry is a running loopback registry. Its methods are safe for
// concurrent use.
type Registry struct {
	// Server is the running server; Server.URL is its address.
	Server *httptest.Server

	latency atomic.Int64 // nanoseconds added to every request

	mu       sync.Mutex
	counts   map[string]int // "METHOD /v2/<kind>" → requests
	total    int
	pushes   int // of total, the test's own (pushHeader)
	handlers []Handler
	fault    Handler // SetFault's, or nil

	inner    http.Handler    // the registry behind the handlers
	listener *switchListener // the server's, which Stop and Start switch
	closed   chan struct{}   // closed when the test ends, before the server
}

// Handler may answer a request instead of the registry: it returns true
// when it wrote a response. Handlers run in the order they were added.
type Handler func(w http.ResponseWriter, r *http.Request) bool

// New starts a registry that is closed when the test ends.
func New(t TB) *Registry {
	t.Helper()
	// The referrers API is on, as in current registries; NoReferrersAPI
	// turns it off.
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true))
	reg := &Registry{counts: map[string]int{}, inner: inner, closed: make(chan struct{})}
	reg.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg.count(r)
		if d := time.Duration(reg.latency.Load()); d > 0 {
			// A client that gave up (a timeout) ends the wait, so that
			// Close does not wait for it.
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		reg.mu.Lock()
		hs, fault := reg.handlers, reg.fault
		reg.mu.Unlock()
		if fault != nil && r.Header.Get(pushHeader) == "" && fault(w, r) {
			return
		}
		for _, h := range hs {
			if h(w, r) {
				return
			}
		}
		inner.ServeHTTP(w, r)
	}))
	reg.listener = newSwitchListener(reg.Server.Listener)
	reg.Server.Listener = reg.listener
	reg.Server.Start()
	t.Cleanup(reg.Server.Close)
	// Before Close, which waits for the requests a fault holds.
	t.Cleanup(func() { close(reg.closed) })
	return reg
}

// Host returns the registry's "127.0.0.1:port".
func (r *Registry) Host() string { return strings.TrimPrefix(r.Server.URL, "http://") }

// SetLatency makes every request wait d before it is answered.
func (r *Registry) SetLatency(d time.Duration) { r.latency.Store(int64(d)) }

// Handle adds a handler that may answer requests first.
func (r *Registry) Handle(h Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers = append(r.handlers, h)
}

func (r *Registry) count(req *http.Request) {
	kind := "other"
	switch p := req.URL.Path; {
	case p == "/v2/" || p == "/v2":
		kind = "ping"
	case strings.Contains(p, "/referrers/"):
		kind = "referrers"
	case strings.Contains(p, "/manifests/"):
		kind = "manifests"
	case strings.Contains(p, "/blobs/"):
		kind = "blobs"
	case strings.HasSuffix(p, "/tags/list"):
		kind = "tags"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[req.Method+" "+kind]++
	r.total++
	if req.Header.Get(pushHeader) != "" {
		r.pushes++
	}
}

// NoReferrersAPI makes the registry answer the OCI 1.1 referrers API
// with 404, as registries from before it do: clients fall back to the
// referrers tag schema.
func (r *Registry) NoReferrersAPI() {
	r.Handle(func(w http.ResponseWriter, req *http.Request) bool {
		if !strings.Contains(req.URL.Path, "/referrers/") {
			return false
		}
		w.WriteHeader(http.StatusNotFound)
		return true
	})
}

// Count returns how many requests of a kind were made, e.g.
// Count("HEAD manifests"), Count("GET tags") or Count("GET ping").
func (r *Registry) Count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[key]
}

// Counts returns how many requests of each kind were made, by the keys
// of Count.
func (r *Registry) Counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counts)
}

// Manifests returns how many manifest requests (any method) were made.
func (r *Registry) Manifests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k, v := range r.counts {
		if strings.HasSuffix(k, " manifests") {
			n += v
		}
	}
	return n
}

// Total returns how many requests were made.
func (r *Registry) Total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Pushes returns how many of the requests counted were the test's own
// pushes (Push, PushImage, PushIndex, PushTags).
func (r *Registry) Pushes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pushes
}

// ResetCounts forgets the requests counted so far.
func (r *Registry) ResetCounts() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts = map[string]int{}
	r.total, r.pushes = 0, 0
}

// Ref returns the full reference of repo (e.g. "app:1.0") on the registry.
func (r *Registry) Ref(repo string) string { return r.Host() + "/" + repo }

// PushImage pushes a small random image as repo:tag (e.g. "app:1.0") and
// returns its digest. Pushing again moves the tag to a new image.
func (r *Registry) PushImage(t TB, repoTag string) v1.Hash {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatalf("random image: %v", err)
	}
	return r.Push(t, repoTag, img)
}

// PushImages pushes a small random image for each repo:tag and returns
// their digests by repo:tag.
func (r *Registry) PushImages(t TB, repoTags ...string) map[string]string {
	t.Helper()
	digests := make(map[string]string, len(repoTags))
	for _, rt := range repoTags {
		digests[rt] = r.PushImage(t, rt).String()
	}
	return digests
}

// Push pushes img as repo:tag and returns its digest.
func (r *Registry) Push(t TB, repoTag string, img v1.Image) v1.Hash {
	t.Helper()
	ref := r.parse(t, repoTag)
	if err := remote.Write(ref, img, pushOption()); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatalf("digest of %s: %v", ref, err)
	}
	return d
}

// PushIndex pushes a multi-platform image, one random image per platform
// ("linux/amd64", "linux/arm64/v8"), as repo:tag. It returns the index
// digest and the digest of each platform's image.
func (r *Registry) PushIndex(t TB, repoTag string, platforms ...string) (v1.Hash, map[string]v1.Hash) {
	t.Helper()
	ref := r.parse(t, repoTag)
	var idx v1.ImageIndex = empty.Index
	children := map[string]v1.Hash{}
	for _, p := range platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			t.Fatalf("platform %q: %v", p, err)
		}
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatalf("random image: %v", err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatalf("config: %v", err)
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatalf("config: %v", err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatalf("digest: %v", err)
		}
		children[p] = d
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	if err := remote.WriteIndex(ref, idx, pushOption()); err != nil {
		t.Fatalf("pushing index %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatalf("index digest: %v", err)
	}
	return d, children
}

func (r *Registry) parse(t TB, repoTag string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(r.Ref(repoTag))
	if err != nil {
		t.Fatalf("parsing %q: %v", repoTag, err)
	}
	return ref
}

// Fatal is a TB for programs outside tests: Fatalf panics, Cleanup is
// deferred to the caller.
type Fatal struct{ cleanups []func() }

// Helper implements TB.
func (*Fatal) Helper() {}

// Fatalf implements TB by panicking.
func (*Fatal) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// Cleanup implements TB.
func (f *Fatal) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// Close runs the cleanups.
func (f *Fatal) Close() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// Run runs f, for a program outside tests, with a Fatal as its TB: the
// cleanups run when f returns, and a Fatalf (any panic) becomes Run's
// error.
func Run(f func(tb TB) error) (err error) {
	tb := &Fatal{}
	defer tb.Close()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return f(tb)
}
