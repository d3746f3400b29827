package resolve

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/digestpin/digestpin/internal/redact"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/credentials"
	"github.com/digestpin/digestpin/resolve/internal/hosts"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// Resolver resolves image references to digests. It is safe for
// concurrent use; it resolves each distinct reference once for its
// lifetime and bounds how many references are resolved at once. The
// failure of one reference is not remembered, so a later call asks again;
// the failure of a registry as a whole (its ping, connection, TLS, or
// credentials the token server refuses) and a registry that hangs are
// remembered, and later references to it fail at once with that cause.
// Use one Resolver per run, so that each registry is pinged once, its
// tokens are shared, and a failing registry is given up on once.
type Resolver struct {
	o        options
	red      *redact.Redactor
	base     http.RoundTripper
	sem      chan struct{}
	calls    sync.Map   // ref.Name() → *call
	sessions sync.Map   // scheme://registry → *session
	ac       *authCache // nil: no auth cache
}

// call is one resolution in flight or done.
type call struct {
	done   chan struct{}
	hash   v1.Hash
	mt     types.MediaType
	mirror string // the mirror host that answered, or ""
	err    error
}

// New returns a Resolver configured by opts.
func New(opts ...Option) (*Resolver, error) {
	o := options{
		keychain:       credentials.DockerKeychain,
		jobs:           DefaultJobs,
		requestTimeout: DefaultRequestTimeout,
		insecure:       map[string]bool{},
		mirrors:        map[string][]mirror{},
		logf:           func(string, ...any) {},
		warnf:          func(string, ...any) {},
		tagLimits:      defaultTagLimits,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("configuring resolver: %w", err)
		}
	}
	if o.mirrorOnly && len(o.mirrors) == 0 {
		return nil, fmt.Errorf("configuring resolver: %w", &OptionError{Option: "WithMirrorOnly", Needs: "WithMirror"})
	}
	// Every message goes through the redactor, those of the retries too.
	red := redact.New()
	logf := o.logf
	o.logf = func(format string, args ...any) { logf("%s", red.Redact(fmt.Sprintf(format, args...))) }
	warnf := o.warnf
	o.warnf = func(format string, args ...any) { warnf("%s", red.Redact(fmt.Sprintf(format, args...))) }
	// The HTTP layer, under the registry protocol: see package
	// transport.
	var ac *authCache
	var pings regtransport.PingStore
	if o.authCache != nil {
		ac = newAuthCache(o.authCache, o.warnf, o.logf)
		if o.authNow != nil {
			ac.now = o.authNow
		}
		pings = ac
	}
	base, err := regtransport.New(regtransport.Options{
		Base:           o.transport,
		CAFiles:        o.caFiles,
		Insecure:       slices.Collect(maps.Keys(o.insecure)),
		Retry:          o.retry,
		RequestTimeout: o.requestTimeout,
		Logf:           o.logf,
		Redactor:       red,
		Lookup:         o.lookup,
		Classify:       o.classify,
		Pings:          pings,
	})
	if err != nil {
		return nil, fmt.Errorf("configuring resolver: %w", optionError("WithCAFiles", err))
	}
	// go-containerregistry appends its own User-Agent to ours, and wraps
	// nothing more around a transport that already sets one.
	base = transport.NewUserAgent(base, o.userAgent)
	return &Resolver{o: o, red: red, base: base, sem: make(chan struct{}, o.jobs), ac: ac}, nil
}

// Platform returns the platform whose manifest the Resolver pins
// (WithPlatform), or nil when it pins the multi-platform index. The
// caller may not change it.
func (r *Resolver) Platform() *v1.Platform {
	if r.o.platform == nil {
		return nil
	}
	p := *r.o.platform
	return &p
}

// Mirrors returns the mirrors the Resolver was given, in order, as
// WithMirror was given them: for a caller to tell which of them no image
// of its own is from.
func (r *Resolver) Mirrors() []Mirror { return slices.Clone(r.o.mirrorList) }

// UsesMirror reports whether the Resolver would ask mirror m about ref:
// whether ref's registry is m's From, however either spells the host.
func UsesMirror(m Mirror, ref name.Reference) bool {
	return hosts.Key(m.From) == hosts.Key(ref.Context().RegistryStr())
}

