package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/testredis"
)

// TestHugeValuesAreNotRead stores a value far larger than any of ours
// under the key of an entry: it is ignored with a warning, and reading it
// allocates a small part of it.
func TestHugeValuesAreNotRead(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	rc := srv.Client(0)
	defer rc.Close()
	ctx := context.Background()
	c, w := newClient(t, Options{URL: srv.URL(0)})
	k := newCache(t, c, time.Hour, 0)
	ref := mustRef(t, "registry.example/app:1")
	huge := strings.Repeat("x", 32<<20)
	rc.Set(ctx, k.entryKey(ref, "k"), huge, 0)
	// alloc returns how many bytes f allocates.
	alloc := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	if n := alloc(func() {
		if _, ok := k.Get(ctx, ref, "k"); ok {
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
	srv := testredis.Start(t, testredis.Options{})
	ctx := context.Background()
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
		if err := k.Put(ctx, ref, e.key, hashOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range entries {
		ref, err := nameRef(e.ref)
		if err != nil {
			continue
		}
		if h, ok := k.Get(ctx, ref, e.key); !ok || h != hashOf(i) {
			t.Errorf("Get(%q, %.20q) = %s, %t; want its own digest %s", e.ref, e.key, h, ok, hashOf(i))
		}
	}
	if got := w.get(); len(got) != 0 {
		t.Errorf("warnings = %q", got)
	}
	// An entry too large to be read back is not stored.
	ref := mustRef(t, "registry.example/app:1")
	if err := k.Put(ctx, ref, strings.Repeat("k", maxEntry), hashOf(0)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("Put of a huge key = %v, want an error", err)
	}
}

// TestPasswordNeverShown gives passwords with the characters that end a
// URL's user information early, in the URL and as the password option,
// against a server that refuses or is not there: no error and no warning
// holds any part of the password.
func TestPasswordNeverShown(t *testing.T) {
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
			ref := mustRef(t, "registry.example/app:1")
			k.Get(context.Background(), ref, "")
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
