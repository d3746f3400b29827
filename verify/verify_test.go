package verify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	t.Parallel()
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

// TestBundleAsArtifact: a bundle attached as cosign v3 attaches it (an
// artifact manifest with an empty config), which go-containerregistry's
// registry lists with the config's media type as artifactType, verifies;
// a referrer listed so without a bundle layer (another kind of artifact)
// is passed over, not a failed signature.
func TestBundleAsArtifact(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	d := testsign.PushImage(t, reg, "acme/app", "1.0")
	kp, keyFile := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	other := testsign.PushImage(t, reg, "acme/app", "2.0")
	testsign.AttachArtifact(t, other, testsign.BundleMediaType, testsign.KeyBundle(t, kp, testsign.Statement(t, other, verify.CosignSignPredicate)))
	_, err := verifyOne(t, testsign.Resolver(t), other, reg.Host()+"/acme/*=key:"+keyFile, "")
	if err != nil {
		t.Fatalf("Verify(artifact bundle) = %v", err)
	}

	// An artifact of another kind (an SBOM), listed with the same
	// artifactType: read and passed over.
	testsign.AttachArtifact(t, d, "application/spdx+json", []byte("{}"))
	_, err = verifyOne(t, testsign.Resolver(t), d, reg.Host()+"/acme/*=key:"+keyFile, "")
	if err == nil || !strings.Contains(err.Error(), ": no signature (none among the referrers") {
		t.Errorf("Verify(another kind of artifact) = %v, want no signature", err)
	}
}

func TestKeylessBundle(t *testing.T) {
	t.Parallel()
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

// TestFailureReasons: every way a digest can fail its policy, each with
// real signatures in a loopback registry, and the reason the one-line
// error gives.
func TestFailureReasons(t *testing.T) {
	t.Parallel()
	const id, iss = "https://github.com/acme/app/.github/workflows/release.yaml@refs/heads/main", "https://token.actions.githubusercontent.com"
	vs := testsign.NewVirtualSigstore(t)
	kp, keyFile := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	_, otherKey := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	signed := func(d name.Digest) []byte {
		return testsign.KeyBundle(t, kp, testsign.Statement(t, d, verify.CosignSignPredicate))
	}
	for _, tc := range []struct {
		desc string
		// sign attaches whatever the case needs to d (another is a
		// second image of the repository).
		sign   func(t *testing.T, d, another name.Digest)
		policy string // after "REPO="; KEY and OTHER stand for key files
		want   string
		// noAPI makes the registry one without the referrers API: the
		// referrers tag schema's index is read.
		noAPI bool
	}{
		{desc: "unsigned", sign: func(*testing.T, name.Digest, name.Digest) {}, policy: "key:KEY", want: "no signature"},
		{desc: "another key", sign: func(t *testing.T, d, _ name.Digest) { testsign.Attach(t, d, signed(d)) }, policy: "key:OTHER", want: "wrong key"},
		{desc: "signature of another digest", sign: func(t *testing.T, d, another name.Digest) {
			// A bundle for another artifact, attached to d.
			testsign.Attach(t, d, signed(another))
		}, policy: "key:KEY", want: "another artifact"},
		{desc: "referrer of another digest", sign: func(t *testing.T, d, another name.Digest) {
			// The registry lists, among d's referrers, one whose subject
			// is another image: its bundle is for the other one.
			ref := testsign.Attach(t, another, signed(another))
			testsign.ListReferrer(t, d, ref)
		}, policy: "key:KEY", want: "a referrer of another digest", noAPI: true},
		{desc: "attestation, not signature", sign: func(t *testing.T, d, _ name.Digest) {
			testsign.Attach(t, d, testsign.KeyBundle(t, kp, testsign.Statement(t, d, "https://slsa.dev/provenance/v1")))
		}, policy: "key:KEY", want: "an attestation (https://slsa.dev/provenance/v1), not a signature"},
		{desc: "tampered bundle", sign: func(t *testing.T, d, _ name.Digest) {
			b := signed(d)
			// Another payload under the same signature: the statement
			// about d, with its predicate changed.
			testsign.Attach(t, d, testsign.Tamper(t, b))
		}, policy: "key:KEY", want: "wrong key: the signature does not verify"},
		{desc: "huge bundle", sign: func(t *testing.T, d, _ name.Digest) {
			testsign.Attach(t, d, append(signed(d), make([]byte, verify.MaxBundleSize)...))
		}, policy: "key:KEY", want: "more than"},
		{desc: "keyless, wrong identity", sign: func(t *testing.T, d, _ name.Digest) {
			testsign.Attach(t, d, vs.KeylessBundle(t, "https://github.com/evil/app/.github/workflows/x.yaml@refs/heads/main", iss, testsign.Statement(t, d, verify.CosignSignPredicate), time.Now(), true, true))
		}, policy: "keyless:" + id + "@" + iss, want: "wrong identity: signed by https://github.com/evil/app"},
		{desc: "keyless, wrong issuer", sign: func(t *testing.T, d, _ name.Digest) {
			testsign.Attach(t, d, vs.KeylessBundle(t, id, "https://accounts.example", testsign.Statement(t, d, verify.CosignSignPredicate), time.Now(), true, true))
		}, policy: "keyless:" + id + "@" + iss, want: "wrong identity"},
		{desc: "keyless, regexp does not match the whole identity", sign: func(t *testing.T, d, _ name.Digest) {
			testsign.Attach(t, d, vs.KeylessBundle(t, "https://evil.example/https://github.com/acme/x", iss, testsign.Statement(t, d, verify.CosignSignPredicate), time.Now(), true, true))
		}, policy: `keyless:/https://github\.com/acme/.*/@` + iss, want: "wrong identity"},
		{desc: "keyless, no tlog entry", sign: func(t *testing.T, d, _ name.Digest) {
			testsign.Attach(t, d, vs.KeylessBundle(t, id, iss, testsign.Statement(t, d, verify.CosignSignPredicate), time.Now(), false, true))
		}, policy: "keyless:" + id + "@" + iss, want: "transparency log entry missing"},
		{desc: "keyless, expired, without a timestamp", sign: func(t *testing.T, d, _ name.Digest) {
			// Logged half an hour after the certificate (valid for minutes)
			// was issued.
			testsign.Attach(t, d, vs.KeylessBundle(t, id, iss, testsign.Statement(t, d, verify.CosignSignPredicate), time.Now().Add(30*time.Minute), true, false))
		}, policy: "keyless:" + id + "@" + iss, want: "expired"},
		{desc: "keyless policy, key bundle", sign: func(t *testing.T, d, _ name.Digest) { testsign.Attach(t, d, signed(d)) }, policy: "keyless:" + id + "@" + iss, want: "not verified"},
		{desc: "key policy, keyless bundle", sign: func(t *testing.T, d, _ name.Digest) {
			testsign.Attach(t, d, vs.KeylessBundle(t, id, iss, testsign.Statement(t, d, verify.CosignSignPredicate), time.Now(), true, true))
		}, policy: "key:KEY", want: "signed with a certificate"},
		{desc: "and: one term missing", sign: func(t *testing.T, d, _ name.Digest) { testsign.Attach(t, d, signed(d)) }, policy: "key:KEY and keyless:" + id + "@" + iss, want: "keyless:" + id + "@" + iss + ": "},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			reg := testregistry.New(t)
			if tc.noAPI {
				reg.NoReferrersAPI()
			}
			d := testsign.PushImage(t, reg, "acme/app", "1")
			another := testsign.PushImage(t, reg, "acme/app", "2")
			tc.sign(t, d, another)
			pol := strings.NewReplacer("KEY", keyFile, "OTHER", otherKey).Replace(tc.policy)
			_, err := verifyOne(t, testsign.Resolver(t), d, reg.Host()+"/acme/app="+pol, vs.RootFile)
			var ve *verify.Error
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify = %v, want a *verify.Error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), d.DigestStr()) {
				t.Errorf("Verify = %q, want one line naming %s", err, d.DigestStr())
			}
		})
	}
}

