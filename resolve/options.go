package resolve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/resolve/internal/hosts"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// Option configures a Resolver. An Option that cannot work returns an
// *OptionError, which New returns wrapped.
type Option func(*options) error

// OptionError is an Option, or a pair of them, that cannot work. A command
// that sets options from its flags names each Option by its flag: with
// errors.As, from Option and Needs, never by rewriting Error's text.
type OptionError struct {
	// Option names the option, as "WithMirror".
	Option string
	// Needs names another option that Option needs and that was not
	// given, as "WithMirror" for WithMirrorOnly; "" when Err says what is
	// wrong.
	Needs string
	// Err is what is wrong with the option's value; nil when Needs is
	// set.
	Err error
}

func (e *OptionError) Error() string { return e.Message(func(option string) string { return option }) }

// Message formats e with each option as name calls it: a command passes
// the names of its flags ("--mirror-only: needs a --registry-mirror").
func (e *OptionError) Message(name func(option string) string) string {
	if e.Needs != "" {
		return name(e.Option) + ": needs a " + name(e.Needs)
	}
	return name(e.Option) + ": " + e.Err.Error()
}

func (e *OptionError) Unwrap() error { return e.Err }

// optionError is the *OptionError of option for err.
func optionError(option string, err error) error { return &OptionError{Option: option, Err: err} }

type options struct {
	keychain       authn.Keychain
	transport      http.RoundTripper
	platform       *v1.Platform
	jobs           int
	requestTimeout time.Duration
	insecure       map[string]bool // hosts.Key → true
	caFiles        []string
	mirrors        map[string][]mirror // hosts.Key → mirrors, in order
	mirrorList     []Mirror            // as given, in order
	mirrorOnly     bool
	mirrorLag      MirrorLag
	retry          regtransport.RetryPolicy // zero: its defaults
	userAgent      string
	logf           func(format string, args ...any)
	warnf          func(format string, args ...any)
	tagLimits      tagLimits
	authCache      Cache // nil: none (WithAuthCache)

	// Tests only: how host names are looked up, and addresses classed.
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
	classify func(netip.Addr) regtransport.AddrClass
	authNow  func() time.Time // the auth cache's clock; nil: time.Now
}

// DefaultJobs is how many references a Resolver asks about at once unless
// WithJobs says otherwise. The requests are small HEADs, and over HTTP/2
// they share one connection: 64 stays under the 100 concurrent streams
// that registries' HTTP/2 servers commonly allow on one connection, and
// resolves the images of even a large chart in one round trip after the
// ping. The bound changes no request count (one HEAD per distinct
// reference), which is what registries' published limits count (Docker
// Hub counts manifest GETs, not HEADs; gcr.io allows 50,000 requests
// per 10 minutes per client address).
const DefaultJobs = 64

// DefaultRequestTimeout bounds one registry request unless
// WithRequestTimeout says otherwise.
const DefaultRequestTimeout = regtransport.DefaultRequestTimeout

// WithKeychain sets where credentials come from. The default is
// credentials.DockerKeychain: the docker config in DOCKER_CONFIG or
// ~/.docker, with its credential helpers. A registry's refusal (401, 403)
// says whether credentials were sent; where they came from too, with
// credentials.DockerKeychain, a credentials.ReadPullSecret keychain, or
// several of them in credentials.Keychains.
func WithKeychain(kc authn.Keychain) Option {
	return func(o *options) error {
		if kc == nil {
			return optionError("WithKeychain", errors.New("the keychain is nil"))
		}
		o.keychain = kc
		return nil
	}
}

// WithTransport sets the HTTP transport under the registry protocol. The
// default is a clone of http.DefaultTransport. An *http.Transport is
// cloned, not changed, and its dialling wrapped so that hosts other than
// the registry are checked on the addresses connected to; another
// RoundTripper gets the same check before each request.
func WithTransport(t http.RoundTripper) Option {
	return func(o *options) error {
		if t == nil {
			return optionError("WithTransport", errors.New("the transport is nil"))
		}
		o.transport = t
		return nil
	}
}

// WithPlatform pins each image to the manifest of one platform instead of
// the index. The platform must name an OS and an architecture ("linux",
// "/amd64" or "/" would match the first of many manifests, silently); a
// variant and an OS version are optional. The default, nil, keeps the
// index digest of a multi-platform image.
func WithPlatform(p *v1.Platform) Option {
	return func(o *options) error {
		if p != nil && (p.OS == "" || p.Architecture == "") {
			return optionError("WithPlatform", fmt.Errorf("%q names no OS and architecture: want os/arch[/variant], e.g. linux/amd64", platformString(p)))
		}
		o.platform = p
		return nil
	}
}

