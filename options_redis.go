package main

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

// redis returns the resolution cache of --cache, nil when it is not set.
func (o *options) redis(log *logger) (resolve.Cache, error) {
	switch {
	case o.cacheURL == "":
		for _, f := range []struct{ flag, value string }{{"redis-password-file", o.redisPasswordFile}, {"redis-ca-file", o.redisCAFile}} {
			if f.value != "" {
				return nil, fmt.Errorf("%s needs %s URL, a Redis", o.name(f.flag), o.name("cache"))
			}
		}
		return nil, nil
	case o.cacheDir != "":
		return nil, fmt.Errorf("%s excludes %s: resolutions are kept in one place", o.name("cache"), o.name("cache-dir"))
	case o.cacheTTL == 0:
		return nil, fmt.Errorf("%s needs %s DURATION, how long a resolution stays valid", o.name("cache"), o.name("cache-ttl"))
	}
	password, err := o.redisPassword(o.cacheURL)
	if err != nil {
		return nil, err
	}
	c, err := redisstore.New(redisstore.Options{
		URL:      o.cacheURL,
		Password: password,
		CAFile:   o.redisCAFile,
		Prefix:   o.redisPrefix,
		Timeout:  min(o.requestTimeout, redisstore.DefaultTimeout),
		Warnf:    log.warnf,
		Logf:     log.debugf,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.name("cache"), err)
	}
	rc, err := c.Cache(o.cacheTTL, min(o.requestTimeout, claimWait))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.name("cache"), err)
	}
	log.debugf("resolution cache on %s, TTL %s", c, o.cacheTTL)
	return rc, nil
}

// redisPassword returns the password for the Redis at rawURL when the URL
// holds none: --redis-password-file's, else $DIGESTPIN_REDIS_PASSWORD's,
// else $REDIS_PASSWORD's; "" for none. A password file beside a password
// in the URL is an error: one of them would be ignored.
func (o *options) redisPassword(rawURL string) (string, error) {
	inURL := false
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		_, inURL = u.User.Password()
	}
	switch {
	case o.redisPasswordFile != "" && inURL:
		return "", fmt.Errorf("%s and a password in the Redis URL: give one", o.name("redis-password-file"))
	case o.redisPasswordFile != "":
		b, err := readfile.Regular(o.redisPasswordFile, 64<<10)
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