// TestAnyOfAll: " or " holds with one term, " and " needs every one.
func TestAnyOfAll(t *testing.T) {
	t.Parallel()
	const id, iss = "ci@acme.example", "https://accounts.acme.example"
	vs := testsign.NewVirtualSigstore(t)
	reg := testregistry.New(t)
	d := testsign.PushImage(t, reg, "acme/app", "1")
	kp, keyFile := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ED25519)
	_, otherKey := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ED25519)
	testsign.Attach(t, d, testsign.KeyBundle(t, kp, testsign.Statement(t, d, verify.CosignSignPredicate)))
	testsign.Attach(t, d, vs.KeylessBundle(t, id, iss, testsign.Statement(t, d, verify.CosignSignPredicate), time.Now(), true, true))
	for _, tc := range []struct {
		policy  string
		signers int
		fails   bool
	}{
		{policy: "key:OTHER or key:KEY", signers: 1},
		{policy: "key:KEY and keyless:" + id + "@" + iss, signers: 2},
		{policy: "key:OTHER and keyless:" + id + "@" + iss, fails: true},
		{policy: "keyless:/.*@acme\\.example/@" + iss, signers: 1},
	} {
		pol := strings.NewReplacer("OTHER", otherKey, "KEY", keyFile).Replace(tc.policy)
		rec, err := verifyOne(t, testsign.Resolver(t), d, reg.Host()+"/acme/**="+pol, vs.RootFile)
		switch {
		case tc.fails && err == nil:
			t.Errorf("Verify(%s) = %+v, want an error", tc.policy, rec)
		case !tc.fails && (err != nil || len(rec.Signers) != tc.signers):
			t.Errorf("Verify(%s) = %+v, %v, want %d signers", tc.policy, rec, err, tc.signers)
		}
	}
}

