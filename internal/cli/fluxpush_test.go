package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFluxPushRegistryFlagErrors: the registry flags of digestpin flux
// push, from the command line or their DIGESTPIN_* variables, fail as the
// pinning commands' do, named as the person set them; the mirrors' are
// not flux push's.
func TestFluxPushRegistryFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		desc string
		args []string
		env  map[string]string
		want string
	}{
		{desc: "CA file that is no file", args: []string{"--ca-file", "/dev/null"}, want: "digestpin flux push: --ca-file: reading /dev/null: not a regular file"},
		{desc: "CA file from the environment", env: map[string]string{"DIGESTPIN_CA_FILE": "/dev/null"}, want: "digestpin flux push: DIGESTPIN_CA_FILE: reading /dev/null: not a regular file"},
		{desc: "insecure registry as a URL", args: []string{"--insecure-registry", "http://localhost:5000"}, want: `--insecure-registry: "http://localhost:5000": give the host only, without a scheme: localhost:5000`},
		{desc: "request timeout from the environment", env: map[string]string{"DIGESTPIN_REQUEST_TIMEOUT": "0s"}, want: `invalid DIGESTPIN_REQUEST_TIMEOUT "0s"`},
		{desc: "missing pull secret", args: []string{"--pull-secret", "/nonexistent.json"}, want: "digestpin flux push: --pull-secret: reading pull secret /nonexistent.json"},
		{desc: "a mirror", args: []string{"--registry-mirror", "docker.io=mirror.example"}, want: "unknown flag: --registry-mirror"},
	} {
		t.Run(tc.desc, func(t *testing.T) { wantFluxPushUsageError(t, tc.args, tc.env, tc.want) })
	}
}

// jwt is an unsigned token with claims, enough for what digestpin reads
// of one before Fulcio checks it.
func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"ES256"}`)) + "." + enc(b) + "." + enc([]byte("sig"))
}

// TestFluxPushKeylessErrors: --sign-keyless's bad input is one line,
// before anything is pushed (the registry at 127.0.0.1:1 answers nothing).
func TestFluxPushKeylessErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	expired := file("expired", jwt(t, map[string]any{"iss": "https://issuer.example", "sub": "ci", "exp": time.Now().Add(-time.Hour).Unix()}))
	for _, tc := range []struct {
		desc string
		args []string
		env  map[string]string
		want string
	}{
		{desc: "key and keyless", args: []string{"--sign-keyless", "--sign-key", "cosign.key"}, want: "--sign-key and --sign-keyless: choose one"},
		{desc: "token without keyless", args: []string{"--identity-token", expired}, want: "are for --sign-keyless"},
		{desc: "Fulcio without keyless", args: []string{"--fulcio-url", "https://fulcio.example"}, want: "are for --sign-keyless"},
		{desc: "no token", args: []string{"--sign-keyless"}, want: "no OIDC identity token: name its file with --identity-token, set SIGSTORE_ID_TOKEN, or run in GitHub Actions"},
		{desc: "token file missing", args: []string{"--sign-keyless", "--identity-token", filepath.Join(dir, "none")}, want: "reading the identity token: open " + filepath.Join(dir, "none")},
		{desc: "token file a device", args: []string{"--sign-keyless", "--identity-token", "/dev/zero"}, want: "reading the identity token: /dev/zero: not a regular file"},
		{desc: "signing key a device", args: []string{"--sign-key", "/dev/zero"}, want: "reading the signing key /dev/zero: /dev/zero: not a regular file"},
		{desc: "token file empty", args: []string{"--sign-keyless", "--identity-token", file("empty", "\n")}, want: "the identity token file " + filepath.Join(dir, "empty") + " is empty"},
		{desc: "token no JWT", env: map[string]string{"SIGSTORE_ID_TOKEN": "secret"}, args: []string{"--sign-keyless"}, want: "SIGSTORE_ID_TOKEN: the identity token is no JWT"},
		{desc: "token without issuer", args: []string{"--sign-keyless", "--identity-token", file("noiss", jwt(t, map[string]any{"sub": "ci"}))}, want: "names no issuer"},
		{desc: "token expired", args: []string{"--sign-keyless", "--identity-token", expired}, want: "the identity token from https://issuer.example expired at "},
		{desc: "Fulcio URL no URL", args: []string{"--sign-keyless", "--fulcio-url", "fulcio.example"}, want: `--fulcio-url "fulcio.example" is no http(s) URL`},
		{desc: "Rekor URL from the environment", env: map[string]string{"DIGESTPIN_REKOR_URL": "ftp://rekor.example"}, args: []string{"--sign-keyless"}, want: `--rekor-url "ftp://rekor.example" is no http(s) URL`},
	} {
		t.Run(tc.desc, func(t *testing.T) { wantFluxPushUsageError(t, tc.args, tc.env, tc.want) })
	}
}

// wantFluxPushUsageError runs digestpin flux push with args and the
// environment env (the identity token's variables cleared) against a
// registry that answers nothing, and wants a one-line usage error with
// want and nothing on stdout.
func wantFluxPushUsageError(t *testing.T, args []string, env map[string]string, want string) {
	t.Helper()
	for _, k := range []string{"SIGSTORE_ID_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"} {
		t.Setenv(k, "")
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	all := append([]string{"oci://127.0.0.1:1/shop/manifests:prod", "--path", "-"}, args...)
	var stdout, stderr bytes.Buffer
	err := runFluxPush(t.Context(), all, strings.NewReader("kind: ConfigMap\n"), &stdout, &stderr)
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("digestpin flux push %s = %v, want a one-line usage error with %q", strings.Join(args, " "), err, want)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
}

// TestIdentityTokenGitHub: in GitHub Actions, the token is asked of the
// job's token service for the audience sigstore, with its bearer token;
// a refusal says what to check.
func TestIdentityTokenGitHub(t *testing.T) {
	want := jwt(t, map[string]any{"iss": "https://token.actions.example", "sub": "repo:shop/fleet:ref:refs/heads/main"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer job-token" || r.URL.Query().Get("audience") != "sigstore" || r.URL.Query().Get("api-version") != "2.0" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"value": want})
	}))
	defer srv.Close()
	env := func(bearer string) func(string) string {
		return func(k string) string {
			return map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": srv.URL + "/token?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": bearer}[k]
		}
	}
	got, from, err := identityToken(t.Context(), "", env("job-token"), srv.Client())
	if err != nil || got != want || from != "GitHub Actions' identity token" {
		t.Errorf("identityToken = %q, %q, %v; want the service's token", got, from, err)
	}
	_, _, err = identityToken(t.Context(), "", env("wrong"), srv.Client())
	if err == nil || !strings.Contains(err.Error(), "GitHub Actions refused an identity token: 403 Forbidden (does the job have permissions id-token: write?)") {
		t.Errorf("identityToken with a wrong bearer = %v", err)
	}
	// SIGSTORE_ID_TOKEN comes before GitHub's service, a file before both.
	tok := jwt(t, map[string]any{"iss": "https://gitlab.example"})
	envToken := func(k string) string {
		if k == "SIGSTORE_ID_TOKEN" {
			return tok + "\n"
		}
		return env("job-token")(k)
	}
	if got, from, err := identityToken(t.Context(), "", envToken, srv.Client()); err != nil || got != tok || from != "SIGSTORE_ID_TOKEN" {
		t.Errorf("identityToken with SIGSTORE_ID_TOKEN = %q, %q, %v", got, from, err)
	}
}
