package resolve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolution"
)

func TestTLSRegistry(t *testing.T) {
	t.Parallel()
	reg := testregistry.NewTLS(t)
	want := reg.PushImage(t, "app:1")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, reg.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc    string
		opts    []Option
		names   resolution.OptionNames // on the context
		wantErr []string
	}{
		{desc: "unknown CA", wantErr: []string{reg.TLSRef("app:1"), "TLS: certificate signed by an unknown authority (add its CA with WithCAFiles, or name the host with WithInsecureRegistries)"}},
		{desc: "unknown CA, options named by the caller", names: func(o string) string { return "<" + o + ">" },
			wantErr: []string{"(add its CA with <WithCAFiles>, or name the host with <WithInsecureRegistries>)"}},
		{desc: "with --ca-file", opts: []Option{WithCAFiles(ca)}},
		{desc: "with --insecure-registry", opts: []Option{WithInsecureRegistries(reg.TLSHost())}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r, _ := newTestResolver(t, tc.opts...)
			ctx := resolution.WithOptionNames(t.Context(), tc.names)
			var got string
			res, err := r.Resolve(ctx, parseRef(t, reg.TLSRef("app:1")))
			if err == nil {
				got = res.Digest.String()
			}
			if tc.wantErr != nil {
				wantErr(t, err, tc.wantErr...)
				return
			}
			if err != nil || got != want.String() {
				t.Errorf("Resolve = %s, %v, want %s", got, err, want)
			}
		})
	}
}

func TestCAFileWithoutCertificates(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(f, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(WithCAFiles(f))
	wantErr(t, err, "no PEM certificate")
}

// TestInsecureRegistryHosts checks that --insecure-registry takes a host
// only, with a hint for a URL, and matches the images' hosts as
// registries do: in any case (before, only the exact spelling matched).
func TestInsecureRegistryHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ host, want string }{
		{host: "http://registry.example:5000", want: `"http://registry.example:5000": give the host only, without a scheme: registry.example:5000`},
		{host: "https://registry.example/", want: "give the host only, without a scheme: registry.example"},
		{host: "registry.example/team", want: `"registry.example/team": give the host only, without a path: registry.example`},
		{host: "bad host", want: `"bad host" is not a registry host[:port]`},
		{host: "", want: "a host is empty"},
	} {
		if _, err := New(WithInsecureRegistries(tc.host)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(WithInsecureRegistries(%q)) = %v, want an error with %q", tc.host, err, tc.want)
		}
	}
	reg := testregistry.NewTLS(t)
	want := reg.PushImage(t, "app:1")
	_, port, _ := strings.Cut(reg.TLSHost(), ":")
	r, _ := newTestResolver(t, WithInsecureRegistries("LOCALHOST:"+port))
	if got, err := resolveString(t, r, "localhost:"+port+"/app:1"); err != nil || got != want.String() {
		t.Errorf("Resolve(localhost:%s/app:1) with LOCALHOST:%s insecure = %s, %v, want %s", port, port, got, err, want)
	}
}
