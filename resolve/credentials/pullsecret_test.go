package credentials

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

func TestReadPullSecret(t *testing.T) {
	t.Parallel()
	const secretPassword = "PULL-SECRET-PASSWORD"
	auth := base64.StdEncoding.EncodeToString([]byte("dave:" + secretPassword))
	dockerconfig := fmt.Sprintf(`{"auths": {"https://index.docker.io/v1/": {"auth": %q}, "registry.example:5000": {"username": "erin", "password": "pw-erin"}, "*.ecr.example": {"auth": %q}}}`, auth, auth)
	b64 := base64.StdEncoding.EncodeToString([]byte(dockerconfig))
	for _, tc := range []struct {
		desc    string
		content string
		want    map[string]string // registry → user ("" anonymous)
		wantErr string
	}{
		{
			desc:    "dockerconfigjson content",
			content: dockerconfig,
			want:    map[string]string{"index.docker.io": "dave", "registry.example:5000": "erin", "a.ecr.example": "dave", "a.b.ecr.example": "", "registry.example": "", "ghcr.io": ""},
		},
		{
			desc:    "legacy dockercfg content",
			content: fmt.Sprintf(`{"docker.io": {"auth": %q}}`, auth),
			want:    map[string]string{"index.docker.io": "dave", "ghcr.io": ""},
		},
		{
			desc:    "Secret as JSON, data",
			content: fmt.Sprintf(`{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": %q}}`, b64),
			want:    map[string]string{"index.docker.io": "dave", "registry.example:5000": "erin"},
		},
		{
			desc:    "Secret as JSON, stringData",
			content: fmt.Sprintf(`{"kind": "Secret", "stringData": {".dockerconfigjson": %q}}`, dockerconfig),
			want:    map[string]string{"index.docker.io": "dave"},
		},
		{desc: "YAML Secret", content: "apiVersion: v1\nkind: Secret\ndata:\n  .dockerconfigjson: " + b64, wantErr: "YAML is not read"},
		{desc: "broken JSON", content: `{"auths": {"x": {"auth": "` + secretPassword, wantErr: "invalid JSON"},
		{desc: "bad base64 auth", content: `{"auths": {"registry.example": {"auth": "` + secretPassword + `"}}}`, wantErr: `credentials for "registry.example": unreadable`},
		{desc: "no auths", content: `{"auths": {}}`, wantErr: "no registry credentials"},
		{desc: "other kind", content: `{"kind": "ConfigMap"}`, wantErr: "not Secret"},
		{desc: "Secret without the key", content: `{"kind": "Secret", "data": {"token": "eA=="}}`, wantErr: "without a .dockerconfigjson"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			kc, err := ReadPullSecret(file)
			if tc.wantErr != "" {
				wantErr(t, err, tc.wantErr, file)
				if strings.Contains(err.Error(), secretPassword) {
					t.Errorf("error %q shows the content", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadPullSecret: %v", err)
			}
			got := map[string]string{}
			for reg := range tc.want {
				r, err := name.NewRegistry(reg)
				if err != nil {
					t.Fatal(err)
				}
				a, err := kc.Resolve(r)
				if err != nil {
					t.Fatal(err)
				}
				cfg, err := a.Authorization()
				if err != nil {
					t.Fatal(err)
				}
				got[reg] = cfg.Username
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("users by registry (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPullSecretComposesAfterOthers(t *testing.T) {
	t.Parallel()
	ps, err := parsePullSecret([]byte(`{"auths": {"registry.example": {"username": "u", "password": "p"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	kc := authn.NewMultiKeychain(ps, authn.NewMultiKeychain())
	reg, _ := name.NewRegistry("other.example")
	a, err := kc.Resolve(reg)
	if err != nil || a != authn.Anonymous {
		t.Errorf("Resolve(other.example) = %v, %v, want Anonymous", a, err)
	}
}

func TestReadPullSecretMissingFile(t *testing.T) {
	t.Parallel()
	_, err := ReadPullSecret(filepath.Join(t.TempDir(), "nope"))
	wantErr(t, err, "reading pull secret", "no such file")
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
