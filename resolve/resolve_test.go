package resolve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/digestpin/digestpin/internal/testregistry"
	regtransport "github.com/digestpin/digestpin/resolve/transport"
)

// anonymous is a keychain with no credentials, so that parallel tests do
// not read the environment.
var anonymous = authn.NewMultiKeychain()

// logBuffer collects a Resolver's log lines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuffer) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// newTestResolver returns a Resolver with millisecond backoffs, no
// credentials unless opts say otherwise, and its log.
func newTestResolver(t *testing.T, opts ...Option) (*Resolver, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	base := []Option{WithKeychain(anonymous), withRetry(regtransport.DefaultAttempts, time.Millisecond, 4*time.Millisecond), WithLogf(logs.logf)}
	r, err := New(append(base, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("resolver log:\n%s", logs)
		}
	})
	return r, logs
}

// parseRef parses a reference.
func parseRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatalf("parsing %q: %v", s, err)
	}
	return ref
}

// resolveString resolves s and returns the digest or the error message.
func resolveString(t *testing.T, r *Resolver, s string) (string, error) {
	t.Helper()
	res, err := r.Resolve(context.Background(), parseRef(t, s))
	if err != nil {
		return "", err
	}
	return res.Digest.String(), nil
}

// resolveAsync starts callers concurrent resolutions of each reference
// that is a key of refs, as the renderer asks, and returns a function that
// waits for them and returns the digests by reference.
func resolveAsync(t *testing.T, r *Resolver, refs map[string]string, callers int) func() map[string]string {
	t.Helper()
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	for ref := range refs {
		for range callers {
			wg.Go(func() {
				h, err := resolveString(t, r, ref)
				if err != nil {
					t.Errorf("Resolve(%s): %v", ref, err)
				}
				mu.Lock()
				got[ref] = h
				mu.Unlock()
			})
		}
	}
	return func() map[string]string {
		wg.Wait()
		return got
	}
}

// pushIndexWithoutPlatforms pushes an index of two images whose
// descriptors name no platform.
func pushIndexWithoutPlatforms(t *testing.T, reg *testregistry.Registry, repoTag string) {
	t.Helper()
	var idx v1.ImageIndex = empty.Index
	for range 2 {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img})
	}
	if err := remote.WriteIndex(parseRef(t, reg.Ref(repoTag)), idx); err != nil {
		t.Fatal(err)
	}
}

// pushPlatformImage pushes a single-platform image for platform p.
func pushPlatformImage(t *testing.T, reg *testregistry.Registry, repoTag, p string) v1.Hash {
	t.Helper()
	plat, err := v1.ParsePlatform(p)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return reg.Push(t, repoTag, img)
}

// wantErr checks that err is one line that contains every part.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("error = nil, want one containing %q", parts)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("error = %q, want it to contain %q", msg, p)
		}
	}
}

func TestResolveHeadOncePerReference(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	want := map[string]string{}
	for _, repo := range []string{"a:1", "b:1", "c:1"} {
		want[reg.Ref(repo)] = reg.PushImage(t, repo).String()
	}
	reg.ResetCounts()
	r, _ := newTestResolver(t, WithJobs(2))

	// Ten callers per reference, as concurrent as they come.
	got := resolveAsync(t, r, want, 10)()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("digests (-want +got):\n%s", diff)
	}
	counts := map[string]int{"HEAD manifests": reg.Count("HEAD manifests"), "GET manifests": reg.Count("GET manifests"), "GET ping": reg.Count("GET ping"), "total": reg.Total()}
	if diff := cmp.Diff(map[string]int{"HEAD manifests": 3, "GET manifests": 0, "GET ping": 1, "total": 4}, counts); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestResolveDigestCostsNothing(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	d := reg.PushImage(t, "app:1")
	reg.ResetCounts()
	r, _ := newTestResolver(t)
	got, err := resolveString(t, r, reg.Ref("app@"+d.String()))
	if err != nil || got != d.String() {
		t.Fatalf("Resolve = %s, %v, want %s", got, err, d)
	}
	if n := reg.Total(); n != 0 {
		t.Errorf("requests = %d, want 0", n)
	}
}

