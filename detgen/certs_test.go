package detgen

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"filippo.io/keygen"
	"github.com/Masterminds/sprig/v3"
)

// tlsChart issues a CA, a leaf it signs and a self-signed certificate.
var tlsChart = map[string]string{
	"c/templates/tls.yaml": `{{- $ca := genCA "demo-ca" 365 -}}
{{- $leaf := genSignedCert "demo.apps.svc" (list "10.1.2.3") (list "demo" "demo.apps.svc") 90 $ca -}}
{{- $self := genSelfSignedCert "self" nil (list "self.example") 30 -}}
ca: {{ $ca.Cert | b64enc }}
cakey: {{ $ca.Key | b64enc }}
leaf: {{ $leaf.Cert | b64enc }}
leafkey: {{ $leaf.Key | b64enc }}
self: {{ $self.Cert | b64enc }}
`,
}

func certOf(t *testing.T, b64 string) *x509.Certificate {
	t.Helper()
	p, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseCertPEM(string(p))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func unb64(t *testing.T, s string) string {
	t.Helper()
	p, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(p)
}

// TestCertificatesValidNow: each certificate is valid at the render's
// clock, for exactly the days asked, chains to its CA (crypto/x509), and is
// recorded with the dates it carries.
func TestCertificatesValidNow(t *testing.T) {
	t.Parallel()
	g := newTestGenerator()
	v := values(t, mustRender(t, g, tlsChart, nil))
	ca, leaf, self := certOf(t, v["ca"]), certOf(t, v["leaf"]), certOf(t, v["self"])
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testNow, DNSName: "demo.apps.svc"}); err != nil {
		t.Errorf("leaf does not verify against its CA: %v", err)
	}
	selfRoots := x509.NewCertPool()
	selfRoots.AddCert(self)
	if _, err := self.Verify(x509.VerifyOptions{Roots: selfRoots, CurrentTime: testNow, DNSName: "self.example"}); err != nil {
		t.Errorf("self-signed certificate does not verify: %v", err)
	}
	recs := g.Certificates()
	if len(recs) != 3 {
		t.Fatalf("Certificates() = %d records, want 3", len(recs))
	}
	for i, tc := range []struct {
		cert *x509.Certificate
		days int
		fn   string
	}{{ca, 365, "genCA"}, {leaf, 90, "genSignedCert"}, {self, 30, "genSelfSignedCert"}} {
		c, r := tc.cert, recs[i]
		if got := c.NotAfter.Sub(c.NotBefore); got != time.Duration(tc.days)*24*time.Hour {
			t.Errorf("%s: valid for %v, want %d days", c.Subject.CommonName, got, tc.days)
		}
		if testNow.Before(c.NotBefore) || !testNow.Before(r.ReissueAt) || !r.ReissueAt.Before(c.NotAfter) {
			t.Errorf("%s: want NotBefore %v <= now %v < ReissueAt %v < NotAfter %v", c.Subject.CommonName, c.NotBefore, testNow, r.ReissueAt, c.NotAfter)
		}
		if left := c.NotAfter.Sub(r.ReissueAt); left != time.Duration(tc.days)*8*time.Hour {
			t.Errorf("%s: re-issued %v before it expires, want a third of %d days", c.Subject.CommonName, left, tc.days)
		}
		if r.Function != tc.fn || r.CommonName != c.Subject.CommonName || !r.NotBefore.Equal(c.NotBefore) || !r.NotAfter.Equal(c.NotAfter) ||
			r.Serial != c.SerialNumber.Text(16) || r.Template != "c/templates/tls.yaml" || r.Line == 0 || r.IsCA != c.IsCA {
			t.Errorf("record %+v does not match certificate %s", r, c.Subject.CommonName)
		}
		if c.SerialNumber.Sign() <= 0 || len(c.SerialNumber.Bytes()) > 20 {
			t.Errorf("%s: serial %v is not positive or over 20 bytes", c.Subject.CommonName, c.SerialNumber)
		}
	}
}

