package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/redact"
	"github.com/digestpin/digestpin/internal/testredis"
)

// TestHugeValuesAreNotRead stores a value far larger than any of ours
// under the key of an entry: it is ignored with a warning, and reading it
// allocates a small part of it.
func TestHugeValuesAreNotRead(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t, testredis.Options{})
	rc := srv.Client(0)
	defer rc.Close()
	ctx := context.Background()
	c, w := newClient(t, Options{URL: srv.URL(0)})
	k := newCache(t, c, time.Hour, 0)
	huge := strings.Repeat("x", 32<<20)
	rc.Set(ctx, k.entryKey("k"), huge, 0)
	// alloc returns how many bytes f allocates.
	alloc := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	if n := alloc(func() {
		if _, ok := k.Get(ctx, "k", accept); ok {
			t.Error("Get of a huge entry hit")
		}
	}); n > 1<<20 {
		t.Errorf("Get of a 32 MiB entry allocated %d bytes, want under 1 MiB", n)
	}
	got := w.get()
	if len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf("more than %d bytes", maxEntry)) {
		t.Errorf("warnings = %q, want one naming the bound", got)
	}
}

// TestKeysDoNotCollide stores, for references and cache keys that would
// run together if they were only concatenated (odd characters,
// newlines, spaces, very long ones), a value each: each reads back its
// own.
func TestKeysDoNotCollide(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t, testredis.Options{})
	c, w := newClient(t, Options{URL: srv.URL(0)})
	k := newCache(t, c, time.Hour, 0)
	long := strings.Repeat("k", 4<<10)
	entries := []struct{ ref, key string }{
		{"registry.example/app:1", ""},
		{"registry.example/app:1", "\n"},
		{"registry.example/app:1", "linux/amd64"},
		{"registry.example/app:1", "linux/amd64\n"},
		{"registry.example/app:1", "linux/amd64 "},
		{"registry.example/app:1", "\nregistry.example/app:1"},
		{"registry.example/app:1", long},
		{"registry.example/app:1", long + "k"},
		{"registry.example/app:1l", "inux/amd64"},
		{"registry.example/app:1\nlinux", "/amd64"},
		{"registry.example/app", "1"},
	}
	for i, e := range entries {
		ref, err := nameRef(e.ref)
		if err != nil {
			continue // not a reference: it cannot be asked about
		}
		if err := store(t, k, ref, e.key, hashOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range entries {
		ref, err := nameRef(e.ref)
		if err != nil {
			continue
		}
		if h, ok := lookup(t, k, ref, e.key); !ok || h != hashOf(i) {
			t.Errorf("Get(%q, %.20q) = %s, %t; want its own digest %s", e.ref, e.key, h, ok, hashOf(i))
		}
	}
	if got := w.get(); len(got) != 0 {
		t.Errorf("warnings = %q", got)
	}
	// An entry too large to be read back is not stored.
	ref := mustRef(t, "registry.example/app:1")
	if err := store(t, k, ref, strings.Repeat("k", maxEntry), hashOf(0)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("Put of a huge key = %v, want an error", err)
	}
}

// TestPasswordNeverShown gives passwords with the characters that end a
// URL's user information early, in the URL and as the password option,
// against a server that refuses or is not there: no error and no warning
// holds any part of the password.
func TestPasswordNeverShown(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t, testredis.Options{Password: "the-right-one"})
	host := strings.TrimPrefix(srv.URL(0), "redis://")
	passwords := []string{"Pa/ssW0rd-x", "Pa?ssW0rd-x", "Pa#ssW0rd-x", "Pa%zzW0rd-x", "Pa@ssW0rd-x", "Pa:ssW0rd-x", "Pa ssW0rd-x", "Pa%40ssW0rd-x"}
	// leaks reports the first part of p of 4 bytes or more in s.
	leaks := func(s, p string) string {
		for i := 0; i+4 <= len(p); i++ {
			if strings.Contains(s, p[i:i+4]) {
				return p[i : i+4]
			}
		}
		return ""
	}
	for _, p := range passwords {
		for _, o := range []Options{
			{URL: "redis://:" + p + "@" + host + "/0"},
			{URL: "redis://default:" + p + "@" + host + "/0"},
			{URL: "redis://" + p + "@" + host + "/0"},
			{URL: "redis://:" + p + "@127.0.0.1:1/0"},
			{URL: srv.URL(0), Password: p},
			{URL: "redis://127.0.0.1:1/0", Password: p},
		} {
			w := &warnings{}
			c, err := New(Options{URL: o.URL, Password: o.Password, Warnf: w.warnf, Timeout: time.Second})
			if err != nil {
				if part := leaks(err.Error(), p); part != "" {
					t.Errorf("New(%q) = %v: shows %q of the password", o.URL, err, part)
				}
				continue
			}
			k := newCache(t, c, time.Hour, 0)
			k.Get(context.Background(), "k", accept)
			_ = c.Close()
			for _, g := range w.get() {
				if part := leaks(g, p); part != "" {
					t.Errorf("warning %q of %q: shows %q of the password", g, o.URL, part)
				}
			}
		}
	}
	// A URL whose password ends the user information early is refused,
	// with a hint, rather than misread.
	_, err := New(Options{URL: "redis://:Pa/ssW0rd@" + host})
	if err == nil || !strings.Contains(err.Error(), "percent-encode") {
		t.Errorf("New(password with '/') = %v, want an error with a hint", err)
	}
}

