package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// writeIn writes b to name under dir (writeFile) and returns its path.
func writeIn(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	writeFile(t, p, string(b))
	return p
}

// dockerConfigJSON is a docker config (and .dockerconfigjson) with user
// and password for host.
func dockerConfigJSON(host, user, password string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return fmt.Appendf(nil, `{"auths": {%q: {"auth": %q}}}`, host, auth)
}

// signingKey writes an unencrypted PEM private key, which --sign-key
// reads as cosign's, and returns its path.
func signingKey(t *testing.T, dir string) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return writeIn(t, dir, "sign.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// failOnce answers the first request that each of match matches with
// 503: the retries must carry the push. It fails the test unless every
// one of them was met.
func failOnce(t *testing.T, match ...func(*http.Request) bool) testregistry.Handler {
	var mu sync.Mutex
	done := make([]bool, len(match))
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if slices.Contains(done, false) {
			t.Errorf("503s answered: %v, want every one", done)
		}
	})
	return func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		for i, m := range match {
			if !done[i] && m(r) {
				done[i] = true
				w.WriteHeader(http.StatusServiceUnavailable)
				return true
			}
		}
		return false
	}
}

// TestFluxPushRegistrySettings: digestpin flux push reaches the registry
// as the pinning does, with the same settings: the credentials of
// --pull-secret and DOCKER_CONFIG, the CA of --ca-file (or
// DIGESTPIN_CA_FILE), --insecure-registry, the retries. The push, the
// check of an unchanged tag (a second run) and the signature all go
// through them. A registry that refuses or cannot be trusted fails in
// one line that names it, with no password, nothing on stdout.
func TestFluxPushRegistrySettings(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	type setup struct {
		reg  *testregistry.Registry
		host string              // the registry pushed to
		args []string            // flux push's registry flags
		env  []string            // beyond HOME and DOCKER_CONFIG
		auth authn.Authenticator // to read the registry back
	}
	basic := func(t *testing.T) *testregistry.Registry {
		reg := testregistry.New(t)
		reg.Handle(testregistry.BasicAuth("alice", "s3cret"))
		return reg
	}
	tlsCA := func(t *testing.T, dir string) (*testregistry.TLS, string) {
		reg := testregistry.NewTLS(t)
		return reg, writeIn(t, dir, "ca.pem", reg.CertPEM())
	}
	alice := &authn.Basic{Username: "alice", Password: "s3cret"}
	for _, tc := range []struct {
		desc    string
		setup   func(t *testing.T, dir string) setup
		wantErr []string // parts of the one line on stderr
		secret  string   // never on stderr
	}{
		{
			desc: "basic auth: --pull-secret",
			setup: func(t *testing.T, dir string) setup {
				reg := basic(t)
				f := writeIn(t, dir, "pull-secret.json", dockerConfigJSON(reg.Host(), "alice", "s3cret"))
				return setup{reg: reg, host: reg.Host(), args: []string{"--pull-secret", f}, auth: alice}
			},
		},
		{
			desc: "basic auth: the docker config",
			setup: func(t *testing.T, dir string) setup {
				reg := basic(t)
				writeIn(t, dir, "docker/config.json", dockerConfigJSON(reg.Host(), "alice", "s3cret"))
				return setup{reg: reg, host: reg.Host(), auth: alice}
			},
		},
		{
			desc: "basic auth: wrong credentials",
			setup: func(t *testing.T, dir string) setup {
				reg := basic(t)
				f := writeIn(t, dir, "pull-secret.json", dockerConfigJSON(reg.Host(), "alice", "hunter2-wrong"))
				return setup{reg: reg, host: reg.Host(), args: []string{"--pull-secret", f}}
			},
			wantErr: []string{"/shop/manifests:prod: ", "401 Unauthorized", `credentials sent: user "alice" from pull secret`},
			secret:  "hunter2-wrong",
		},
		{
			desc: "basic auth: no credentials",
			setup: func(t *testing.T, _ string) setup {
				reg := basic(t)
				return setup{reg: reg, host: reg.Host()}
			},
			wantErr: []string{"/shop/manifests:prod: ", "401 Unauthorized", "no credentials sent"},
		},
		{
			desc: "a token server grants push",
			setup: func(t *testing.T, dir string) setup {
				reg := testregistry.New(t)
				ts := testregistry.NewTokenServer(t, "alice", "s3cret")
				reg.Handle(ts.Guard())
				t.Cleanup(func() {
					if !slices.ContainsFunc(ts.Scopes(), func(s []string) bool {
						return slices.Contains(s, "repository:shop/manifests:push,pull")
					}) {
						t.Errorf("token requests %v, none for push", ts.Scopes())
					}
				})
				f := writeIn(t, dir, "pull-secret.json", dockerConfigJSON(reg.Host(), "alice", "s3cret"))
				return setup{reg: reg, host: reg.Host(), args: []string{"--pull-secret", f}, auth: authn.Anonymous}
			},
		},
		{
			desc: "TLS: --ca-file",
			setup: func(t *testing.T, dir string) setup {
				reg, ca := tlsCA(t, dir)
				return setup{reg: reg.Registry, host: reg.TLSHost(), args: []string{"--ca-file", ca}}
			},
		},
		{
			desc: "TLS: DIGESTPIN_CA_FILE",
			setup: func(t *testing.T, dir string) setup {
				reg, ca := tlsCA(t, dir)
				return setup{reg: reg.Registry, host: reg.TLSHost(), env: []string{"DIGESTPIN_CA_FILE=" + ca}}
			},
		},
		{
			desc: "TLS: --insecure-registry",
			setup: func(t *testing.T, _ string) setup {
				reg := testregistry.NewTLS(t)
				return setup{reg: reg.Registry, host: reg.TLSHost(), args: []string{"--insecure-registry", reg.TLSHost()}}
			},
		},
		{
			desc: "TLS: the CA not given",
			setup: func(t *testing.T, _ string) setup {
				reg := testregistry.NewTLS(t)
				return setup{reg: reg.Registry, host: reg.TLSHost()}
			},
			wantErr: []string{"/shop/manifests:prod: ", "TLS: certificate signed by an unknown authority (add its CA with --ca-file, or name the host with --insecure-registry)"},
		},
		{
			desc: "503 then 200: the tag's check, the push and the signature retried",
			setup: func(t *testing.T, _ string) setup {
				reg := testregistry.New(t)
				reg.Handle(failOnce(t,
					func(r *http.Request) bool {
						return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/manifests/prod")
					},
					func(r *http.Request) bool {
						return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/manifests/prod")
					},
					func(r *http.Request) bool { return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, ".sig") },
				))
				return setup{reg: reg, host: reg.Host()}
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := tc.setup(t, dir)
			key := signingKey(t, dir)
			env := append([]string{"HOME=" + dir, "DOCKER_CONFIG=" + filepath.Join(dir, "docker")}, s.env...)
			art := s.host + "/shop/manifests:prod"
			push := func() result {
				return runCmd(t, dir, []byte("kind: ConfigMap\n"), env, bin,
					append([]string{"flux", "push", "oci://" + art, "--path", "-", "--sign-key", key}, s.args...)...)
			}
			r := push()
			t.Logf("stderr: %s", r.stderr)
			if tc.wantErr != nil {
				if r.err == nil || r.stdout != "" || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
					t.Fatalf("err %v, stdout %q, stderr %q: want a failure in one line", r.err, r.stdout, r.stderr)
				}
				for _, w := range append(tc.wantErr, s.host) {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("stderr %q, want %q in it", r.stderr, w)
					}
				}
				if tc.secret != "" && strings.Contains(r.stderr, tc.secret) {
					t.Errorf("stderr %q shows the password", r.stderr)
				}
				return
			}
			if r.err != nil || !strings.Contains(r.stdout, ": pushed and signed sha256:") {
				t.Fatalf("digestpin flux push = %v\n%s%s", r.err, r.stdout, r.stderr)
			}
			h := pushedDigest(t, r.stdout)

			// The tag's check, a second time: unchanged.
			if r = push(); r.err != nil || !strings.Contains(r.stdout, "unchanged, not pushed") || pushedDigest(t, r.stdout) != h {
				t.Errorf("a second push = %v, %q, want unchanged %s\n%s", r.err, r.stdout, h, r.stderr)
			}

			// The signature is in the registry, where cosign looks.
			sig, err := name.NewTag(s.reg.Ref("shop/manifests:" + strings.Replace(h, ":", "-", 1) + ".sig"))
			if err != nil {
				t.Fatal(err)
			}
			opts := []remote.Option{}
			if s.auth != nil && s.auth != authn.Anonymous {
				opts = append(opts, remote.WithAuth(s.auth))
			}
			if s.auth == authn.Anonymous {
				return // behind the token server; the push said it signed
			}
			if _, err := remote.Head(sig, opts...); err != nil {
				t.Errorf("the signature %s: %v", sig, err)
			}
		})
	}
}
