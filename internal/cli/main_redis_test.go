package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testredis"
)

func TestRunRedisOptionErrors(t *testing.T) {
	_, in := shop(t)
	const secret = "s3cret-in-url"
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc string
		args []string
		env  map[string]string
		want string
	}{
		{desc: "cache without a TTL", args: []string{"--cache", "redis://127.0.0.1:1/0"}, want: "--cache needs --cache-ttl DURATION"},
		{desc: "cache and a cache folder", args: []string{"--cache", "redis://127.0.0.1:1/0", "--cache-ttl", "5m", "--cache-dir", "c"}, want: "--cache excludes --cache-dir"},
		{desc: "cache of another scheme", args: []string{"--cache", "http://u:" + secret + "@127.0.0.1:1/0", "--cache-ttl", "5m"}, want: "--cache: redis URL http://127.0.0.1:1/0: want redis://"},
		{desc: "bad URL from the environment", env: map[string]string{"DIGESTPIN_CACHE": "redis://u:" + secret + "@host:port/0", "DIGESTPIN_CACHE_TTL": "5m"}, want: "DIGESTPIN_CACHE: parsing the Redis URL (not shown"},
		{desc: "password file without Redis", args: []string{"--redis-password-file", pwFile}, want: "--redis-password-file needs --cache URL, a Redis"},
		{desc: "CA file without Redis", env: map[string]string{"DIGESTPIN_REDIS_CA_FILE": "ca.pem"}, want: "DIGESTPIN_REDIS_CA_FILE needs --cache URL, a Redis"},
		{desc: "CA file without TLS", args: []string{"--cache", "redis://127.0.0.1:1/0", "--cache-ttl", "5m", "--redis-ca-file", "ca.pem"}, want: "a CA file needs rediss://"},
		{desc: "password file and a password in the URL", args: []string{"--cache", "redis://:" + secret + "@127.0.0.1:1/0", "--cache-ttl", "5m", "--redis-password-file", pwFile}, want: "--redis-password-file and a password in the Redis URL: give one"},
		{desc: "password file missing", args: []string{"--cache", "redis://127.0.0.1:1/0", "--cache-ttl", "5m", "--redis-password-file", "/nonexistent"}, want: "--redis-password-file: reading the Redis password"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out, stderr, err := runIn(t, in, tc.args...)
			if err == nil || ExitCode(err) != 2 {
				t.Fatalf("run() = %v, want a usage error", err)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			if !strings.Contains(stderr, tc.want) || strings.Contains(stderr, secret) {
				t.Errorf("stderr = %q, want %q and no password", stderr, tc.want)
			}
		})
	}
}

// TestRunRedisCache resolves through --cache: the first run asks the
// registry, the second asks Redis only, and a run whose Redis is gone
// pins the same with one warning.
func TestRunRedisCache(t *testing.T) {
	reg, in := shop(t)
	const password = "argo-redis-auth"
	srv := testredis.Start(t, testredis.Options{Password: password})
	// The password comes as Argo CD's components take it, from
	// REDIS_PASSWORD.
	t.Setenv("REDIS_PASSWORD", password)
	args := []string{"--cache", srv.URL(0), "--cache-ttl", "1h"}
	first, stderr, err := runIn(t, in, args...)
	if err != nil || stderr != "" {
		t.Fatalf("first run() = %v\n%s", err, stderr)
	}
	want, _, err := runIn(t, in)
	if err != nil || first != want {
		t.Fatalf("a run with the cache wrote\n%s\nwant\n%s", first, want)
	}
	reg.ResetCounts()
	second, stderr, err := runIn(t, in, args...)
	if err != nil || stderr != "" || second != want {
		t.Fatalf("second run() = %v\n%s", err, stderr)
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("a run with every answer on Redis made %d registry requests", n)
	}

	srv.Kill()
	out, stderr, err := runIn(t, in, args...)
	if err != nil || out != want {
		t.Fatalf("run without Redis = %v, output\n%s\nwant\n%s", err, out, want)
	}
	if n := strings.Count(stderr, "warning:"); n != 1 || !strings.Contains(stderr, "going on without Redis") || strings.Contains(stderr, password) {
		t.Errorf("stderr = %q, want one warning, without the password", stderr)
	}
}

// TestRunRedisFrozenAsksNothing checks that --frozen does not read the
// cache: a Redis that does not answer (port 1) is never contacted, so no
// warning.
func TestRunRedisFrozenAsksNothing(t *testing.T) {
	t.Parallel()
	_, in := shop(t)
	lock := filepath.Join(t.TempDir(), "digests.lock")
	if _, stderr, err := runIn(t, in, "--write-lock", lock); err != nil {
		t.Fatalf("recording the lock file: %v\n%s", err, stderr)
	}
	out, stderr, err := runIn(t, in, "--lock", lock, "--frozen", "--cache", "redis://127.0.0.1:1/0", "--cache-ttl", "1h")
	if err != nil || out == "" {
		t.Fatalf("run() = %v\n%s", err, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing: --frozen must not contact Redis", stderr)
	}
}
