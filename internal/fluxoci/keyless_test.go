package fluxoci

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/internal/testsign"
)

// TestTokenIdentity: whom a token names is its verified email, else its
// subject, as Fulcio's certificate names it; its expiry is read.
func TestTokenIdentity(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tok := func(claims string) string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"ES256"}`)) + "." + enc([]byte(claims)) + ".c2ln"
	}
	for _, tc := range []struct {
		desc, claims, subject, err string
	}{
		{desc: "verified email", claims: `{"iss":"https://i","sub":"123","email":"ci@shop.example","email_verified":true}`, subject: "ci@shop.example"},
		{desc: "verified email as a string", claims: `{"iss":"https://i","sub":"123","email":"ci@shop.example","email_verified":"true"}`, subject: "ci@shop.example"},
		{desc: "unverified email", claims: `{"iss":"https://i","sub":"123","email":"ci@shop.example","email_verified":false}`, subject: "123"},
		{desc: "workflow subject", claims: `{"iss":"https://i","sub":"repo:shop/fleet:ref:refs/heads/main","exp":1800000060}`, subject: "repo:shop/fleet:ref:refs/heads/main"},
		{desc: "expired", claims: `{"iss":"https://i","sub":"1","exp":1800000000}`, err: "the identity token from https://i expired at 2027-01-15T08:00:00Z"},
		{desc: "no issuer", claims: `{"sub":"1"}`, err: "the identity token names no issuer (iss)"},
		{desc: "claims not JSON", claims: `sub`, err: "the identity token's claims are not JSON: invalid character 's' looking for beginning of value"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			id, err := TokenIdentity(tok(tc.claims), now)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("TokenIdentity = %+v, %v; want error %q", id, err, tc.err)
				}
				return
			}
			if err != nil || id.Subject != tc.subject || id.Issuer != "https://i" {
				t.Fatalf("TokenIdentity = %+v, %v; want subject %q", id, err, tc.subject)
			}
		})
	}
	if _, err := TokenIdentity("a.b", now); err == nil {
		t.Error("TokenIdentity of two parts: no error")
	}
}

// TestStatement: the statement names the digest alone, with cosign
// sign's predicate type and an empty predicate, as cosign v3 signs it.
func TestStatement(t *testing.T) {
	d, err := name.NewDigest("registry.example/shop/manifests@sha256:" + "ab" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Statement(d)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"_type":"https://in-toto.io/Statement/v1","predicate":{},"predicateType":"https://sigstore.dev/cosign/sign/v1","subject":[{"digest":{"sha256":"ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"}}]}`
	if string(b) != want {
		t.Errorf("Statement =\n%s\nwant\n%s", b, want)
	}
}

// TestSigned: a digest is signed keylessly when a referrer is a bundle of
// cosign sign's statement (another referrer is not), and with a key when
// its .sig tag is there; Attach's and Sign's own pushes are what Signed
// finds.
func TestSigned(t *testing.T) {
	reg := testregistry.New(t)
	d, err := name.NewDigest(reg.Ref("shop/manifests") + "@" + reg.PushImage(t, "shop/manifests:prod").String())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	signed := func(keyless bool) bool {
		t.Helper()
		ok, err := Signed(ctx, d, keyless)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if signed(true) || signed(false) {
		t.Fatal("a digest without signatures: Signed")
	}
	testsign.AttachArtifact(t, d, "application/vnd.example.sbom+json", []byte(`{}`))
	if signed(true) {
		t.Error("a referrer that is no bundle: Signed")
	}
	if err := Attach(ctx, d, []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`)); err != nil {
		t.Fatal(err)
	}
	if !signed(true) {
		t.Error("a bundle attached: not Signed keylessly")
	}
	if signed(false) {
		t.Error("a bundle attached: Signed with a key")
	}
	s, _ := testsign.NewSigner(t)
	if err := Sign(ctx, d, s); err != nil {
		t.Fatal(err)
	}
	if !signed(false) {
		t.Error("a .sig pushed: not Signed with a key")
	}
}
