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

// TestCheckToken: a token is refused when it is no JWT, names no issuer
// or has expired; its signature is Fulcio's to check.
func TestCheckToken(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tok := func(claims string) string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"ES256"}`)) + "." + enc([]byte(claims)) + ".c2ln"
	}
	for _, tc := range []struct {
		desc, token, err string
	}{
		{desc: "valid", token: tok(`{"iss":"https://i","sub":"repo:shop/fleet:ref:refs/heads/main","exp":1800000060}`)},
		{desc: "no expiry", token: tok(`{"iss":"https://i","sub":"1"}`)},
		{desc: "expired", token: tok(`{"iss":"https://i","sub":"1","exp":1800000000}`), err: "the identity token from https://i expired at 2027-01-15T08:00:00Z"},
		{desc: "no issuer", token: tok(`{"sub":"1"}`), err: "the identity token names no issuer (iss)"},
		{desc: "claims not JSON", token: tok(`sub`), err: "the identity token's claims are not JSON: invalid character 's' looking for beginning of value"},
		{desc: "two parts", token: "a.b", err: "the identity token is no JWT (three base64url parts joined by dots)"},
		{desc: "claims not base64url", token: "a.!!.c", err: "the identity token's claims are not base64url: illegal base64 data at input byte 0"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := CheckToken(tc.token, now)
			if (tc.err == "" && err != nil) || (tc.err != "" && (err == nil || err.Error() != tc.err)) {
				t.Fatalf("CheckToken = %v, want %q", err, tc.err)
			}
		})
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
