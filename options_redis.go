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
	"github.com/digestpin/digestpin/steady"
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

// redis returns the resolution cache of --cache and the state store of
// --state-store, each nil when its flag is not set. The two share one
// Client when they name the same server, so that a Redis that fails is
// warned about once.
func (o *options) redis(log *logger) (resolve.Cache, steady.Store, error) {
	switch {
	case o.stateTTLSet && o.stateStore == "":
		// It would be ignored: --state-dir keeps its files until they
		// are replaced.
		return nil, nil, fmt.Errorf("%s needs %s URL: it is how long an output stays on that Redis", o.name("state-ttl"), o.name("state-store"))
	case o.cacheURL == "" && o.stateStore == "":
		for _, f := range []struct{ flag, value string }{{"redis-password-file", o.redisPasswordFile}, {"redis-ca-file", o.redisCAFile}} {
			if f.value != "" {
				return nil, nil, fmt.Errorf("%s needs --cache or --state-store, a Redis URL", o.name(f.flag))
			}
		}
		return nil, nil, nil
	case o.cacheURL != "" && o.cacheDir != "":
		return nil, nil, fmt.Errorf("%s excludes %s: resolutions are kept in one place", o.name("cache"), o.name("cache-dir"))
	case o.cacheURL != "" && o.cacheTTL == 0:
		return nil, nil, fmt.Errorf("%s needs %s DURATION, how long a resolution stays valid", o.name("cache"), o.name("cache-ttl"))
	case o.stateStore != "" && o.stateDir != "":
		return nil, nil, fmt.Errorf("%s excludes %s: the previous output is kept in one place", o.name("state-store"), o.name("state-dir"))
	case o.stateStore != "" && o.previous != "":
		return nil, nil, fmt.Errorf("%s excludes %s: the previous output comes from one place", o.name("previous"), o.name("state-store"))
	case o.stateStore != "" && o.stateKey == "":
		return nil, nil, fmt.Errorf("%s needs %s KEY, the key of this release's output", o.name("state-store"), o.name("state-key"))
	case o.stateTTL <= 0:
		return nil, nil, o.invalid("state-ttl", o.stateTTL, "want a positive duration, e.g. 168h")
	}
	clients := map[string]*redisstore.Client{}
	client := func(flag, u string) (*redisstore.Client, error) {
		if c, ok := clients[u]; ok {
			return c, nil
		}
		password, err := o.redisPassword(u)
		if err != nil {
			return nil, err
		}
		c, err := redisstore.New(redisstore.Options{
			URL:      u,
			Password: password,
			CAFile:   o.redisCAFile,
			Prefix:   o.redisPrefix,
			Timeout:  min(o.requestTimeout, redisstore.DefaultTimeout),
			Warnf:    log.warnf,
			Logf:     log.debugf,
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.name(flag), err)
		}
		clients[u] = c
		return c, nil
	}
	var cache resolve.Cache
	if o.cacheURL != "" {
		c, err := client("cache", o.cacheURL)
		if err != nil {
			return nil, nil, err
		}
		rc, err := c.Cache(o.cacheTTL, min(o.requestTimeout, claimWait))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", o.name("cache"), err)
		}
		log.debugf("resolution cache on %s, TTL %s", c, o.cacheTTL)
		cache = rc
	}
	var store steady.Store
	if o.stateStore != "" {
		c, err := client("state-store", o.stateStore)
		if err != nil {
			return nil, nil, err
		}
		rs, err := c.Store(o.stateTTL, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", o.name("state-store"), err)
		}
		log.debugf("render state on %s, TTL %s", c, o.stateTTL)
		store = rs
	}
	return cache, store, nil
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