// Resolve returns the digest the registry serves for ref now, with source
// resolution.Registry. A reference that carries a digest returns it
// without a request, with source resolution.Pinned. An error is one line
// that names the image, each registry or mirror asked, its answer and the
// attempts made; errors.As finds the registry's *transport.Error.
func (r *Resolver) Resolve(ctx context.Context, ref name.Reference) (resolution.Resolution, error) {
	if d, ok := ref.(name.Digest); ok {
		h, err := v1.NewHash(d.DigestStr())
		return resolution.Resolution{Digest: h, Source: resolution.Pinned}, err
	}
	c, err := r.digest(ctx, ref)
	if err != nil {
		return resolution.Resolution{}, err
	}
	return resolution.Resolution{Digest: c.hash, Source: resolution.Registry, Mirror: c.mirror, MediaType: string(c.mt)}, nil
}

// digest resolves a reference without a digest.
func (r *Resolver) digest(ctx context.Context, ref name.Reference) (*call, error) {
	// Each distinct reference is resolved once: later callers wait for the
	// first. A failed call is forgotten so that it is not cached.
	c := &call{done: make(chan struct{})}
	if v, loaded := r.calls.LoadOrStore(ref.Name(), c); loaded {
		c = v.(*call)
		select {
		case <-c.done:
			return c, c.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", ref, ctx.Err())
		}
	}
	var d v1.Descriptor
	d, c.mirror, c.err = r.resolve(ctx, ref)
	c.hash, c.mt = d.Digest, d.MediaType
	if c.err != nil {
		r.calls.CompareAndDelete(ref.Name(), c)
	}
	close(c.done)
	return c, c.err
}

// candidate is one registry to ask about a reference: a mirror, or the
// reference's own registry.
type candidate struct {
	ref    name.Reference
	mirror bool
	sess   *session
	// repoOnly names the candidate by its repository in errors: the
	// request was about the repository (a tag listing), not ref.
	repoOnly bool
}

// resolve asks the mirrors and the registry in turn, within the
// concurrency bound. mirror is the host of the mirror that answered, ""
// for the registry itself. When a mirror's answer is checked against its
// source (WithMirrorLag), the source is asked at the same time as the
// first mirror: a check costs no round trip, and when every mirror
// fails the source's answer is there already.
func (r *Resolver) resolve(ctx context.Context, ref name.Reference) (h v1.Descriptor, mirror string, err error) {
	cands, done, err := r.slot(ctx, ref)
	if err != nil {
		return v1.Descriptor{}, "", err
	}
	defer done()
	var src *sourceTry
	if last := len(cands) - 1; r.o.mirrorLag != MirrorLagOff && last > 0 && !cands[last].mirror {
		src = r.trySource(ctx, cands[last])
		cands = cands[:last]
	}
	// Then ask each candidate in turn until one answers. A platform
	// mismatch is an answer: no other candidate is asked. An answer is
	// not logged here: the caller logs each image once, with where its
	// digest came from (Resolution.Mirror).
	var fails []tryFailure
	for _, c := range cands {
		tr := &regtransport.Trace{}
		h, err := r.resolveAt(regtransport.WithTrace(ctx, tr), c)
		if err == nil {
			if c.mirror {
				mirror = c.ref.Context().RegistryStr()
			}
			if src != nil {
				return r.compareSource(ctx, ref, c, h, src)
			}
			return h, mirror, nil
		}
		fails = append(fails, tryFailure{c: c, err: err, tr: tr})
		var pe *platformError
		if errors.As(err, &pe) || ctx.Err() != nil {
			if src != nil {
				// The source's request ends on its own: it holds
				// this slot, and a cancelled ping would count as the
				// registry's failure.
				<-src.done
			}
			return v1.Descriptor{}, "", newError(ctx, ref, fails, r.red)
		}
		if c.mirror {
			r.o.logf("mirror %s failed: %s", c.ref, describe(ctx, err, r.red))
		}
	}
	if src == nil {
		// No mirror, or the lag unchecked: the registry is the last
		// candidate, asked in the loop.
		return v1.Descriptor{}, "", newError(ctx, ref, fails, r.red)
	}
	<-src.done
	if src.err == nil {
		return src.desc, "", nil
	}
	fails = append(fails, tryFailure{c: src.c, err: src.err, tr: src.tr})
	return v1.Descriptor{}, "", newError(ctx, ref, fails, r.red)
}

