//go:build unix

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// keyLines are the lines of stderr about the key cache and Redis: the
// chart's other warnings (now, lookup, the certificates' re-issue) are
// not this test's.
func keyLines(stderr string) []string {
	var out []string
	for l := range strings.SplitSeq(stderr, "\n") {
		if strings.Contains(l, "warning:") && (strings.Contains(l, "key cache") || strings.Contains(l, "Redis")) {
			out = append(out, l)
		}
	}
	return out
}

var keyCounts = regexp.MustCompile(`key cache: (\d+) RSA and DSA keys read from the cache, (\d+) derived`)

// keyRun renders testdata/generated (a CA and a certificate it signs: two
// RSA keys) with extra flags, and checks that it writes want and reads
// and derives as many keys as said, with the key cache's warnings (and
// Redis's) matching warn, one each.
func keyRun(t *testing.T, g generated, want string, read, derived string, warn []string, extra ...string) {
	t.Helper()
	res := g.render("r", append([]string{"-v"}, extra...)...)
	if res.err != nil {
		t.Fatalf("digestpin template %q: %v\n%s", extra, res.err, res.stderr)
	}
	if res.stdout != want {
		t.Errorf("digestpin template %q wrote another output than without a cache", extra)
	}
	if m := keyCounts.FindStringSubmatch(res.stderr); m == nil || m[1] != read || m[2] != derived {
		t.Errorf("key cache counts %q, want %s read and %s derived\n%s", m, read, derived, res.stderr)
	}
	lines := keyLines(res.stderr)
	if len(lines) != len(warn) {
		t.Fatalf("warnings %q, want %d matching %q", lines, len(warn), warn)
	}
	for i, w := range warn {
		if !strings.Contains(lines[i], w) {
			t.Errorf("warning %q, want one containing %q", lines[i], w)
		}
	}
}

// secretBytes returns, for the key in the output's tls.key, what must
// never be found in a cache: its DER and its PEM's base64 body, in parts.
func secretBytes(t *testing.T, stdout string) [][]byte {
	t.Helper()
	key := field(t, objects(t, stdout), "Secret/r-tls", "data", "tls.key")
	p, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(p)
	if b == nil {
		t.Fatalf("tls.key holds no PEM: %q", p)
	}
	body := base64.StdEncoding.EncodeToString(b.Bytes)
	return [][]byte{b.Bytes[20:60], []byte(body[40:100])}
}

// TestTemplateKeyCache: with a cache folder or Redis, digestpin template
// derives the chart's RSA keys on the first render and reads them on the
// next, writing the same bytes as without a cache; the entries are 0600
// files that hold no key in clear; an entry that is garbage, another's or
// too large, and a Redis that answers garbage, cost a derivation and one
// warning, never the render.
func TestTemplateKeyCache(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	g := generated{t: t, bin: digestpinBin(t), reg: reg, seed: newSeed(t)}
	plain := g.render("r")
	if plain.err != nil {
		t.Fatalf("digestpin template: %v\n%s", plain.err, plain.stderr)
	}
	want := plain.stdout
	secrets := secretBytes(t, want)

	t.Run("folder", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "cache")
		flags := []string{"--cache-dir", dir, "--cache-ttl", "1h"}
		keyRun(t, g, want, "0", "2", nil, flags...)
		// The key entries: those of the key format, each 0600, none
		// holding the key.
		var entries []string
		files, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			p := filepath.Join(dir, f.Name())
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range secrets {
				if bytes.Contains(b, s) {
					t.Errorf("%s holds the certificate's key in clear", f.Name())
				}
			}
			if !bytes.Contains(b, []byte(`"digestpin-key-v1"`)) {
				continue
			}
			entries = append(entries, p)
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want 0600 (%v)", f.Name(), fi.Mode().Perm(), err)
			}
		}
		if len(entries) != 2 {
			t.Fatalf("%d key entries in the cache folder, want 2", len(entries))
		}
		keyRun(t, g, want, "2", "0", nil, flags...)

		// One entry another's, one garbage: both derived again, with one
		// warning, and replaced.
		other, err := os.ReadFile(entries[0])
		if err != nil {
			t.Fatal(err)
		}
		for p, b := range map[string][]byte{entries[0]: []byte("\x00\xffnot json"), entries[1]: other} {
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		keyRun(t, g, want, "0", "2", []string{"key cache: ignored 2 entries that could not be used"}, flags...)
		keyRun(t, g, want, "2", "0", nil, flags...)
	})

	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		srv := testredis.Start(t, testredis.Options{})
		flags := []string{"--cache", srv.URL(0), "--cache-ttl", "1h"}
		keyRun(t, g, want, "0", "2", nil, flags...)
		keyRun(t, g, want, "2", "0", nil, flags...)
		rc := srv.Client(0)
		defer rc.Close()
		ctx := context.Background()
		keys, err := rc.Keys(ctx, "digestpin:key:*").Result()
		if err != nil || len(keys) != 2 {
			t.Fatalf("Redis holds key entries %q (%v), want 2", keys, err)
		}
		for _, k := range keys {
			v, err := rc.Get(ctx, k).Bytes()
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range secrets {
				if bytes.Contains(v, s) {
					t.Errorf("%s holds the certificate's key in clear", k)
				}
			}
		}
		// Values that are garbage, or too large: derived again, one
		// warning.
		rc.Set(ctx, keys[0], "garbage", 0)
		rc.Set(ctx, keys[1], strings.Repeat("{", 1<<20), 0)
		keyRun(t, g, want, "0", "2", []string{"Redis", "key cache: ignored 1 entry"}, flags...)
		keyRun(t, g, want, "2", "0", nil, flags...)
	})

	t.Run("redis answers garbage", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte("\x00garbage\xff\r\n$-7\r\n"))
				c.Close()
			}
		}()
		keyRun(t, g, want, "0", "2", []string{"Redis"}, "--cache", "redis://"+ln.Addr().String(), "--cache-ttl", "1h")
	})
}