// TestCertificatesOpenSSL: OpenSSL's own verifier accepts the chain.
func TestCertificatesOpenSSL(t *testing.T) {
	t.Parallel()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("the openssl CLI is needed for this test (add it to the CI image)")
	}
	v := values(t, mustRender(t, newTestGenerator(), tlsChart, nil))
	dir := t.TempDir()
	for name, key := range map[string]string{"ca.pem": "ca", "leaf.pem": "leaf", "self.pem": "self", "leaf.key": "leafkey"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(unb64(t, v[key])), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	at := fmt.Sprint(testNow.Unix())
	for _, args := range [][]string{
		{"verify", "-attime", at, "-purpose", "sslserver", "-CAfile", "ca.pem", "leaf.pem"},
		{"verify", "-attime", at, "-purpose", "sslclient", "-CAfile", "ca.pem", "leaf.pem"},
		{"verify", "-attime", at, "-CAfile", "self.pem", "self.pem"},
	} {
		cmd := exec.Command(openssl, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil || (args[0] == "verify" && !strings.Contains(string(out), ": OK")) {
			t.Errorf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// The key is the leaf certificate's.
	pub := func(args ...string) string {
		cmd := exec.Command(openssl, args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("openssl %v: %v", args, err)
		}
		return string(out)
	}
	if a, b := pub("x509", "-in", "leaf.pem", "-noout", "-pubkey"), pub("pkey", "-in", "leaf.key", "-pubout"); a != b {
		t.Errorf("leaf.key is not the leaf certificate's key")
	}
}

// TestCertificateReissue: until ReissueAt every render gives the same
// certificates; from it on a new CA certificate with the same key, which
// the old leaf still chains to, as the new leaf does to the old CA.
func TestCertificateReissue(t *testing.T) {
	t.Parallel()
	g := newTestGenerator()
	base := values(t, mustRender(t, g, tlsChart, nil))
	first := g.Certificates()[0].ReissueAt
	for _, c := range g.Certificates() {
		if c.ReissueAt.Before(first) {
			first = c.ReissueAt
		}
	}
	before := values(t, mustRender(t, New(testSeed, testRelease, fixedClock(first.Add(-time.Second))), tlsChart, nil))
	for k, v := range base {
		if before[k] != v {
			t.Errorf("just before the first ReissueAt %s changed", k)
		}
	}
	reissue := g.Certificates()[0].ReissueAt
	ga := New(testSeed, testRelease, fixedClock(reissue))
	after := values(t, mustRender(t, ga, tlsChart, nil))
	if after["ca"] == base["ca"] {
		t.Fatal("at ReissueAt the CA certificate is the same")
	}
	if after["cakey"] != base["cakey"] {
		t.Error("the re-issued CA has another key")
	}
	oldCA, newCA := certOf(t, base["ca"]), certOf(t, after["ca"])
	if !newCA.NotBefore.Equal(reissue) || oldCA.SerialNumber.Cmp(newCA.SerialNumber) == 0 {
		t.Errorf("new CA: NotBefore %v (want %v), serial %v (old %v)", newCA.NotBefore, reissue, newCA.SerialNumber, oldCA.SerialNumber)
	}
	if r := ga.Certificates()[0].ReissueAt; !r.After(reissue) {
		t.Errorf("next ReissueAt %v not after %v", r, reissue)
	}
	// Chaining is the signature, the issuer's name and its key id; the
	// validity windows of leaf and CA need not overlap.
	for _, tc := range []struct {
		desc     string
		leaf, ca string
	}{{"old leaf, new CA", base["leaf"], after["ca"]}, {"new leaf, old CA", after["leaf"], base["ca"]}} {
		leaf, ca := certOf(t, tc.leaf), certOf(t, tc.ca)
		if err := leaf.CheckSignatureFrom(ca); err != nil {
			t.Errorf("%s: %v", tc.desc, err)
		}
		if !bytes.Equal(leaf.RawIssuer, ca.RawSubject) || !bytes.Equal(leaf.AuthorityKeyId, ca.SubjectKeyId) {
			t.Errorf("%s: issuer or authority key id differ", tc.desc)
		}
	}
}

// TestValidityWindows: across a span of clocks, each certificate is valid
// at its clock and the window moves only at ReissueAt.
func TestValidityWindows(t *testing.T) {
	t.Parallel()
	g := newTestGenerator()
	for _, days := range []int{1, 2, 3, 30, 365, 3650} {
		c := &call{fn: "genCA", args: []byte(fmt.Sprint(days))}
		var last window
		for i := range 50 {
			now := testNow.Add(time.Duration(i) * (time.Duration(days) * 24 * time.Hour / 17))
			g.now = fixedClock(now)
			w, err := g.validity(c, days)
			if err != nil {
				t.Fatal(err)
			}
			if now.Before(w.notBefore) || !now.Before(w.reissueAt) || w.notAfter.Sub(w.notBefore) != time.Duration(days)*24*time.Hour {
				t.Fatalf("days %d at %v: window %+v", days, now, w)
			}
			if i > 0 && w != last && !w.notBefore.Equal(last.reissueAt) {
				t.Errorf("days %d: window moved to %v, not at the last ReissueAt %v", days, w.notBefore, last.reissueAt)
			}
			last = w
		}
	}
	g.now = fixedClock(testNow)
	for _, days := range []int{0, -1, maxDays + 1} {
		if _, err := g.validity(&call{}, days); err == nil {
			t.Errorf("validity(%d days) = nil error", days)
		}
	}
	// Windows of two calls are offset, not aligned.
	a, _ := g.validity(&call{fn: "genCA", identity: []byte("a")}, 365)
	b, _ := g.validity(&call{fn: "genCA", identity: []byte("b")}, 365)
	if a.notBefore.Equal(b.notBefore) {
		t.Error("two calls' windows start together")
	}
}

// TestCertificatesMatchSprig: our certificates have the fields, extensions,
// key types and PEM blocks sprig's have for the same arguments.
func TestCertificatesMatchSprig(t *testing.T) {
	t.Parallel()
	const tmpl = `{{- $ca := genCA "ca" 30 -}}
{{- $leaf := genSignedCert "leaf" (list "10.0.0.1") (list "leaf.example") 20 $ca -}}
{{- $self := genSelfSignedCert "self" (list "::1") (list "self.example") 10 -}}
{{ $ca.Cert }}{{ $ca.Key }}{{ $leaf.Cert }}{{ $leaf.Key }}{{ $self.Cert }}{{ $self.Key }}`
	exec := func(f template.FuncMap) []*pem.Block {
		tm := template.Must(template.New("x").Funcs(f).Parse(tmpl))
		var b bytes.Buffer
		if err := tm.Execute(&b, nil); err != nil {
			t.Fatal(err)
		}
		var blocks []*pem.Block
		rest := b.Bytes()
		for {
			var blk *pem.Block
			blk, rest = pem.Decode(rest)
			if blk == nil {
				return blocks
			}
			blocks = append(blocks, blk)
		}
	}
	theirs := exec(sprig.TxtFuncMap())
	f := sprig.TxtFuncMap()
	for k, v := range newTestGenerator().Funcs() {
		f[k] = v
	}
	ours := exec(f)
	if len(ours) != 6 || len(theirs) != 6 {
		t.Fatalf("blocks: ours %d, sprig's %d", len(ours), len(theirs))
	}
	for i := range ours {
		if ours[i].Type != theirs[i].Type {
			t.Errorf("block %d: type %q, sprig's %q", i, ours[i].Type, theirs[i].Type)
		}
		if ours[i].Type != "CERTIFICATE" {
			continue
		}
		a, _ := x509.ParseCertificate(ours[i].Bytes)
		b, _ := x509.ParseCertificate(theirs[i].Bytes)
		exts := func(c *x509.Certificate) (ids []string) {
			for _, e := range c.Extensions {
				ids = append(ids, fmt.Sprint(e.Id, e.Critical))
			}
			return ids
		}
		type view struct {
			Subject, Issuer  string
			DNS              []string
			IPs              string
			KeyUsage         x509.KeyUsage
			ExtKeyUsage      []x509.ExtKeyUsage
			IsCA, BasicValid bool
			MaxPathLen       int
			PubAlg           x509.PublicKeyAlgorithm
			SigAlg           x509.SignatureAlgorithm
			Bits             int
			Validity         time.Duration
			Extensions       []string
			Version          int
			HasSKI, HasAKI   bool
		}
		see := func(c *x509.Certificate) view {
			return view{c.Subject.String(), c.Issuer.String(), c.DNSNames, fmt.Sprint(c.IPAddresses), c.KeyUsage, c.ExtKeyUsage,
				c.IsCA, c.BasicConstraintsValid, c.MaxPathLen, c.PublicKeyAlgorithm, c.SignatureAlgorithm,
				c.PublicKey.(*rsa.PublicKey).N.BitLen(), c.NotAfter.Sub(c.NotBefore).Round(time.Hour), exts(c), c.Version,
				len(c.SubjectKeyId) > 0, len(c.AuthorityKeyId) > 0}
		}
		if va, vb := see(a), see(b); fmt.Sprintf("%+v", va) != fmt.Sprintf("%+v", vb) {
			t.Errorf("certificate %d:\nours   %+v\nsprig's %+v", i, va, vb)
		}
	}
}

// TestGenPrivateKeyMatchesSprig: each key type in sprig's PEM block type
// and key parameters; sprig's parser and ours read it back.
func TestGenPrivateKeyMatchesSprig(t *testing.T) {
	t.Parallel()
	g := newTestGenerator()
	f := sprig.TxtFuncMap()
	for _, tc := range []struct {
		typ, block string
		check      func(crypto.PrivateKey) bool
	}{
		// "rsa" itself is in the golden file; "" is sprig's name for it.
		{"", "RSA PRIVATE KEY", func(k crypto.PrivateKey) bool {
			r, ok := k.(*rsa.PrivateKey)
			return ok && r.N.BitLen() == 4096 && r.E == 65537
		}},
		{"ecdsa", "EC PRIVATE KEY", func(k crypto.PrivateKey) bool {
			e, ok := k.(*ecdsa.PrivateKey)
			return ok && e.Curve == elliptic.P256()
		}},
		{"ed25519", "PRIVATE KEY", func(k crypto.PrivateKey) bool { _, ok := k.(ed25519.PrivateKey); return ok }},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			out := g.genPrivateKey(&call{fn: "genPrivateKey", args: []byte(tc.typ)}, tc.typ)
			blk, _ := pem.Decode([]byte(out))
			if blk == nil || blk.Type != tc.block {
				t.Fatalf("genPrivateKey(%q) = %.60q, want a %s block", tc.typ, out, tc.block)
			}
			k, err := parseKeyPEM(out)
			if err != nil || !tc.check(k) {
				t.Fatalf("genPrivateKey(%q): parsed %T, %v", tc.typ, k, err)
			}
			if tc.typ == "ecdsa" || tc.typ == "ed25519" {
				theirs := f["genPrivateKey"].(func(string) string)(tc.typ)
				if tb, _ := pem.Decode([]byte(theirs)); tb == nil || tb.Type != blk.Type {
					t.Errorf("sprig's block for %q differs", tc.typ)
				}
			}
			// sprig reads our key (genSelfSignedCertWithKey parses it).
			tm := template.Must(template.New("k").Funcs(f).Parse(`{{ (genSelfSignedCertWithKey "x" nil nil 1 .).Cert }}`))
			if err := tm.Execute(&bytes.Buffer{}, out); err != nil {
				t.Errorf("sprig cannot use our %q key: %v", tc.typ, err)
			}
		})
	}
	if got := g.genPrivateKey(&call{}, "rsa3"); got != "Unknown type rsa3" {
		t.Errorf(`genPrivateKey("rsa3") = %q, want sprig's message`, got)
	}
}

// TestSignaturesDeterministic: x509.CreateCertificate with a nil rand signs
// deterministically for RSA (PKCS #1 v1.5), ECDSA (RFC 6979 in Go 1.26) and
// Ed25519: two renders give the same certificate, and it verifies.
func TestSignaturesDeterministic(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"ecdsa", "ed25519", "rsa-2048"} {
		t.Run(typ, func(t *testing.T) {
			var key crypto.PrivateKey
			var err error
			if typ == "rsa-2048" {
				key, err = keygen.RSA(2048, bytes.Repeat([]byte{9}, 32))
			} else {
				key, err = newTestGenerator().deriveKey(&call{fn: "t"}, typ, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			blk, err := keyPEM(key)
			if err != nil {
				t.Fatal(err)
			}
			files := map[string]string{"c/templates/a.yaml": `{{ (genSelfSignedCertWithKey "x" nil nil 10 .Values.k).Cert }}`}
			vals := map[string]any{"k": string(pem.EncodeToMemory(blk))}
			a := mustRender(t, newTestGenerator(), files, vals)["c/templates/a.yaml"]
			b := mustRender(t, newTestGenerator(), files, vals)["c/templates/a.yaml"]
			if a != b {
				t.Fatal("two signatures of the same certificate differ")
			}
			c, err := parseCertPEM(a)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature); err != nil {
				t.Errorf("signature does not verify: %v", err)
			}
		})
	}
}

// TestDSAReaderOnly: crypto/dsa in Go 1.26 reads only the reader it is
// given (Go's ECDSA and RSA GenerateKey ignore it, hence det-keygen for
// those), so genPrivateKey "dsa" from one call is one key, in sprig's block,
// which sprig's parser reads.
func TestDSAReaderOnly(t *testing.T) {
	t.Parallel()
	c := &call{fn: "genPrivateKey", args: []byte("dsa")}
	a := newTestGenerator().genPrivateKey(c, "dsa")
	b := newTestGenerator().genPrivateKey(c, "dsa")
	if a != b {
		t.Fatalf("two DSA keys from one call differ: %.80q, %.80q", a, b)
	}
	if blk, _ := pem.Decode([]byte(a)); blk == nil || blk.Type != "DSA PRIVATE KEY" {
		t.Fatalf("genPrivateKey(dsa) = %.80q, want a DSA PRIVATE KEY block", a)
	}
	k, err := parseKeyPEM(a)
	if err != nil || fmt.Sprintf("%T", k) != "*dsa.PrivateKey" {
		t.Fatalf("parsing our DSA key: %T, %v", k, err)
	}
	// sprig's parser reads it (its error for a DSA key is the signing one).
	tm := template.Must(template.New("k").Funcs(sprig.TxtFuncMap()).Parse(`{{ genCAWithKey "x" 1 . }}`))
	if err := tm.Execute(&bytes.Buffer{}, a); err == nil || strings.Contains(err.Error(), "parsing") {
		t.Errorf("sprig with our DSA key: %v, want a signing error, not a parse error", err)
	}
}

// TestDetKeygenVectors: filippo.io/keygen, which makes the RSA and ECDSA
// keys, gives c2sp.org/det-keygen's published test vectors (the first
// P-256 and 2048-bit vectors of the specification, compared by SHA-256 of
// the PKCS #8 key).
func TestDetKeygenVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, seed, pkcs8SHA256 string
		gen                     func([]byte) (crypto.PrivateKey, error)
	}{
		{"P-256", detKeygenP256Seed, detKeygenP256PKCS8, func(s []byte) (crypto.PrivateKey, error) { return keygen.ECDSA(elliptic.P256(), s) }},
		{"RSA 2048", detKeygenRSASeed, detKeygenRSAPKCS8, func(s []byte) (crypto.PrivateKey, error) { return keygen.RSA(2048, s) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			seed, err := base64.StdEncoding.DecodeString(tc.seed)
			if err != nil {
				t.Fatal(err)
			}
			k, err := tc.gen(seed)
			if err != nil {
				t.Fatal(err)
			}
			der, err := x509.MarshalPKCS8PrivateKey(k)
			if err != nil {
				t.Fatal(err)
			}
			if got := sha256hex(der); got != tc.pkcs8SHA256 {
				t.Errorf("key of the vector's seed: PKCS #8 SHA-256 %s, want %s", got, tc.pkcs8SHA256)
			}
		})
	}
}