// sourceTry is the source registry's answer to a reference that its
// mirrors are asked about at the same time.
type sourceTry struct {
	c    candidate
	done chan struct{}
	desc v1.Descriptor
	err  error
	tr   *regtransport.Trace
}

// trySource asks c, the source registry, in the background.
func (r *Resolver) trySource(ctx context.Context, c candidate) *sourceTry {
	s := &sourceTry{c: c, done: make(chan struct{}), tr: &regtransport.Trace{}}
	go func() {
		defer close(s.done)
		s.desc, s.err = r.resolveAt(regtransport.WithTrace(ctx, s.tr), c)
	}()
	return s
}

// compareSource returns the answer h of mirror candidate c once the
// source's answer is in: the same digest, or a source that could not
// answer, keeps it; another digest fails ref (MirrorLagError) or is
// warned about (MirrorLagWarn).
func (r *Resolver) compareSource(ctx context.Context, ref name.Reference, c candidate, h v1.Descriptor, src *sourceTry) (v1.Descriptor, string, error) {
	<-src.done
	mirror := c.ref.Context().RegistryStr()
	switch {
	case src.err != nil:
		r.o.logf("%s: the mirror's answer %s is not compared with %s, which failed: %s", c.ref, h.Digest, src.c.ref, describe(ctx, src.err, r.red))
		return h, mirror, nil
	case src.desc.Digest == h.Digest:
		return h, mirror, nil
	}
	why := r.partOf(ctx, src, h)
	if why == "" {
		why = "the mirror lags behind its source or holds another image"
	}
	if r.o.mirrorLag == MirrorLagWarn {
		r.o.warnf("%s: mirror %s serves %s, but %s serves %s: %s; pinning the mirror's digest (%s)", ref, c.ref, h.Digest, src.c.ref, src.desc.Digest, why, optionName(ctx, "WithMirrorLag", "warn"))
		return h, mirror, nil
	}
	return v1.Descriptor{}, "", &MirrorMismatchError{Reference: ref.String(), Mirror: c.ref.String(), MirrorDigest: h.Digest, Source: src.c.ref.String(), SourceDigest: src.desc.Digest, why: why, hint: optionName(ctx, "WithMirrorLag", "warn")}
}

// partOf says which image of the source's index the mirror's answer h
// is, when the source served an index and the mirror one image of it (a
// cache that kept the platform it was pulled for): "the mirror holds only
// the linux/amd64 image of the registry's index"; "" otherwise. It costs
// a GET of the index, made only when the digests differ; a failure says
// nothing.
func (r *Resolver) partOf(ctx context.Context, src *sourceTry, h v1.Descriptor) string {
	if !src.desc.MediaType.IsIndex() || h.MediaType.IsIndex() {
		return ""
	}
	ctx = regtransport.WithRegistry(ctx, src.c.ref.Context().RegistryStr())
	p, err := src.c.sess.puller(ctx, src.c.ref.Context().RepositoryStr())
	if err != nil {
		return ""
	}
	d, err := p.Get(ctx, src.c.ref.Context().Digest(src.desc.Digest.String()))
	if err != nil || !d.MediaType.IsIndex() {
		return ""
	}
	idx, err := d.ImageIndex()
	if err != nil {
		return ""
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return ""
	}
	for _, c := range m.Manifests {
		if c.Digest != h.Digest {
			continue
		}
		if c.Platform == nil {
			return "the mirror holds only one image of the registry's index"
		}
		return "the mirror holds only the " + c.Platform.String() + " image of the registry's index"
	}
	return ""
}

