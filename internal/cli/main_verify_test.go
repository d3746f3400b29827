package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/internal/testsign"
	"github.com/digestpin/digestpin/verify"
)

// TestRunVerify: --verify with a key and a keyless policy (and the
// configuration file's verify), through the command: signed images pin,
// the lock file records who signed, and an unsigned one fails the run in
// one line with nothing on stdout.
func TestRunVerify(t *testing.T) {
	const id, iss = "ci@acme.example", "https://accounts.acme.example"
	reg := testregistry.New(t)
	vs := testsign.NewVirtualSigstore(t)
	kp, keyFile := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	web := testsign.PushImage(t, reg, "shop/web", "1")
	testsign.Attach(t, web, testsign.KeyBundle(t, kp, testsign.Statement(t, web, verify.CosignSignPredicate)))
	api := testsign.PushImage(t, reg, "shop/api", "1")
	testsign.Attach(t, api, vs.KeylessBundle(t, id, iss, testsign.Statement(t, api, verify.CosignSignPredicate), time.Now(), true, true))
	testsign.PushImage(t, reg, "shop/unsigned", "1")
	in := gen.Deployments("shop", reg.Ref("shop/web:1"), reg.Ref("shop/api:1"))
	lock := filepath.Join(t.TempDir(), "digests.lock")
	cfg := writeConfig(t, "verify: ['"+reg.Host()+"/shop/api=keyless:"+id+"@"+iss+"']\ntrustedRoot: "+vs.RootFile+"\n")

	out, stderr, err := runIn(t, string(in), "--config", cfg, "--verify", reg.Host()+"/shop/web=key:"+keyFile, "--write-lock", lock)
	if err != nil {
		t.Fatalf("run(signed) = %v\n%s", err, stderr)
	}
	if !strings.Contains(out, web.DigestStr()) || !strings.Contains(out, api.DigestStr()) {
		t.Errorf("output does not pin both digests:\n%s", out)
	}
	b, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"version: 4", "identity: key sha256:", "identity: " + id + " (issuer " + iss + ")", "bundle: sha256:"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("lock file lacks %q:\n%s", want, b)
		}
	}

	// An unsigned image under a policy: one line, nothing on stdout.
	in = gen.Deployments("shop", reg.Ref("shop/unsigned:1"))
	out, stderr, err = runIn(t, string(in), "--verify", reg.Host()+"/shop/*=key:"+keyFile, "--on-error", "keep")
	if err == nil || out != "" {
		t.Fatalf("run(unsigned) = %v, stdout %q; want an error and no output", err, out)
	}
	if !strings.Contains(err.Error(), "shop/unsigned@sha256:") || !strings.Contains(err.Error(), "no signature") {
		t.Errorf("run(unsigned) = %v, want the image, digest and why", err)
	}
	_ = stderr

	// DIGESTPIN_VERIFY is one policy, commas and all.
	t.Setenv("DIGESTPIN_VERIFY", reg.Host()+"/shop/*=keyless:/a{1,2}@acme\\.example/@"+iss)
	t.Setenv("DIGESTPIN_TRUSTED_ROOT", vs.RootFile)
	in = gen.Deployments("shop", reg.Ref("shop/api:1"))
	if _, _, err := runIn(t, string(in)); err == nil || !strings.Contains(err.Error(), "wrong identity: signed by "+id) {
		t.Errorf("run(DIGESTPIN_VERIFY with a comma) = %v, want the policy whole (wrong identity)", err)
	}
}

// TestRunVerifyBadInput: each bad --verify, key, trusted root or config
// entry is one line naming the flag or file.
func TestRunVerifyBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, keyFile := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ED25519)
	in := string(gen.Deployments("shop", "registry.example/shop/web:1"))
	for _, tc := range []struct {
		desc string
		args []string
		want string
	}{
		{"unknown policy", []string{"--verify", "registry.example/**=cosign:x"}, `invalid --verify "registry.example/**=cosign:x": term "cosign:x": unknown policy`},
		{"no policy", []string{"--verify", "registry.example/**"}, "want IMAGE-GLOB=POLICY"},
		{"unreadable key", []string{"--verify", "registry.example/**=key:" + filepath.Join(dir, "missing.pub")}, "reading key"},
		{"not a key", []string{"--verify", "registry.example/**=key:" + garbage}, "not a PEM public key"},
		{"keyless without a trusted root", []string{"--verify", "registry.example/**=keyless:a@b"}, "needs --trusted-root FILE"},
		{"trusted root that does not parse", []string{"--verify", "registry.example/**=keyless:a@b", "--trusted-root", garbage}, "--trusted-root: reading trusted root " + garbage + ": not a Sigstore trusted root"},
		{"trusted root without a policy", []string{"--trusted-root", garbage}, "--trusted-root: no --verify policy needs it"},
		{"or and and", []string{"--verify", "registry.example/**=key:" + keyFile + " or none and none"}, "not a mix"},
		{"a glob twice", []string{"--verify", "registry.example/**=none", "--verify", "registry.example/**=key:" + keyFile}, "has a policy already"},
		{"a glob with a tag", []string{"--verify", "registry.example/web:1=none"}, "no tag, digest"},
		{"config entry", []string{"--config", writeConfig(t, "verify:\n- registry.example/**=nope\n")}, "line 4: verify: invalid"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			out, _, err := runIn(t, in, tc.args...)
			if err == nil || out != "" || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("run(%q) = %v, stdout %q; want one line containing %q", tc.args, err, out, tc.want)
			}
		})
	}
}
