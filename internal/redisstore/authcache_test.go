package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/digestpin/digestpin/internal/testredis"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolve"
)

// TestAuthCacheShared runs a registry behind bearer tokens and one Redis
// for the processes that resolve its images one after another, as Argo
// CD's repo-server replicas: the first pings and asks for a token, the
// next sends its HEADs straight away; values that are none of ours under
// the auth cache's keys are ignored with a warning, once each, and
// replaced.
func TestAuthCacheShared(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t, testredis.Options{})
	rc := srv.Client(0)
	defer rc.Close()
	ctx := context.Background()
	reg := testregistry.New(t)
	want := map[string]string{}
	for _, repo := range []string{"team/a", "team/b"} {
		want[reg.Ref(repo+":1")] = reg.PushImage(t, repo+":1").String()
	}
	ts := testregistry.NewTokenServer(t, "", "")
	reg.Handle(ts.Guard())

	type counts struct{ Pings, Tokens, Heads int }
	// process resolves every image with a Resolver of its own on the
	// shared Redis, and returns its requests and warnings.
	process := func() (counts, []string) {
		t.Helper()
		reg.ResetCounts()
		tokens := ts.Exchanges()
		c, w := newClient(t, Options{URL: srv.URL(0)})
		k := newCache(t, c, time.Hour, 0)
		r, err := resolve.New(resolve.WithKeychain(authn.NewMultiKeychain()), resolve.WithAuthCache(k), resolve.WithWarnf(w.warnf), resolve.WithJobs(1))
		if err != nil {
			t.Fatal(err)
		}
		for ref, h := range want {
			res, err := r.Resolve(ctx, mustRef(t, ref))
			if err != nil || res.Digest.String() != h {
				t.Fatalf("Resolve(%s) = %s, %v; want %s", ref, res.Digest, err, h)
			}
		}
		return counts{reg.Count("GET ping"), ts.Exchanges() - tokens, reg.Count("HEAD manifests")}, w.get()
	}
	check := func(what string, got, want counts) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: requests (-want +got):\n%s", what, diff)
		}
	}
	got, warns := process()
	// One after the other, each repository gets a token of its own.
	check("first process", got, counts{1, 2, 2})
	got, warns2 := process()
	check("second process", got, counts{0, 0, 2})
	if len(warns)+len(warns2) > 0 {
		t.Errorf("warnings: %q %q", warns, warns2)
	}

	keys, err := rc.Keys(ctx, "*auth-*").Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("auth keys = %q, %v; want the ping answer's and the tokens'", keys, err)
	}
	for _, v := range keys {
		if b, err := rc.Get(ctx, v).Bytes(); err != nil || strings.Contains(v, "tok-") || !strings.Contains(string(b), `"format":"digestpin-auth-v1"`) {
			t.Errorf("%s = %q, %v", v, b, err)
		}
	}
	// Garbage for one, a list for the other.
	for i, v := range keys {
		rc.Del(ctx, v)
		if i == 0 {
			rc.Set(ctx, v, "\x00\xffgarbage", 0)
		} else {
			rc.RPush(ctx, v, "a", "b")
		}
	}
	got, warns = process()
	check("with garbage", got, counts{1, 2, 2})
	if len(warns) != 2 || !strings.Contains(strings.Join(warns, "\n"), "not an auth cache entry") || !strings.Contains(strings.Join(warns, "\n"), "not a string") {
		t.Errorf("warnings = %q, want one for each key", warns)
	}
	// Both were replaced.
	got, warns = process()
	check("after garbage", got, counts{0, 0, 2})
	if len(warns) > 0 {
		t.Errorf("warnings after garbage: %q", warns)
	}
}