// MirrorMismatchError is a mirror that serves another digest than its source
// registry for the same tag (WithMirrorLag).
type MirrorMismatchError struct {
	// Reference is the image as asked; Mirror and Source name it on
	// the mirror and the source registry.
	Reference, Mirror, Source  string
	MirrorDigest, SourceDigest v1.Hash
	why, hint                  string
}

func (e *MirrorMismatchError) Error() string {
	return fmt.Sprintf("%s: mirror %s serves %s, but %s serves %s: %s (%s pins the mirror's digest anyway)", e.Reference, e.Mirror, e.MirrorDigest, e.Source, e.SourceDigest, e.why, e.hint)
}

// optionName is how the person set option opt to value: "--mirror-lag=warn"
// with a flag name on the context (resolution.OptionName), else
// "WithMirrorLag(warn)".
func optionName(ctx context.Context, opt, value string) string {
	if n := resolution.OptionName(ctx, opt); n != opt {
		return n + "=" + value
	}
	return opt + "(" + value + ")"
}

// slot returns ref's candidates once the Resolver's concurrency bound
// lets it ask them; done gives the slot back. First it announces the
// candidates' repositories to their sessions, before waiting for the slot,
// so that a registry's first token covers every reference waiting for it.
func (r *Resolver) slot(ctx context.Context, ref name.Reference) (cands []candidate, done func(), err error) {
	cands, err = r.candidates(ref)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range cands {
		c.sess.want(c.ref.Context().RepositoryStr())
	}
	unwant := func() {
		for i := len(cands) - 1; i >= 0; i-- {
			cands[i].sess.done(cands[i].ref.Context().RepositoryStr())
		}
	}
	select {
	case r.sem <- struct{}{}:
		return cands, func() { <-r.sem; unwant() }, nil
	case <-ctx.Done():
		unwant()
		return nil, nil, fmt.Errorf("%s: not asked before the deadline: %w", ref, ctx.Err())
	}
}

// candidates lists where to ask about ref: its registry's mirrors in
// order, then the registry unless mirror-only.
func (r *Resolver) candidates(ref name.Reference) ([]candidate, error) {
	ref = r.withScheme(ref)
	var cands []candidate
	ms := r.o.mirrors[hosts.Key(ref.Context().RegistryStr())]
	for _, m := range ms {
		mref, err := m.ref(ref, r.o.insecure[hosts.Key(m.host)])
		if err != nil {
			return nil, fmt.Errorf("naming %s on mirror %s: %w", ref, m, err)
		}
		cands = append(cands, candidate{ref: mref, mirror: true, sess: r.session(mref.Context().Registry)})
	}
	if len(ms) == 0 || !r.o.mirrorOnly {
		cands = append(cands, candidate{ref: ref, sess: r.session(ref.Context().Registry)})
	}
	return cands, nil
}

// session returns the session of a registry, creating it.
func (r *Resolver) session(reg name.Registry) *session {
	key := reg.Scheme() + "://" + reg.RegistryStr()
	if v, ok := r.sessions.Load(key); ok {
		return v.(*session)
	}
	// go-containerregistry bounds a puller's blob reads to its jobs (4
	// by default); the Resolver's own bound (WithJobs) is the one meant,
	// or the bundles of signature verification queue four at a time.
	popts := []remote.Option{remote.WithJobs(r.o.jobs)}
	if r.o.platform != nil {
		popts = append(popts, remote.WithPlatform(*r.o.platform))
	}
	s := &session{
		reg:     reg,
		base:    r.base,
		tap:     r.base,
		ac:      r.ac,
		kc:      r.o.keychain,
		red:     r.red,
		popts:   popts,
		creds:   make(chan struct{}, 1),
		prep:    make(chan struct{}, 1),
		login:   make(chan struct{}, 1),
		pending: map[string]int{},
		denied:  map[string]bool{},
	}
	if r.ac != nil {
		s.tap = &tokenTap{next: r.base, s: s}
	}
	v, _ := r.sessions.LoadOrStore(key, s)
	return v.(*session)
}

