package resolve

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Option configures a Resolver.
type Option func(*options) error

type options struct {
	keychain       authn.Keychain
	transport      http.RoundTripper
	platform       *v1.Platform
	jobs           int
	requestTimeout time.Duration
	insecure       map[string]bool
	userAgent      string
	logf           func(format string, args ...any)
}

// DefaultJobs is how many references a Resolver asks about at once unless
// WithJobs says otherwise.
const DefaultJobs = 16

// DefaultRequestTimeout bounds one registry request unless
// WithRequestTimeout says otherwise.
const DefaultRequestTimeout = 30 * time.Second

// WithKeychain sets where credentials come from. The default is
// authn.DefaultKeychain: the docker config in DOCKER_CONFIG or ~/.docker,
// with its credential helpers.
func WithKeychain(kc authn.Keychain) Option {
	return func(o *options) error {
		if kc == nil {
			return errors.New("keychain is nil")
		}
		o.keychain = kc
		return nil
	}
}

// WithTransport sets the HTTP transport under the registry protocol. The
// default is a clone of http.DefaultTransport.
func WithTransport(t http.RoundTripper) Option {
	return func(o *options) error {
		if t == nil {
			return errors.New("transport is nil")
		}
		o.transport = t
		return nil
	}
}

// WithPlatform pins each image to the manifest of one platform instead of
// the index. The default, nil, keeps the index digest of a multi-platform
// image.
func WithPlatform(p *v1.Platform) Option {
	return func(o *options) error {
		o.platform = p
		return nil
	}
}

// WithJobs sets how many references are resolved at once. It must be
// positive; the default is DefaultJobs.
func WithJobs(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("jobs must be positive, got %d", n)
		}
		o.jobs = n
		return nil
	}
}

// WithRequestTimeout bounds each registry request. It must be positive;
// the default is DefaultRequestTimeout. The context passed to Resolve
// bounds the whole resolution, retries included.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("request timeout must be positive, got %s", d)
		}
		o.requestTimeout = d
		return nil
	}
}

// WithInsecureRegistries allows plain HTTP, and HTTPS without certificate
// verification, for the named registry hosts (host or host:port) only.
// By default every registry but loopback ones is verified HTTPS.
func WithInsecureRegistries(hosts ...string) Option {
	return func(o *options) error {
		for _, h := range hosts {
			if h == "" {
				return errors.New("insecure registry host is empty")
			}
			o.insecure[h] = true
		}
		return nil
	}
}

// WithUserAgent sets the User-Agent sent to registries. The default is
// go-containerregistry's.
func WithUserAgent(ua string) Option {
	return func(o *options) error {
		o.userAgent = ua
		return nil
	}
}

// WithLogf sets where a Resolver logs each resolution and each fallback.
// The default discards the messages. It may be called concurrently.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(o *options) error {
		o.logf = logf
		return nil
	}
}