// platformString formats p as os/arch[/variant][:osversion], keeping the
// empty parts that v1.Platform.String leaves out.
func platformString(p *v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	if p.OSVersion != "" {
		s += ":" + p.OSVersion
	}
	return s
}

// WithJobs sets how many references are resolved at once. It must be
// positive; the default is DefaultJobs.
func WithJobs(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return optionError("WithJobs", fmt.Errorf("jobs must be positive, got %d", n))
		}
		o.jobs = n
		return nil
	}
}

// WithRequestTimeout bounds each registry request: each attempt of it,
// reading the answer included. It must be positive; the default is
// DefaultRequestTimeout. A registry that lets a request run into the
// bound is not asked again during the Resolver's lifetime: later requests
// to it fail at once. The context passed to Resolve bounds the whole
// resolution, retries and backoff included.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return optionError("WithRequestTimeout", fmt.Errorf("request timeout must be positive, got %s", d))
		}
		o.requestTimeout = d
		return nil
	}
}

// WithInsecureRegistries allows plain HTTP, and HTTPS without certificate
// verification, for the named registry hosts (host or host:port, without
// a scheme or path) only, matched as WithMirror matches its from. By
// default every registry but loopback ones is verified HTTPS.
func WithInsecureRegistries(registries ...string) Option {
	return func(o *options) error {
		for _, h := range registries {
			if err := checkHost(h); err != nil {
				return optionError("WithInsecureRegistries", err)
			}
			o.insecure[hosts.Key(h)] = true
		}
		return nil
	}
}

// checkHost returns an error unless h is a registry host, host[:port]: no
// scheme (plain HTTP is what naming a host insecure allows), no path. The
// error gives the host to name instead, when there is one.
func checkHost(h string) error {
	if h == "" {
		return errors.New("a host is empty")
	}
	if u, err := url.Parse(h); err == nil && u.Scheme != "" && u.Host != "" {
		return fmt.Errorf("%q: give the host only, without a scheme: %s", h, u.Host)
	}
	if host, _, ok := strings.Cut(h, "/"); ok && host != "" {
		return fmt.Errorf("%q: give the host only, without a path: %s", h, host)
	}
	if _, err := name.NewRegistry(h, name.StrictValidation); err != nil {
		return fmt.Errorf("%q is not a registry host[:port]", h)
	}
	return nil
}

// WithUserAgent sets the User-Agent sent to registries. The default is
// go-containerregistry's.
func WithUserAgent(ua string) Option {
	return func(o *options) error {
		o.userAgent = ua
		return nil
	}
}

// WithLogf sets where a Resolver logs what a caller cannot see in its
// answers: each fallback (a GET after a HEAD without a digest) and each
// mirror that failed before another candidate answered. An answer itself
// is not logged: the caller has it, with Resolution.Mirror. The default
// discards the messages. It may be called concurrently.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(o *options) error {
		o.logf = logf
		return nil
	}
}

// WithCAFiles adds the PEM certificates in files to the system's roots for
// verifying registries. Each file must be a regular file (or a link to
// one) of at most 16 MiB, holding at least one certificate: a FIFO or a
// device is refused rather than waited on. The
// default is the system's roots only. It needs the default transport or
// an *http.Transport from WithTransport.
func WithCAFiles(files ...string) Option {
	return func(o *options) error {
		for _, f := range files {
			if f == "" {
				return optionError("WithCAFiles", errors.New("a file name is empty"))
			}
			o.caFiles = append(o.caFiles, f)
		}
		return nil
	}
}