// nameRef parses a reference, which may fail.
func nameRef(s string) (name.Reference, error) { return name.ParseReference(s) }

// hashOf returns a digest that differs for each i.
func hashOf(i int) v1.Hash {
	sum := sha256.Sum256([]byte(fmt.Sprint(i)))
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// TestEchoedPasswordMasked is a Redis that answers HELLO and AUTH with an
// error that quotes the command, as redis-server does when they are
// renamed away, and as a proxy that does not know them may ("ERR unknown
// command 'AUTH', with args beginning with: 'PASSWORD'"):
// the warning says what failed without any part of the password, for a
// long one too (redis-server cuts the quote at 128 bytes, which leaves a
// part that is not the password whole) and one with a line break (which
// it shows as a blank).
func TestEchoedPasswordMasked(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t, testredis.Options{Args: []string{"--rename-command", "HELLO", "", "--rename-command", "AUTH", ""}})
	host := srv.Addr
	for _, tc := range []struct {
		desc string
		o    Options
		pass string
	}{
		{desc: "password option", o: Options{URL: srv.URL(0), Password: "SENTINEL-redis-p4ss"}, pass: "SENTINEL-redis-p4ss"},
		{desc: "password in the URL", o: Options{URL: "redis://:SENTINEL-redis-p4ss@" + host + "/0"}, pass: "SENTINEL-redis-p4ss"},
		{desc: "user and password", o: Options{URL: "redis://bob:SENTINEL-redis-p4ss@" + host + "/0"}, pass: "SENTINEL-redis-p4ss"},
		{desc: "a long password", o: Options{URL: srv.URL(0), Password: strings.Repeat("SENTINEL", 40)}, pass: strings.Repeat("SENTINEL", 40)},
		{desc: "a line break", o: Options{URL: srv.URL(0), Password: "SENTINEL\r\nredis-p4ss"}, pass: "SENTINEL\r\nredis-p4ss"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, w := newClient(t, tc.o)
			newCache(t, c, time.Hour, 0).Get(context.Background(), "k", accept)
			got := w.get()
			if len(got) != 1 || !strings.Contains(got[0], "unknown command") {
				t.Fatalf("warnings = %q, want one that says why Redis failed", got)
			}
			for _, part := range []string{"SENTINEL", "redis-p4ss"} {
				if strings.Contains(got[0], part) {
					t.Errorf("warning %q shows %q of the password", got[0], part)
				}
			}
		})
	}
}

// FuzzSays checks that a Redis error never shows the password in a
// message: quoted whole or cut by redis-server, or echoed anywhere else in
// the reply of a server or proxy.
func FuzzSays(f *testing.F) {
	f.Add("SENTINEL-redis-p4ss", "ERR unknown command 'auth', with args beginning with: '", "' ", 200)
	f.Add(strings.Repeat("SENTINEL", 40), "ERR unknown command 'auth', with args beginning with: 'bob' '", "' ", 118)
	f.Add("SENTINEL\r\nredis-p4ss", "ERR invalid password ", "", 200)
	f.Add("p4ss", "-ERR proxy: AUTH ", " refused", 2)
	f.Fuzz(func(t *testing.T, password, before, after string, cut int) {
		secret := strings.TrimSpace(password)
		if len(secret) < redact.MinSecret || strings.Contains(password+before+after, "\x00") {
			return // too short to mask, or holds the stand-in below
		}
		c, err := New(Options{URL: "redis://127.0.0.1:1/0", Password: password})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Echoed whole, anywhere.
		msg := before + password + after
		if shown := strings.ReplaceAll(c.says(errors.New(msg)), redact.Mask, "\x00"); strings.Contains(shown, secret) {
			t.Fatalf("says(%q) = %q, which shows the password", msg, shown)
		}
		// Quoted by redis-server: cut, and line breaks as blanks.
		quoted := strings.NewReplacer("\r", " ", "\n", " ").Replace(password)
		quoted = quoted[:max(0, min(cut, len(quoted)))]
		msg = "ERR unknown command 'auth', with args beginning with: '" + quoted + "' "
		if got, want := c.says(errors.New(msg)), "ERR unknown command 'auth', with args beginning with: (not shown)"; got != want {
			t.Fatalf("says(%q) = %q, want %q", msg, got, want)
		}
	})
}
