package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
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
		t.Run(tc.desc, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := append([]string{"oci://127.0.0.1:1/shop/manifests:prod", "--path", "-"}, tc.args...)
			var stdout, stderr bytes.Buffer
			err := runFluxPush(t.Context(), args, strings.NewReader("kind: ConfigMap\n"), &stdout, &stderr)
			var ue *UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("digestpin flux push %s = %v, want a usage error with %q", strings.Join(tc.args, " "), err, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}