// WithMirror asks mirror to instead of registry from. from is a registry
// host, matched as registries match hosts: in any case, with or without
// the default port 443, and Docker Hub as docker.io, index.docker.io or
// registry-1.docker.io;
// to is host[:port][/path-prefix], without a scheme (name it with
// WithInsecureRegistries for plain HTTP). A reference's repository keeps
// its path under the prefix, Docker Hub's library/ included:
// docker.io/nginx:1.27 through mirror.example/hub is asked as
// mirror.example/hub/library/nginx:1.27. The digest comes from the mirror;
// the caller keeps the original name. Several mirrors of one registry are
// tried in the order given, then the registry itself unless
// WithMirrorOnly. By default there are no mirrors. Credentials for a
// mirror are the keychain's for the mirror's host.
func WithMirror(from, to string) Option {
	return func(o *options) error {
		reg, m, err := parseMirror(from, to)
		if err != nil {
			return optionError("WithMirror", err)
		}
		o.mirrors[reg] = append(o.mirrors[reg], m)
		o.mirrorList = append(o.mirrorList, Mirror{From: from, To: to})
		return nil
	}
}

// WithMirrorOnly makes a Resolver, when only is true, never ask a registry
// that has mirrors itself: if no mirror answers, the reference fails. Registries without a
// mirror are still asked. The default is false. It needs a WithMirror.
func WithMirrorOnly(only bool) Option {
	return func(o *options) error {
		o.mirrorOnly = only
		return nil
	}
}

// MirrorLag is what a Resolver does when a mirror answers a tag with
// another digest than the mirror's source registry (WithMirrorLag).
type MirrorLag int

// The MirrorLag values.
const (
	// MirrorLagError fails the reference, naming both digests: the
	// default. A mirror that lags or lost the image would have the
	// cluster run something else than the tag is now.
	MirrorLagError MirrorLag = iota
	// MirrorLagWarn pins the mirror's digest (what the cluster pulls
	// through it) and warns once per reference, naming both.
	MirrorLagWarn
	// MirrorLagOff asks no source registry once a mirror answered.
	MirrorLagOff
)

// mirrorLagNames are the MirrorLag values as ParseMirrorLag reads them.
var mirrorLagNames = []string{"error", "warn", "off"}

// String is the value as ParseMirrorLag reads it.
func (m MirrorLag) String() string {
	if m < 0 || int(m) >= len(mirrorLagNames) {
		return fmt.Sprintf("MirrorLag(%d)", int(m))
	}
	return mirrorLagNames[m]
}

// ParseMirrorLag reads error, warn or off.
func ParseMirrorLag(s string) (MirrorLag, error) {
	if i := slices.Index(mirrorLagNames, s); i >= 0 {
		return MirrorLag(i), nil
	}
	return 0, fmt.Errorf("mirror lag %q: want %s", s, strings.Join(mirrorLagNames, ", "))
}

// WithMirrorLag says what to do when a mirror answers: with the source
// registry asked too (not WithMirrorOnly), at the same time as the first
// mirror, a mirror that serves another digest than the source for the
// same tag fails the reference (MirrorLagError, the default) or is
// warned about (MirrorLagWarn); MirrorLagOff asks the source only when
// no mirror answers. A source that cannot answer (down, a 404, a
// refusal) leaves the mirror's answer as it is, logged. A mirror is
// asked by tag; by digest it holds the bytes or not (WithMirrorOnly and a
// lock file: Holds).
func WithMirrorLag(m MirrorLag) Option {
	return func(o *options) error {
		if m < MirrorLagError || m > MirrorLagOff {
			return optionError("WithMirrorLag", fmt.Errorf("unknown value %d", int(m)))
		}
		o.mirrorLag = m
		return nil
	}
}

// WithWarnf sets where a Resolver's warnings go: a mirror that lags
// (MirrorLagWarn). The default drops them.
func WithWarnf(warnf func(format string, args ...any)) Option {
	return func(o *options) error {
		if warnf != nil {
			o.warnf = warnf
		}
		return nil
	}
}

// withRetry sets the retry policy: attempts per request, and the backoff
// base and cap. Tests use it for millisecond backoffs.
func withRetry(attempts int, base, most time.Duration) Option {
	return func(o *options) error {
		if attempts < 1 || base <= 0 || most < base {
			return optionError("withRetry", fmt.Errorf("invalid policy: %d attempts, backoff %s to %s", attempts, base, most))
		}
		o.retry.Attempts, o.retry.Base, o.retry.Max = attempts, base, most
		return nil
	}
}

// withAddrHooks replaces how the address guard looks up host names and
// classes addresses, so that tests on loopback can play a registry on the
// internet.
func withAddrHooks(lookup func(ctx context.Context, host string) ([]netip.Addr, error), classify func(netip.Addr) regtransport.AddrClass) Option {
	return func(o *options) error {
		o.lookup, o.classify = lookup, classify
		return nil
	}
}