func TestResolvePlatform(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	index, children := reg.PushIndex(t, "multi:1", "linux/amd64", "linux/arm64/v8")
	single := pushPlatformImage(t, reg, "single:1", "linux/amd64")
	reg.PushImage(t, "bare:1") // a config without OS or architecture
	pushIndexWithoutPlatforms(t, reg, "bare-index:1")
	for _, tc := range []struct {
		desc     string
		repo     string
		platform string
		want     string
		wantErr  []string
	}{
		{desc: "index without platform", repo: "multi:1", want: index.String()},
		{desc: "index with platform", repo: "multi:1", platform: "linux/arm64/v8", want: children["linux/arm64/v8"].String()},
		{desc: "index without the platform", repo: "multi:1", platform: "linux/s390x", wantErr: []string{"multi:1", "no manifest for platform linux/s390x", "linux/amd64, linux/arm64/v8"}},
		{desc: "single image without platform", repo: "single:1", want: single.String()},
		{desc: "single image matching", repo: "single:1", platform: "linux/amd64", want: single.String()},
		{desc: "single image not matching", repo: "single:1", platform: "linux/arm64", wantErr: []string{"single:1", "single-platform image for linux/amd64, not linux/arm64"}},
		// Said "for <nil>" before.
		{desc: "single image without a platform", repo: "bare:1", platform: "linux/s390x", wantErr: []string{"bare:1", "a single-platform image whose config names no platform, not linux/s390x"}},
		// Said "the index has " and nothing before.
		{desc: "index without platforms", repo: "bare-index:1", platform: "linux/s390x", wantErr: []string{"bare-index:1", "no manifest for platform linux/s390x: the index names no platform for any of its 2 manifests"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var opts []Option
			if tc.platform != "" {
				p, err := v1.ParsePlatform(tc.platform)
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, WithPlatform(p))
			}
			r, _ := newTestResolver(t, opts...)
			got, err := resolveString(t, r, reg.Ref(tc.repo))
			if tc.wantErr != nil {
				wantErr(t, err, tc.wantErr...)
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Resolve(%s) = %s, %v, want %s", tc.repo, got, err, tc.want)
			}
		})
	}
}

func TestResolveGetOnlyWhenHeadGivesNoDigest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		head     func(w http.ResponseWriter)
		wantHEAD int
		wantGET  int
		wantErr  []string
	}{
		{
			desc: "no Docker-Content-Digest",
			head: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
			},
			wantHEAD: 1, wantGET: 1,
		},
		{
			desc:     "HEAD not allowed",
			head:     func(w http.ResponseWriter) { w.WriteHeader(http.StatusMethodNotAllowed) },
			wantHEAD: 1, wantGET: 1,
		},
		{
			desc:     "not found is not asked again",
			head:     func(w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound) },
			wantHEAD: 1, wantGET: 0,
			wantErr: []string{"HEAD manifest: 404 Not Found"},
		},
		{
			desc:     "forbidden is not asked again",
			head:     func(w http.ResponseWriter) { w.WriteHeader(http.StatusForbidden) },
			wantHEAD: 1, wantGET: 0,
			wantErr: []string{"HEAD manifest: 403 Forbidden"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			reg := testregistry.New(t)
			want := reg.PushImage(t, "app:1")
			reg.ResetCounts()
			reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodHead {
					return false
				}
				tc.head(w)
				return true
			})
			r, _ := newTestResolver(t)
			got, err := resolveString(t, r, reg.Ref("app:1"))
			if tc.wantErr != nil {
				wantErr(t, err, append(tc.wantErr, reg.Ref("app:1"))...)
			} else if err != nil || got != want.String() {
				t.Errorf("Resolve = %s, %v, want %s", got, err, want)
			}
			if h, g := reg.Count("HEAD manifests"), reg.Count("GET manifests"); h != tc.wantHEAD || g != tc.wantGET {
				t.Errorf("HEAD, GET manifests = %d, %d, want %d, %d", h, g, tc.wantHEAD, tc.wantGET)
			}
		})
	}
}

