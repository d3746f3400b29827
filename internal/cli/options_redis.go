package cli

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/digestpin/digestpin/internal/readfile"
	"github.com/digestpin/digestpin/internal/redisstore"
	"github.com/digestpin/digestpin/resolve"
)

// The environment variables that hold the Redis password when the URL
// holds none and no --redis-password-file is given: ours, then the one
// Argo CD's own components read from the argocd-redis Secret.
const (
	redisPasswordEnv     = "DIGESTPIN_REDIS_PASSWORD" //nolint:gosec // the name of a variable, not a credential
	argoRedisPasswordEnv = "REDIS_PASSWORD"
)

// claimWait bounds how long a process waits for the answer of another
// that is asking the registry for the same reference (less with a shorter
// --request-timeout).
const claimWait = 10 * time.Second

// redisFlags are the flags of the Redis resolution cache: cache yields
// it.
type redisFlags struct {
	url          string
	passwordFile string
	caFile       string
	prefix       string
}

// cache returns the resolution cache of --cache, nil when it is not set,
// keeping entries for ttl; pin.New checks it against the other cache
// options (a TTL, no --cache-dir).
func (r *redisFlags) cache(o *Options, ttl, requestTimeout time.Duration, log *Logger) (resolve.Cache, error) {
	if r.url == "" {
		for _, f := range []struct{ flag, value string }{{"redis-password-file", r.passwordFile}, {"redis-ca-file", r.caFile}} {
			if f.value != "" {
				return nil, fmt.Errorf("%s needs %s URL, a Redis", o.Name(f.flag), o.Name("cache"))
			}
		}
		return nil, nil
	}
	password, err := r.password(o)
	if err != nil {
		return nil, err
	}
	c, err := redisstore.New(redisstore.Options{
		URL:      r.url,
		Password: password,
		CAFile:   r.caFile,
		Prefix:   r.prefix,
		Timeout:  min(requestTimeout, redisstore.DefaultTimeout),
		Warnf:    log.Warnf,
		Logf:     log.Debugf,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Name("cache"), err)
	}
	rc, err := c.Cache(ttl, min(requestTimeout, claimWait))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Name("cache"), err)
	}
	log.Debugf("resolution cache on %s, TTL %s", c, ttl)
	return rc, nil
}

// password returns the password for the Redis at r.url when the URL
// holds none: --redis-password-file's, else $DIGESTPIN_REDIS_PASSWORD's,
// else $REDIS_PASSWORD's; "" for none. A password file beside a password
// in the URL is an error: one of them would be ignored.
func (r *redisFlags) password(o *Options) (string, error) {
	inURL := false
	if u, err := url.Parse(r.url); err == nil && u.User != nil {
		_, inURL = u.User.Password()
	}
	switch {
	case r.passwordFile != "" && inURL:
		return "", fmt.Errorf("%s and a password in the Redis URL: give one", o.Name("redis-password-file"))
	case r.passwordFile != "":
		b, err := readfile.Regular(r.passwordFile, 64<<10)
		if err != nil {
			return "", fmt.Errorf("%s: reading the Redis password: %w", o.Name("redis-password-file"), err)
		}
		// A Secret mounted as a file, or echo > file, may end the
		// password with a newline.
		return string(bytes.TrimRight(b, "\r\n")), nil
	case inURL:
		return "", nil
	}
	for _, env := range []string{redisPasswordEnv, argoRedisPasswordEnv} {
		if p := os.Getenv(env); p != "" {
			return p, nil
		}
	}
	return "", nil
}
