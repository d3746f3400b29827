// Package redisstore keeps digestpin's resolution cache (resolutions, tag
// choices and the short locks around them) on Redis, where every digestpin
// process that points at the same server shares it: the Argo CD
// repo-server replicas, with Argo CD's own Redis.
//
// Redis is an accelerator, never a dependency. Every call is bounded by a
// timeout; the first failure of a run (Redis down, slow, refusing the
// password) turns the Client off for the rest of the run with one
// warning, after which the cache misses, so that the run resolves at the
// registries as without Redis. A value that is not digestpin's (corrupt,
// foreign, of another format) is ignored with a warning. Nothing Redis
// does can fail a render or change its images.
//
// The package uses github.com/redis/go-redis/v9, the client Argo CD itself
// uses for the same server. Passwords never appear in messages: the
// Client names its server by scheme, host, port and database only.
package redisstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/digestpin/digestpin/internal/readfile"
	"github.com/digestpin/digestpin/internal/redact"
)

// DefaultPrefix begins every key a Client writes, when Options.Prefix is
// empty.
const DefaultPrefix = "digestpin:"

// DefaultTimeout bounds each Redis call when Options.Timeout is zero. A
// call takes well under a millisecond; the bound is for a loaded machine
// (Redis, or the process itself, waiting for a CPU), since a call that
// runs into it turns Redis off for the run.
const DefaultTimeout = 2 * time.Second

// Options configure a Client.
type Options struct {
	// URL names the server: redis://[USER[:PASSWORD]@]HOST[:PORT][/DB],
	// or rediss:// for TLS. The port defaults to 6379 and the database
	// to 0. Query parameters are refused.
	URL string
	// Password, when not empty, is sent instead of the URL's.
	Password string
	// CAFile is a PEM bundle of the CA certificates trusted for a
	// rediss:// server instead of the system's; "" means the system's.
	CAFile string
	// Prefix begins every key; "" means DefaultPrefix. Two
	// installations that must not share answers use two prefixes (or
	// two databases).
	Prefix string
	// Timeout bounds each call: connecting, sending, answering; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Warnf receives the warnings: the first failure of Redis in the
	// Client's life, and each key whose value was ignored. nil discards
	// them.
	Warnf func(format string, args ...any)
	// Logf receives debug messages; nil discards them.
	Logf func(format string, args ...any)
}

// Client is a connection pool to one Redis server, for a Cache, with the
// failure rule of the package: after its first failure it asks Redis
// nothing more. It is safe for concurrent use.
type Client struct {
	rdb     *redis.Client
	where   string // scheme://host:port/db: no user, no password
	prefix  string
	timeout time.Duration
	warnf   func(format string, args ...any)
	logf    func(format string, args ...any)
	red     *redact.Redactor // knows the password

	off     atomic.Bool
	offOnce sync.Once
	ignored sync.Map // key → struct{}: values warned about already
}

// errOff is the error of every call once the Client is off.
var errOff = errors.New("redis is off for this run")

// New checks the options and returns a Client. It does not connect: the
// first call does.
func New(o Options) (*Client, error) {
	opt, where, err := redisOptions(o)
	if err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	// Every call is bounded, and a failed one is not tried again: the
	// Client turns off instead (see call).
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.PoolTimeout = timeout, timeout, timeout, timeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	// RESP2 and no client metadata: the commands any Redis (and the
	// HAProxy in front of Argo CD's HA Redis) takes.
	opt.Protocol = 2
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	prefix := o.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	// go-redis logs its own failures to stderr: they are ours to say.
	quietOnce.Do(func() { redis.SetLogger(quiet{}) })
	nop := func(string, ...any) {}
	// A server that echoes the password back in an error (see says) is
	// masked as a registry is: by package redact, which also knows it as
	// redis-server shows a line break in it, as a blank.
	red := redact.New()
	red.Add(opt.Password, strings.NewReplacer("\r", " ", "\n", " ").Replace(opt.Password))
	c := &Client{rdb: redis.NewClient(opt), where: where, prefix: prefix, timeout: timeout, warnf: o.Warnf, logf: o.Logf, red: red}
	if c.warnf == nil {
		c.warnf = nop
	}
	if c.logf == nil {
		c.logf = nop
	}
	return c, nil
}

