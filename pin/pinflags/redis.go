package pinflags

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

// RedisFlags are the flags of the Redis resolution cache: cache yields
// it.
type RedisFlags struct {
	URL          string
	PasswordFile string
	CAFile       string
	Prefix       string
}

// cache returns the resolution cache of --cache, nil when it is not set,
// keeping entries for ttl; pin.New checks it against the other cache
// options (a TTL, no --cache-dir).
func (r *RedisFlags) cache(o *Options, ttl, requestTimeout time.Duration, warnf, logf func(string, ...any)) (resolve.Cache, error) {
	if r.URL == "" {
		for _, f := range []struct{ flag, value string }{{"redis-password-file", r.PasswordFile}, {"redis-ca-file", r.CAFile}} {
			if f.value != "" {
				return nil, fmt.Errorf("%s needs %s URL, a Redis", o.name(f.flag), o.name("cache"))
			}
		}
		return nil, nil
	}
	password, err := r.password(o)
	if err != nil {
		return nil, err
	}
	c, err := redisstore.New(redisstore.Options{
		URL:      r.URL,
		Password: password,
		CAFile:   r.CAFile,
		Prefix:   r.Prefix,
		Timeout:  min(requestTimeout, redisstore.DefaultTimeout),
		Warnf:    warnf,
		Logf:     logf,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.name("cache"), err)
	}
	rc, err := c.Cache(ttl, min(requestTimeout, claimWait))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.name("cache"), err)
	}
	logf("resolution cache on %s, TTL %s", c, ttl)
	return rc, nil
}

// password returns the password for the Redis at r.URL when the URL
// holds none: --redis-password-file's, else $DIGESTPIN_REDIS_PASSWORD's,
// else $REDIS_PASSWORD's; "" for none. A password file beside a password
// in the URL is an error: one of them would be ignored.
func (r *RedisFlags) password(o *Options) (string, error) {
	inURL := false
	if u, err := url.Parse(r.URL); err == nil && u.User != nil {
		_, inURL = u.User.Password()
	}
	switch {
	case r.PasswordFile != "" && inURL:
		return "", fmt.Errorf("%s and a password in the Redis URL: give one", o.name("redis-password-file"))
	case r.PasswordFile != "":
		b, err := readfile.Regular(r.PasswordFile, 64<<10)
		if err != nil {
			return "", fmt.Errorf("%s: reading the Redis password: %w", o.name("redis-password-file"), err)
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
