package resolve

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/credentials"
)

// TestCacheKeyHoldsWhatDecidesTheAnswer runs digestpin twice on one cache
// folder, as two Argo CD Applications sharing a cache volume do, with
// options that change the answer: the second run must not read the first
// run's answer. Options that do not change it share the entry.
func TestCacheKeyHoldsWhatDecidesTheAnswer(t *testing.T) {
	t.Parallel()
	// The origin and its mirror hold different images under one tag, so
	// the digest says who answered.
	origin, mirror := testregistry.New(t), testregistry.New(t)
	fromOrigin := origin.PushImage(t, "team/app:1").String()
	fromMirror := mirror.PushImage(t, "team/app:1").String()
	ref := origin.Ref("team/app:1")
	// Their answers are not compared (TestMirrorLag).
	withMirror := Option(func(o *options) error {
		if err := WithMirror(origin.Host(), mirror.Host())(o); err != nil {
			return err
		}
		return WithMirrorLag(MirrorLagOff)(o)
	})
	as := func(user, password string) Option { return WithKeychain(staticKeychain{user, password}) }
	amd64 := WithPlatform(&v1.Platform{OS: "linux", Architecture: "amd64"})
	for _, tc := range []struct {
		desc          string
		first, second []Option
		want          string // digest of the second run, "" for its error
		wantSrc       string
	}{
		{desc: "with a mirror, then without", first: []Option{withMirror}, want: fromOrigin, wantSrc: string(resolution.Registry)},
		{desc: "without a mirror, then with one", second: []Option{withMirror}, want: fromMirror, wantSrc: string(resolution.Registry)},
		{desc: "with a mirror, then mirror-only", first: []Option{withMirror}, second: []Option{withMirror, WithMirrorOnly(true)}, want: fromMirror, wantSrc: string(resolution.Registry)},
		{desc: "with a mirror twice", first: []Option{withMirror}, second: []Option{withMirror}, want: fromMirror, wantSrc: string(resolution.Cache)},
		{desc: "the same options twice", want: fromOrigin, wantSrc: string(resolution.Cache)},
		// A platform run of a single-platform image fails: what matters
		// is that it is not answered with the index run's entry.
		{desc: "the index, then a platform", second: []Option{amd64}, want: "", wantSrc: ""},
		{desc: "anonymous, then a user", second: []Option{as("alice", "pw-1")}, want: fromOrigin, wantSrc: string(resolution.Registry)},
		{desc: "one user, then another", first: []Option{as("alice", "pw-1")}, second: []Option{as("bob", "pw-2")}, want: fromOrigin, wantSrc: string(resolution.Registry)},
		{desc: "one user, with a changed password", first: []Option{as("alice", "pw-1")}, second: []Option{as("alice", "pw-2")}, want: fromOrigin, wantSrc: string(resolution.Cache)},
		{desc: "a bare token is not cached", first: []Option{as("", "token-1")}, second: []Option{as("", "token-1")}, want: fromOrigin, wantSrc: string(resolution.Registry)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c, _ := newTestCache(t, time.Hour)
			run := func(opts []Option) (string, string, error) {
				r, _ := newTestResolver(t, opts...)
				cr := c.resolver(r, r.CacheKey, func(f string, args ...any) { t.Errorf(f, args...) })
				res, err := cr.Resolve(context.Background(), parseRef(t, ref))
				return res.Digest.String(), string(res.Source), err
			}
			if _, _, err := run(tc.first); err != nil {
				t.Fatalf("first run: %v", err)
			}
			h, src, err := run(tc.second)
			if tc.want == "" {
				if err == nil {
					t.Errorf("second run = %s from %s, want an error", h, src)
				}
				return
			}
			if err != nil {
				t.Fatalf("second run: %v", err)
			}
			if diff := cmp.Diff([]string{tc.want, tc.wantSrc}, []string{h, src}); diff != "" {
				t.Errorf("second run: digest, source (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCacheEntryThatIsNoFileIsAMiss puts what is not a regular file where
// an entry is read: a FIFO (which blocks a reader until a writer comes),
// a link to /dev/zero (endless), a folder, and an entry too big to be
// one. Each is a miss, at once, and the reference is resolved.
func TestCacheEntryThatIsNoFileIsAMiss(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	want := reg.PushImage(t, "app:1").String()
	ref := reg.Ref("app:1")
	for _, tc := range []struct {
		desc string
		make func(path string) error
	}{
		{desc: "a FIFO", make: func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{desc: "a link to /dev/zero", make: func(p string) error { return os.Symlink("/dev/zero", p) }},
		{desc: "a link to a good entry", make: func(p string) error {
			good := p + ".good"
			if err := os.WriteFile(good, entryJSON(cacheFormat, parseRef(t, ref).Name(), "", want, time.Now()), 0o600); err != nil {
				return err
			}
			return os.Symlink(good, p)
		}},
		{desc: "a folder", make: func(p string) error { return os.Mkdir(p, 0o700) }},
		{desc: "a huge file", make: func(p string) error { return os.WriteFile(p, make([]byte, maxCacheEntry+1), 0o600) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c, _ := newTestCache(t, time.Hour)
			r, _ := newTestResolver(t)
			key, ok, err := r.CacheKey(context.Background(), parseRef(t, ref))
			if err != nil || !ok {
				t.Fatalf("CacheKey = %v, %v", ok, err)
			}
			if err := tc.make(c.entryPath(parseRef(t, ref), key)); err != nil {
				t.Fatal(err)
			}
			cr := c.resolver(r, r.CacheKey, nil)
			done := make(chan struct{})
			var res resolution.Resolution
			go func() {
				defer close(done)
				res, err = cr.Resolve(context.Background(), parseRef(t, ref))
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Resolve still blocked after 30s: the entry was waited on")
			}
			if err != nil || res.Digest.String() != want || res.Source != resolution.Registry {
				t.Errorf("Resolve = %+v, %v; want %s from the registry", res, err, want)
			}
		})
	}
}

// TestFilesThatAreNoFilesAreRefused gives a FIFO as a CA file and as a
// pull secret: each is refused at once, not waited on.
func TestFilesThatAreNoFilesAreRefused(t *testing.T) {
	t.Parallel()
	fifo := t.TempDir() + "/fifo"
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan [2]error)
	go func() {
		_, caErr := New(WithKeychain(anonymous), WithCAFiles(fifo))
		_, psErr := credentials.ReadPullSecret(fifo)
		done <- [2]error{caErr, psErr}
	}()
	select {
	case errs := <-done:
		wantErr(t, errs[0], "WithCAFiles: reading "+fifo+": not a regular file: a FIFO")
		wantErr(t, errs[1], "reading pull secret "+fifo+": not a regular file: a FIFO")
	case <-time.After(30 * time.Second):
		t.Fatal("still blocked after 30s on a FIFO")
	}
}

// hangingKeychain never answers until the test ends, like a credential
// helper that hangs.
type hangingKeychain struct{ release <-chan struct{} }

func (k hangingKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	<-k.release
	return authn.Anonymous, nil
}

// TestHangingCredentialHelperHonoursTheDeadline resolves with a keychain
// that never answers: the resolution ends with the caller's deadline,
// naming the credentials, rather than hang.
func TestHangingCredentialHelperHonoursTheDeadline(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	r, _ := newTestResolver(t, WithKeychain(hangingKeychain{release}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.Resolve(ctx, parseRef(t, reg.Ref("app:1")))
		done <- err
	}()
	select {
	case err := <-done:
		wantErr(t, err, reg.Ref("app:1"), "reading credentials for "+reg.Host())
	case <-time.After(30 * time.Second):
		t.Fatal("Resolve still blocked 30s after its deadline")
	}
}