// redisOptions parses o.URL, with o's password and CA file, into
// go-redis's options, and returns where the server is as it may be shown:
// the scheme, the host and the path, never the user information.
func redisOptions(o Options) (*redis.Options, string, error) {
	// Neither url.Parse's errors nor the parts of a URL it misread may be
	// shown: a password with an unescaped '/', '?', '#' or '%' ends the
	// user information early, and the rest of it is taken for the host,
	// the port, the path or the query.
	const hidden = "parsing the Redis URL (not shown: it may hold a password)"
	const escape = "percent-encode '/', '?', '#', '%' and '@' in the user and the password"
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, "", fmt.Errorf("%s: malformed; %s", hidden, escape)
	}
	if strings.ContainsAny(u.Host+u.Path+u.RawPath+u.RawQuery+u.Fragment+u.Opaque, "@%") {
		return nil, "", fmt.Errorf("%s: an '@' or '%%' after the host; %s", hidden, escape)
	}
	where := u.Scheme + "://" + u.Host + u.Path
	switch {
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return nil, "", fmt.Errorf("redis URL %s: want redis://HOST[:PORT][/DB] or rediss:// (TLS)", where)
	case u.Host == "":
		return nil, "", fmt.Errorf("redis URL %s: no host", where)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, "", fmt.Errorf("redis URL %s: query parameters and fragments are not supported", where)
	case o.CAFile != "" && u.Scheme != "rediss":
		return nil, "", fmt.Errorf("redis URL %s: a CA file needs rediss:// (TLS)", where)
	case o.Timeout < 0:
		return nil, "", fmt.Errorf("redis timeout must not be negative, got %s", o.Timeout)
	}
	opt, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, "", fmt.Errorf("redis URL %s: %w", where, err)
	}
	if o.Password != "" {
		opt.Password = o.Password
	}
	if o.CAFile != "" {
		b, err := readfile.Regular(o.CAFile, 1<<20)
		if err != nil {
			return nil, "", fmt.Errorf("reading the redis CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, "", fmt.Errorf("reading the redis CA file %s: no PEM certificate in it", o.CAFile)
		}
		opt.TLSConfig.RootCAs = pool
	}
	if opt.TLSConfig != nil {
		opt.TLSConfig.MinVersion = tls.VersionTLS12
	}
	return opt, where, nil
}

// quiet is go-redis's logger: it says nothing, since every failure comes
// back as an error.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

var quietOnce sync.Once

// String names the server, without user or password: redis://HOST:PORT/DB.
func (c *Client) String() string { return c.where }

// Close closes the connections.
func (c *Client) Close() error { return c.rdb.Close() }

// call runs f with the Client's timeout, unless the Client is off. A
// failure other than a missing key (redis.Nil) or a key of another type
// (WRONGTYPE: a foreign value, which the caller ignores) turns it off,
// with one warning; a failure because ctx ended (the run stops) does not
// warn.
func (c *Client) call(ctx context.Context, what string, f func(ctx context.Context) error) error {
	if c.off.Load() {
		return errOff
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := f(cctx)
	if err == nil || errors.Is(err, redis.Nil) || redis.HasErrorPrefix(err, "WRONGTYPE") || ctx.Err() != nil {
		return err
	}
	c.offOnce.Do(func() {
		c.off.Store(true)
		c.warnf("Redis %s: %s: %s; going on without Redis for the rest of this run (digests from the registries, keys derived anew)", c.where, what, c.says(err))
	})
	return err
}

// argsQuoted is where redis-server begins to quote the arguments of a
// command it does not know: "ERR unknown command 'AUTH', with args
// beginning with: 'PASSWORD'".
const argsQuoted = "with args beginning with:"

// says is what err, a failure of Redis, may show in a message. A server
// that does not know a command quotes its arguments, AUTH's password
// among them, cut at 128 bytes and with line breaks as blanks, which no
// mask of the whole password catches: the arguments are left out, and
// the rest is masked.
func (c *Client) says(err error) string {
	s := err.Error()
	if i := strings.Index(s, argsQuoted); i >= 0 {
		s = s[:i+len(argsQuoted)] + " (not shown)"
	}
	return c.red.Redact(s)
}

// ignore warns, once per key, that the value of key was ignored.
func (c *Client) ignore(key string, err error) {
	if _, seen := c.ignored.LoadOrStore(key, struct{}{}); !seen {
		c.warnf("Redis %s: ignoring the value of key %s: %v", c.where, key, err)
	}
}

// get returns the value of key when it has at most limit bytes; found is
// false when there is none, when Redis failed (see call), and when the
// value is longer, which is ignored with a warning. Only limit+1 bytes of a
// value are ever read (GETRANGE), so that a huge value someone wrote under
// the key cannot fill the process's memory. No value of ours is empty: an
// empty one, like a missing key, is none.
func (c *Client) get(ctx context.Context, key string, limit int) (b []byte, found bool) {
	err := c.call(ctx, "reading "+key, func(ctx context.Context) error {
		var err error
		b, err = c.rdb.GetRange(ctx, key, 0, int64(limit)).Bytes()
		return err
	})
	switch {
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		c.ignore(key, errors.New("not a string"))
		return nil, false
	case err != nil || len(b) == 0:
		return nil, false
	case len(b) > limit:
		c.ignore(key, fmt.Errorf("more than %d bytes", limit))
		return nil, false
	}
	return b, true
}

// set stores b under key for ttl.
func (c *Client) set(ctx context.Context, key string, b []byte, ttl time.Duration) {
	_ = c.call(ctx, "writing "+key, func(ctx context.Context) error {
		return c.rdb.Set(ctx, key, b, ttl).Err()
	})
}