// TestLegacySignature: cosign's legacy .sig tag, read only when no
// referrer holds, verified with the key; one of another digest fails.
func TestLegacySignature(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	d := testsign.PushImage(t, reg, "acme/app", "1")
	other := testsign.PushImage(t, reg, "acme/app", "2")
	signer, keyFile := testsign.NewSigner(t)
	testsign.AttachLegacy(t, d, d.DigestStr(), signer)
	testsign.AttachLegacy(t, other, d.DigestStr(), signer)
	spec := reg.Host() + "/acme/app=key:" + keyFile
	rec, err := verifyOne(t, testsign.Resolver(t), d, spec, "")
	if err != nil || len(rec.Signers) != 1 {
		t.Fatalf("Verify(legacy) = %+v, %v, want one signer", rec, err)
	}
	if _, err := verifyOne(t, testsign.Resolver(t), other, spec, ""); err == nil || !strings.Contains(err.Error(), "a signature of another digest") {
		t.Errorf("Verify(legacy of another digest) = %v, want a signature of another digest", err)
	}
}

// TestHostileReferrerList: a registry that lists endless referrers is
// read to MaxCandidates bundles, each request bounded, and the error says
// the rest were not read.
func TestHostileReferrerList(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	d := testsign.PushImage(t, reg, "acme/app", "1")
	_, keyFile := testsign.NewKey(t, protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256)
	var descs []string
	for i := range 5000 {
		descs = append(descs, fmt.Sprintf(`{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"%s","digest":"sha256:%064x","size":500}`, testsign.BundleMediaType, i))
	}
	body := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[` + strings.Join(descs, ",") + `]}`
	reg.Handle(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/referrers/") {
			return false
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
		// A next page, forever: never followed.
		w.Header().Set("Link", `<`+r.URL.Path+`?n=1>; rel="next"`)
		_, _ = io.WriteString(w, body)
		return true
	})
	reg.ResetCounts()
	_, err := verifyOne(t, testsign.Resolver(t), d, reg.Host()+"/acme/app=key:"+keyFile, "")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d bundles", verify.MaxCandidates)) {
		t.Errorf("Verify(endless referrers) = %v, want the rest unread", err)
	}
	if got := reg.Count("GET referrers"); got != 1 {
		t.Errorf("referrers requests = %d, want 1 (no next page)", got)
	}
	if got := reg.Manifests(); got > verify.MaxCandidates+1 {
		t.Errorf("manifest requests = %d, want at most %d", got, verify.MaxCandidates+1)
	}
}

// TestLegacyKeyless: a legacy signature with a Fulcio certificate, its
// Rekor bundle (a signed entry timestamp) and an RFC 3161 timestamp, from
// the virtual Sigstore; another identity fails, and so does the same
// signature without its Rekor bundle.
func TestLegacyKeyless(t *testing.T) {
	t.Parallel()
	const id, iss = "ci@acme.example", "https://accounts.acme.example"
	vs := testsign.NewVirtualSigstore(t)
	reg := testregistry.New(t)
	d := testsign.PushImage(t, reg, "acme/app", "1")
	ann := vs.LegacyKeyless(t, id, iss, testsign.LegacyPayload(t, d, d.DigestStr()))
	testsign.AttachLegacyLayer(t, d, testsign.LegacyPayload(t, d, d.DigestStr()), ann)
	rec, err := verifyOne(t, testsign.Resolver(t), d, reg.Host()+"/acme/app=keyless:"+id+"@"+iss, vs.RootFile)
	if err != nil || len(rec.Signers) != 1 || rec.Signers[0].Identity != id+" (issuer "+iss+")" {
		t.Fatalf("Verify(legacy keyless) = %+v, %v", rec, err)
	}
	if _, err := verifyOne(t, testsign.Resolver(t), d, reg.Host()+"/acme/app=keyless:other@acme.example@"+iss, vs.RootFile); err == nil || !strings.Contains(err.Error(), "wrong identity") {
		t.Errorf("Verify(legacy keyless, another identity) = %v, want wrong identity", err)
	}
	d2 := testsign.PushImage(t, reg, "acme/app", "2")
	ann = vs.LegacyKeyless(t, id, iss, testsign.LegacyPayload(t, d2, d2.DigestStr()))
	delete(ann, "dev.sigstore.cosign/bundle")
	testsign.AttachLegacyLayer(t, d2, testsign.LegacyPayload(t, d2, d2.DigestStr()), ann)
	if _, err := verifyOne(t, testsign.Resolver(t), d2, reg.Host()+"/acme/app=keyless:"+id+"@"+iss, vs.RootFile); err == nil || !strings.Contains(err.Error(), "transparency log entry missing") {
		t.Errorf("Verify(legacy keyless without its Rekor bundle) = %v, want the log entry missing", err)
	}
}