// TestNewValidates checks that New refuses options that cannot work
// with an *OptionError naming the option (and the option it needs), for
// a command to name its flag, and a message that names it too.
func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc          string
		opts          []Option
		option, needs string
		wantErr       string
	}{
		{desc: "zero jobs", opts: []Option{WithJobs(0)}, option: "WithJobs", needs: "", wantErr: "configuring resolver: WithJobs: jobs must be positive, got 0"},
		{desc: "zero request timeout", opts: []Option{WithRequestTimeout(0)}, option: "WithRequestTimeout", needs: "", wantErr: "configuring resolver: WithRequestTimeout: request timeout must be positive, got 0s"},
		{desc: "nil keychain", opts: []Option{WithKeychain(nil)}, option: "WithKeychain", needs: "", wantErr: "WithKeychain: the keychain is nil"},
		{desc: "nil transport", opts: []Option{WithTransport(nil)}, option: "WithTransport", needs: "", wantErr: "WithTransport: the transport is nil"},
		{desc: "empty insecure host", opts: []Option{WithInsecureRegistries("")}, option: "WithInsecureRegistries", needs: "", wantErr: "WithInsecureRegistries: a host is empty"},
		{desc: "mirror-only without mirrors", opts: []Option{WithMirrorOnly(true)}, option: "WithMirrorOnly", needs: "WithMirror", wantErr: "WithMirrorOnly: needs a WithMirror"},
		{desc: "bad mirror", opts: []Option{WithMirror("docker.io", "https://mirror.example")}, option: "WithMirror", needs: "", wantErr: "WithMirror: mirror docker.io=https://mirror.example: give registry hosts without a scheme"},
		{desc: "empty CA file name", opts: []Option{WithCAFiles("")}, option: "WithCAFiles", needs: "", wantErr: "WithCAFiles: a file name is empty"},
		{desc: "missing CA file", opts: []Option{WithCAFiles("/nonexistent/ca.pem")}, option: "WithCAFiles", needs: "", wantErr: "WithCAFiles: reading /nonexistent/ca.pem"},
		{desc: "CA file with a transport that is no *http.Transport", opts: []Option{WithTransport(&countingTransport{next: http.DefaultTransport}), WithCAFiles("/nonexistent/ca.pem")}, option: "WithCAFiles", needs: "", wantErr: "WithCAFiles: needs the default transport"},
		{desc: "bad retry policy", opts: []Option{withRetry(0, time.Second, time.Second)}, option: "withRetry", needs: "", wantErr: "withRetry: invalid policy"},
		// A platform without an OS or an architecture would pin the
		// first manifest that matches the rest, silently.
		{desc: "platform without architecture", opts: []Option{WithPlatform(&v1.Platform{OS: "linux"})}, option: "WithPlatform", needs: "", wantErr: `WithPlatform: "linux/" names no OS and architecture`},
		{desc: "platform without OS", opts: []Option{WithPlatform(&v1.Platform{Architecture: "amd64"})}, option: "WithPlatform", needs: "", wantErr: `WithPlatform: "/amd64" names no OS and architecture`},
		{desc: "empty platform", opts: []Option{WithPlatform(&v1.Platform{})}, option: "WithPlatform", needs: "", wantErr: `WithPlatform: "/" names no OS and architecture`},
		{desc: "platform with a variant but no architecture", opts: []Option{WithPlatform(&v1.Platform{OS: "linux", Variant: "v7"})}, option: "WithPlatform", needs: "", wantErr: `WithPlatform: "linux//v7"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := New(tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New() error = %v, want one containing %q", err, tc.wantErr)
			}
			var oe *OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("New() error = %v, want an *OptionError", err)
			}
			if diff := cmp.Diff(tc.option+"|"+tc.needs, oe.Option+"|"+oe.Needs); diff != "" {
				t.Errorf("New() OptionError option|needs (-want +got):\n%s", diff)
			}
			if got, want := oe.Message(func(o string) string { return "<" + o + ">" }), "<"+tc.option+">: "; !strings.HasPrefix(got, want) || (tc.needs != "" && !strings.HasSuffix(got, "<"+tc.needs+">")) {
				t.Errorf("Message() = %q, want it to start with %q and name the option needed", got, want)
			}
		})
	}
}

// TestWithPlatformNeedsOSAndArchitecture parses platforms as the command
// line does and checks which New accepts: one that names no OS or no
// architecture would pin the first manifest that matches the rest.
func TestWithPlatformNeedsOSAndArchitecture(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		platform string
		wantErr  bool
	}{
		{"linux", true},
		{"/amd64", true},
		{"/", true},
		{"linux/", true},
		{"", true},
		{"linux/amd64", false},
		{"linux/arm/v7", false},
		{"windows/amd64:10.0.17763.1", false},
	} {
		p, err := v1.ParsePlatform(tc.platform)
		if err != nil {
			t.Fatalf("ParsePlatform(%q): %v", tc.platform, err)
		}
		_, err = New(WithKeychain(anonymous), WithPlatform(p))
		if got := err != nil; got != tc.wantErr {
			t.Errorf("New(WithPlatform(%q)) error = %v, want error %v", tc.platform, err, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "WithPlatform: ") {
			t.Errorf("New(WithPlatform(%q)) error = %q, want it to name WithPlatform", tc.platform, err)
		}
	}
}