// resolveAt asks one registry: HEAD first, GET only when HEAD gives no
// digest, or GET straight away to pick a platform. When what the auth
// cache kept of the registry fails it, it asks once more, as a cold run
// would (session.relearn).
func (r *Resolver) resolveAt(ctx context.Context, c candidate) (v1.Descriptor, error) {
	ctx = regtransport.WithRegistry(ctx, c.ref.Context().RegistryStr())
	gen := c.sess.generation()
	d, err := r.resolveOnce(ctx, c)
	if err != nil && c.sess.relearn(ctx, gen, err) {
		d, err = r.resolveOnce(ctx, c)
	}
	return d, err
}

// resolveOnce is one try of resolveAt.
func (r *Resolver) resolveOnce(ctx context.Context, c candidate) (v1.Descriptor, error) {
	p, err := c.sess.puller(ctx, c.ref.Context().RepositoryStr())
	if err != nil {
		return v1.Descriptor{}, err
	}
	if r.o.platform != nil {
		return r.platformDigest(ctx, p, c.ref)
	}
	desc, err := p.Head(ctx, c.ref)
	if err == nil {
		return *desc, nil
	}
	if !headGaveNoDigest(err) {
		return v1.Descriptor{}, err
	}
	// Some registries give no digest on HEAD, or refuse HEAD; GET the
	// manifest instead.
	r.o.logf("HEAD %s gave no digest (%s); trying GET", c.ref, describe(ctx, err, r.red))
	d, err := p.Get(ctx, c.ref)
	if err != nil {
		return v1.Descriptor{}, err
	}
	return d.Descriptor, nil
}

// platformDigest returns the digest of the manifest for the configured
// platform: the matching child of an index, or a single-platform image
// whose config matches.
func (r *Resolver) platformDigest(ctx context.Context, p *remote.Puller, ref name.Reference) (v1.Descriptor, error) {
	want := *r.o.platform
	d, err := p.Get(ctx, ref)
	if err != nil {
		return v1.Descriptor{}, err
	}
	switch {
	case d.MediaType.IsIndex():
		idx, err := d.ImageIndex()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("reading index: %w", err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("reading index: %w", err)
		}
		var have []string
		for _, c := range m.Manifests {
			if c.Platform == nil {
				continue
			}
			if c.Platform.Satisfies(want) {
				return c, nil
			}
			have = append(have, c.Platform.String())
		}
		if len(have) == 0 {
			return v1.Descriptor{}, &platformError{fmt.Sprintf("no manifest for platform %s: the index names no platform for any of its %d manifests", want, len(m.Manifests))}
		}
		return v1.Descriptor{}, &platformError{fmt.Sprintf("no manifest for platform %s: the index has %s", want, strings.Join(have, ", "))}
	case d.MediaType.IsImage():
		img, err := d.Image()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("reading image: %w", err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("reading image config: %w", err)
		}
		switch p := cf.Platform(); {
		case p == nil:
			return v1.Descriptor{}, &platformError{fmt.Sprintf("a single-platform image whose config names no platform, not %s", want)}
		case !p.Satisfies(want):
			return v1.Descriptor{}, &platformError{fmt.Sprintf("a single-platform image for %s, not %s", p, want)}
		}
		return d.Descriptor, nil
	}
	return v1.Descriptor{}, fmt.Errorf("unexpected media type %s", d.MediaType)
}

// withScheme marks a reference to an insecure registry as such, so that
// it may be reached over plain HTTP.
func (r *Resolver) withScheme(ref name.Reference) name.Reference {
	if !r.o.insecure[hosts.Key(ref.Context().RegistryStr())] {
		return ref
	}
	if ir, err := name.ParseReference(ref.String(), name.Insecure); err == nil {
		return ir
	}
	return ref
}

// headGaveNoDigest reports whether a failed HEAD is worth a GET: the
// registry answered, but without a usable digest, or it does not do HEAD
// (405, 501). Failures that a GET would meet again are not: statuses such
// as 401, 404, 429 or 5xx (those were retried already), network errors,
// timeouts.
func headGaveNoDigest(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode == http.StatusMethodNotAllowed || te.StatusCode == http.StatusNotImplemented
	}
	var ue *url.Error
	var he *regtransport.HungError
	return !errors.As(err, &ue) && !errors.As(err, &he) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}
