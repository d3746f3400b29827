package verify_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/internal/testsign"
	"github.com/digestpin/digestpin/verify"
)

// verifyOne verifies d under spec ("GLOB=POLICY" for d's repository).
func verifyOne(t *testing.T, r verify.Registry, d name.Digest, spec, trustedRoot string) (*verify.Record, error) {
	t.Helper()
	var ps verify.Policies
	if err := ps.Add(spec); err != nil {
		t.Fatalf("Add(%q) = %v", spec, err)
	}
	if trustedRoot != "" {
		if err := ps.SetTrustedRoot(trustedRoot); err != nil {
			t.Fatal(err)
		}
	}
	v, err := verify.NewVerifier(r, &ps)
	if err != nil {
		t.Fatal(err)
	}
	p := ps.For(d.Context())
	if p == nil {
		t.Fatalf("no policy for %s under %q", d.Context(), spec)
	}
	return v.Verify(context.Background(), d, p)
}

func TestKeyBundleThroughReferrers(t *testing.T) {
	for _, alg := range []protocommon.PublicKeyDetails{
		protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256,
		protocommon.PublicKeyDetails_PKIX_ECDSA_P384_SHA_384,
		protocommon.PublicKeyDetails_PKIX_ED25519,
		protocommon.PublicKeyDetails_PKIX_RSA_PKCS1V15_2048_SHA256,
	} {
		t.Run(alg.String(), func(t *testing.T) {
			reg := testregistry.New(t)
			d := testsign.PushImage(t, reg, "acme/app", "1.0")
			kp, keyFile := testsign.NewKey(t, alg)
			testsign.Attach(t, d, testsign.KeyBundle(t, kp, testsign.Statement(t, d, verify.CosignSignPredicate)))
			rec, err := verifyOne(t, testsign.Resolver(t), d, reg.Host()+"/acme/*=key:"+keyFile, "")
			if err != nil {
				t.Fatalf("Verify = %v", err)
			}
			if len(rec.Signers) != 1 || !strings.HasPrefix(rec.Signers[0].Identity, "key sha256:") || !strings.HasPrefix(rec.Signers[0].Bundle, "sha256:") {
				t.Errorf("Verify = %+v, want one key signer with a bundle digest", rec)
			}
		})
	}
}

func TestKeylessBundle(t *testing.T) {
	reg := testregistry.New(t)
	vs := testsign.NewVirtualSigstore(t)
	d := testsign.PushImage(t, reg, "acme/app", "1.0")
	const id, iss = "https://github.com/acme/app/.github/workflows/release.yaml@refs/heads/main", "https://token.actions.githubusercontent.com"
	testsign.Attach(t, d, vs.KeylessBundle(t, id, iss, testsign.Statement(t, d, verify.CosignSignPredicate), time.Now(), true, true))
	rec, err := verifyOne(t, testsign.Resolver(t), d, reg.Host()+"/acme/app=keyless:"+id+"@"+iss, vs.RootFile)
	if err != nil {
		t.Fatalf("Verify = %v", err)
	}
	if want := id + " (issuer " + iss + ")"; len(rec.Signers) != 1 || rec.Signers[0].Identity != want {
		t.Errorf("Verify = %+v, want signer %s", rec, want)
	}
	_ = errors.New
}