// TestCertificateErrors: bad arguments are errors with sprig's messages
// where sprig has one.
func TestCertificateErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, want string }{
		{`{{ genCA "x" 0 }}`, "must be at least 1"},
		{`{{ genSelfSignedCert "x" (list "not-an-ip") nil 3 }}`, "error parsing ip: not-an-ip"},
		{`{{ genSelfSignedCert "x" (list 3) nil 3 }}`, "is not a string"},
		{`{{ genSelfSignedCert "x" nil (list 3) 3 }}`, "error processing alternate dns name"},
		{`{{ genCAWithKey "x" 3 "junk" }}`, "no PEM data in input"},
		{`{{ buildCustomCert "!!" "eA==" }}`, "unable to decode base64 certificate"},
		{`{{ genSignedCert "x" nil nil 3 (dict) }}`, "wrong type"},
	} {
		_, err := render(newTestGenerator(), map[string]string{"c/templates/a.yaml": tc.src}, nil, true)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.src, err, tc.want)
		}
	}
	// buildCustomCert's result signs with genSignedCert.
	v := values(t, mustRender(t, newTestGenerator(), map[string]string{"c/templates/a.yaml": `{{ $ca := genCAWithKey "ca" 10 (genPrivateKey "ecdsa") -}}
{{ $c := buildCustomCert ($ca.Cert | b64enc) ($ca.Key | b64enc) -}}
leaf: {{ (genSignedCert "leaf" nil nil 5 $c).Cert | b64enc }}
ca: {{ $ca.Cert | b64enc }}`}, nil))
	roots := x509.NewCertPool()
	roots.AddCert(certOf(t, v["ca"]))
	if _, err := certOf(t, v["leaf"]).Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testNow}); err != nil {
		t.Errorf("leaf signed by buildCustomCert's CA: %v", err)
	}
}
