package resolve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Resolver resolves image references to digests. It is safe for
// concurrent use; it resolves each distinct reference once for its
// lifetime (a failure is not remembered, so a later call asks again) and
// bounds how many registry requests run at once. Use one Resolver per run,
// so that registries are pinged once and tokens are shared.
type Resolver struct {
	o      options
	puller *remote.Puller
	sem    chan struct{}
	calls  sync.Map // ref.Name() → *call
}

// call is one resolution in flight or done.
type call struct {
	done chan struct{}
	hash v1.Hash
	err  error
}

// New returns a Resolver configured by opts.
func New(opts ...Option) (*Resolver, error) {
	o := options{
		keychain:       authn.DefaultKeychain,
		jobs:           DefaultJobs,
		requestTimeout: DefaultRequestTimeout,
		insecure:       map[string]bool{},
		logf:           func(string, ...any) {},
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("configuring resolver: %w", err)
		}
	}
	if o.transport == nil {
		o.transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	t := o.transport
	if len(o.insecure) > 0 {
		t = newInsecureTransport(t, o.insecure)
	}
	t = newPingCache(t)
	ropts := []remote.Option{
		remote.WithTransport(t),
		remote.WithAuthFromKeychain(o.keychain),
	}
	if o.userAgent != "" {
		ropts = append(ropts, remote.WithUserAgent(o.userAgent))
	}
	if o.platform != nil {
		ropts = append(ropts, remote.WithPlatform(*o.platform))
	}
	p, err := remote.NewPuller(ropts...)
	if err != nil {
		return nil, fmt.Errorf("configuring registry client: %w", err)
	}
	return &Resolver{o: o, puller: p, sem: make(chan struct{}, o.jobs)}, nil
}

// Resolve returns the digest the registry serves for ref now. A reference
// that carries a digest returns it without a request.
func (r *Resolver) Resolve(ctx context.Context, ref name.Reference) (v1.Hash, error) {
	if d, ok := ref.(name.Digest); ok {
		return v1.NewHash(d.DigestStr())
	}
	// Each distinct reference is resolved once: later callers wait for the
	// first. A failed call is forgotten so that it is not cached.
	c := &call{done: make(chan struct{})}
	if v, loaded := r.calls.LoadOrStore(ref.Name(), c); loaded {
		c = v.(*call)
		select {
		case <-c.done:
			return c.hash, c.err
		case <-ctx.Done():
			return v1.Hash{}, ctx.Err()
		}
	}
	c.hash, c.err = r.resolve(ctx, ref)
	if c.err != nil {
		r.calls.CompareAndDelete(ref.Name(), c)
	}
	close(c.done)
	return c.hash, c.err
}

// resolve asks the registry, within the concurrency bound.
func (r *Resolver) resolve(ctx context.Context, ref name.Reference) (v1.Hash, error) {
	select {
	case r.sem <- struct{}{}:
		defer func() { <-r.sem }()
	case <-ctx.Done():
		return v1.Hash{}, ctx.Err()
	}
	ref = r.withScheme(ref)
	if r.o.platform != nil {
		return r.platformDigest(ctx, ref)
	}
	rctx, cancel := context.WithTimeout(ctx, r.o.requestTimeout)
	defer cancel()
	desc, err := r.puller.Head(rctx, ref)
	if err == nil {
		r.o.logf("resolved %s to %s (HEAD)", ref, desc.Digest)
		return desc.Digest, nil
	}
	if permanent(err) || ctx.Err() != nil {
		return v1.Hash{}, err
	}
	// Some registries give no digest on HEAD; GET the manifest instead.
	r.o.logf("HEAD %s gave no digest (%v); trying GET", ref, err)
	gctx, gcancel := context.WithTimeout(ctx, r.o.requestTimeout)
	defer gcancel()
	d, err := r.puller.Get(gctx, ref)
	if err != nil {
		return v1.Hash{}, err
	}
	r.o.logf("resolved %s to %s (GET)", ref, d.Digest)
	return d.Digest, nil
}

// platformDigest returns the digest of the manifest for the configured
// platform: the matching child of an index, or a single-platform image
// whose config matches.
func (r *Resolver) platformDigest(ctx context.Context, ref name.Reference) (v1.Hash, error) {
	want := *r.o.platform
	rctx, cancel := context.WithTimeout(ctx, r.o.requestTimeout)
	defer cancel()
	d, err := r.puller.Get(rctx, ref)
	if err != nil {
		return v1.Hash{}, err
	}
	switch {
	case d.MediaType.IsIndex():
		idx, err := d.ImageIndex()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("reading index: %w", err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("reading index: %w", err)
		}
		var have []string
		for _, c := range m.Manifests {
			if c.Platform == nil {
				continue
			}
			if c.Platform.Satisfies(want) {
				r.o.logf("resolved %s for %s to %s", ref, want, c.Digest)
				return c.Digest, nil
			}
			have = append(have, c.Platform.String())
		}
		return v1.Hash{}, fmt.Errorf("no manifest for platform %s (the index has %s)", want, strings.Join(have, ", "))
	case d.MediaType.IsImage():
		img, err := d.Image()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("reading image: %w", err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("reading image config: %w", err)
		}
		if p := cf.Platform(); p == nil || !p.Satisfies(want) {
			return v1.Hash{}, fmt.Errorf("image is for platform %s, not %s", cf.Platform(), want)
		}
		return d.Digest, nil
	}
	return v1.Hash{}, fmt.Errorf("unexpected media type %s", d.MediaType)
}

// withScheme marks a reference to an insecure registry as such, so that
// it may be reached over plain HTTP.
func (r *Resolver) withScheme(ref name.Reference) name.Reference {
	if !r.o.insecure[ref.Context().RegistryStr()] {
		return ref
	}
	if ir, err := name.ParseReference(ref.String(), name.Insecure); err == nil {
		return ir
	}
	return ref
}

// permanent reports whether err is a registry answer that asking again, or
// with GET, cannot change.
func permanent(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	switch te.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return true
	}
	return false
}

// newInsecureTransport skips certificate verification for the insecure
// hosts only.
func newInsecureTransport(base http.RoundTripper, hosts map[string]bool) http.RoundTripper {
	ht, ok := base.(*http.Transport)
	if !ok {
		return base
	}
	unverified := ht.Clone()
	if unverified.TLSClientConfig == nil {
		unverified.TLSClientConfig = &tls.Config{}
	}
	unverified.TLSClientConfig.InsecureSkipVerify = true //nolint:gosec // only for hosts named with --insecure-registry
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hosts[req.URL.Host] {
			return unverified.RoundTrip(req)
		}
		return base.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
