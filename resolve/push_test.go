package resolve

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve/credentials"
)

// pullSecretFile writes a .dockerconfigjson with user and password for
// host, and returns its keychain and path.
func pullSecretFile(t *testing.T, host, user, password string) (string, Option) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	if err := os.WriteFile(f, fmt.Appendf(nil, `{"auths": {%q: {"auth": %q}}}`, host, auth), 0o600); err != nil {
		t.Fatal(err)
	}
	kc, err := credentials.ReadPullSecret(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, WithKeychain(credentials.Keychains(kc, anonymous))
}

// userAgents records the User-Agent of each request.
type userAgents struct {
	mu  sync.Mutex
	uas map[string]bool
}

func (u *userAgents) handler() testregistry.Handler {
	return func(_ http.ResponseWriter, r *http.Request) bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.uas[r.UserAgent()] = true
		return false
	}
}

// TestPush: Resolver.Push reaches a registry as a resolution does (the
// keychain, the CA files, the retries, the User-Agent), with push
// access, never through a mirror; its failures are one line that names
// the reference and the registry's answer, and never a password.
func TestPush(t *testing.T) {
	t.Parallel()
	type setup struct {
		reg  *testregistry.Registry
		ref  string
		opts []Option
	}
	for _, tc := range []struct {
		desc    string
		setup   func(t *testing.T) setup
		wantErr []string
		secret  string // never in the error
		check   func(t *testing.T, s setup)
	}{
		{
			desc: "basic auth, credentials from a pull secret",
			setup: func(t *testing.T) setup {
				reg := testregistry.New(t)
				reg.Handle(testregistry.BasicAuth("alice", "s3cret"))
				_, kc := pullSecretFile(t, reg.Host(), "alice", "s3cret")
				return setup{reg: reg, ref: reg.Ref("private/app:1"), opts: []Option{kc}}
			},
		},
		{
			desc: "basic auth, wrong credentials",
			setup: func(t *testing.T) setup {
				reg := testregistry.New(t)
				reg.Handle(testregistry.BasicAuth("alice", "s3cret"))
				_, kc := pullSecretFile(t, reg.Host(), "alice", "not-the-password")
				return setup{reg: reg, ref: reg.Ref("private/app:1"), opts: []Option{kc}}
			},
			wantErr: []string{"/private/app:1: ", "401 Unauthorized", `credentials sent: user "alice" from pull secret`},
			secret:  "not-the-password",
		},
		{
			desc: "token server: a token for push",
			setup: func(t *testing.T) setup {
				reg := testregistry.New(t)
				ts := testregistry.NewTokenServer(t, "alice", "s3cret")
				reg.Handle(ts.Guard())
				_, kc := pullSecretFile(t, reg.Host(), "alice", "s3cret")
				return setup{reg: reg, ref: reg.Ref("private/app:1"), opts: []Option{kc}}
			},
		},
		{
			desc: "TLS, the CA from WithCAFiles",
			setup: func(t *testing.T) setup {
				reg := testregistry.NewTLS(t)
				ca := filepath.Join(t.TempDir(), "ca.pem")
				if err := os.WriteFile(ca, reg.CertPEM(), 0o600); err != nil {
					t.Fatal(err)
				}
				return setup{reg: reg.Registry, ref: reg.TLSRef("app:1"), opts: []Option{WithCAFiles(ca)}}
			},
		},
		{
			desc: "TLS, the CA unknown",
			setup: func(t *testing.T) setup {
				reg := testregistry.NewTLS(t)
				return setup{reg: reg.Registry, ref: reg.TLSRef("app:1")}
			},
			wantErr: []string{"/app:1: ", "TLS: certificate signed by an unknown authority (add its CA with <WithCAFiles>"},
		},
		{
			desc: "TLS, the host insecure",
			setup: func(t *testing.T) setup {
				reg := testregistry.NewTLS(t)
				return setup{reg: reg.Registry, ref: reg.TLSRef("app:1"), opts: []Option{WithInsecureRegistries(reg.TLSHost())}}
			},
		},
		{
			desc: "503 then 200: retried, with the User-Agent",
			setup: func(t *testing.T) setup {
				reg := testregistry.New(t)
				var once atomic.Bool
				reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
					if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") && once.CompareAndSwap(false, true) {
						w.WriteHeader(http.StatusServiceUnavailable)
						return true
					}
					return false
				})
				return setup{reg: reg, ref: reg.Ref("app:1")}
			},
			check: func(t *testing.T, s setup) {
				if got := s.reg.Count("PUT manifests"); got != 2 {
					t.Errorf("PUT manifests = %d, want 2 (a 503, then the retry)", got)
				}
			},
		},
		{
			desc: "a mirror of the registry is not asked",
			setup: func(t *testing.T) setup {
				reg := testregistry.New(t)
				mirror := testregistry.New(t)
				t.Cleanup(func() {
					if n := mirror.Total(); n != 0 {
						t.Errorf("the mirror got %d requests, want none", n)
					}
				})
				return setup{reg: reg, ref: reg.Ref("app:1"), opts: []Option{WithMirror(reg.Host(), mirror.Host()), WithMirrorOnly(true)}}
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			s := tc.setup(t)
			uas := &userAgents{uas: map[string]bool{}}
			s.reg.Handle(uas.handler())
			r, _ := newTestResolver(t, append(s.opts, WithUserAgent("digestpin/test"))...)
			ref, err := name.NewTag(s.ref)
			if err != nil {
				t.Fatal(err)
			}
			img, err := random.Image(64, 1)
			if err != nil {
				t.Fatal(err)
			}
			want, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			ctx := resolution.WithOptionNames(t.Context(), func(o string) string { return "<" + o + ">" })
			err = r.Push(ctx, ref, func(ctx context.Context, opts ...remote.Option) error {
				opts = append(opts, remote.WithContext(ctx))
				if err := remote.Write(ref, img, opts...); err != nil {
					return err
				}
				d, err := remote.Get(ref, opts...)
				if err != nil {
					return err
				}
				if d.Digest != want {
					return fmt.Errorf("the tag holds %s, want %s", d.Digest, want)
				}
				return nil
			})
			if tc.wantErr != nil {
				wantErr(t, err, tc.wantErr...)
				if tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
					t.Errorf("error %q shows the password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Push: %v", err)
			}
			uas.mu.Lock()
			for ua := range uas.uas {
				if !strings.HasPrefix(ua, "digestpin/test") {
					t.Errorf("User-Agent %q, want digestpin/test first", ua)
				}
			}
			uas.mu.Unlock()
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}
