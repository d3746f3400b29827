package detgen

import (
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"time"
)

// CertAndKey is the value the certificate functions return to a template,
// sprig's certificate: .Cert and .Key, both PEM. genSignedCert takes one as
// its CA.
type CertAndKey struct {
	Cert string
	Key  string
}

// maxDays bounds a certificate's validity: beyond it the window arithmetic
// would leave the years X.509 can encode.
const maxDays = 100_000

const secondsPerDay = 24 * 60 * 60

// window is a certificate's validity: issued at the start of the current
// re-issue window, valid for exactly the days asked.
type window struct {
	notBefore, notAfter, reissueAt time.Time
}

// validity places a certificate of days at now. Windows are 2/3 of the
// validity long, aligned to the Unix epoch plus an offset derived from the
// call (so a chart's certificates do not all roll over at once): the
// certificate is issued at the current window's start and re-issued at the
// next one's, while at least a third of its validity is left.
func (g *Generator) validity(c *call, days int) (window, error) {
	if days <= 0 {
		return window{}, fmt.Errorf("validity of %d days: must be at least 1", days)
	}
	if days > maxDays {
		return window{}, fmt.Errorf("validity of %d days: must be at most %d", days, maxDays)
	}
	length := int64(days) * secondsPerDay
	w := length / 3 * 2                                                                 // exact: a day's seconds divide by 3
	offset := int64(binary.BigEndian.Uint64(g.derive(c, purposeOffset, 8)) % uint64(w)) //nolint:gosec // below w, which is an int64
	now := g.now().Unix()
	// start = the largest offset + k·w not after now (floor division).
	k := (now - offset) / w
	if (now-offset)%w < 0 {
		k--
	}
	start := offset + k*w
	return window{
		notBefore: time.Unix(start, 0).UTC(),
		notAfter:  time.Unix(start+length, 0).UTC(),
		reissueAt: time.Unix(start+w, 0).UTC(),
	}, nil
}

// ipsAndNames converts sprig's []interface{} IP and DNS lists, with sprig's
// messages.
func ipsAndNames(ips, names []any) ([]net.IP, []string, error) {
	outIPs := make([]net.IP, len(ips))
	for i, v := range ips {
		s, ok := v.(string)
		if !ok {
			return nil, nil, fmt.Errorf("error parsing ip: %v is not a string", v)
		}
		if outIPs[i] = net.ParseIP(s); outIPs[i] == nil {
			return nil, nil, fmt.Errorf("error parsing ip: %s", s)
		}
	}
	outNames := make([]string, len(names))
	for i, v := range names {
		s, ok := v.(string)
		if !ok {
			return nil, nil, fmt.Errorf("error processing alternate dns name: %v is not a string", v)
		}
		outNames[i] = s
	}
	return outIPs, outNames, nil
}

// issue creates the certificate of call c: sprig's template (subject CN,
// the IPs and DNS names, digital signature and key encipherment, server and
// client auth, basic constraints; a CA also signs certificates) with a
// derived serial and the current window's validity, for key signed by
// signer (parent nil: self-signed).
func (g *Generator) issue(c *call, cn string, ips, names []any, days int, isCA bool, key crypto.PrivateKey, parent *x509.Certificate, signer crypto.PrivateKey) (CertAndKey, error) {
	netIPs, dnsNames, err := ipsAndNames(ips, names)
	if err != nil {
		return CertAndKey{}, err
	}
	win, err := g.validity(c, days)
	if err != nil {
		return CertAndKey{}, err
	}
	tmpl := &x509.Certificate{
		// A new window is a new certificate: the serial depends on it.
		SerialNumber:          serial(g.derive(c, purposeSerial, 16, binary.AppendVarint(nil, win.notBefore.Unix()))),
		Subject:               pkix.Name{CommonName: cn},
		IPAddresses:           netIPs,
		DNSNames:              dnsNames,
		NotBefore:             win.notBefore,
		NotAfter:              win.notAfter,
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	if isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.IsCA = true
	}
	if parent == nil {
		parent, signer = tmpl, key
	}
	pub, err := publicKey(key)
	if err != nil {
		return CertAndKey{}, fmt.Errorf("error retrieving public key from signee key: %w", err)
	}
	// A nil rand: RSA PKCS #1 v1.5 and Ed25519 signatures are
	// deterministic, and Go signs ECDSA by RFC 6979 when rand is nil
	// (TestSignaturesDeterministic checks all three).
	der, err := x509.CreateCertificate(nil, tmpl, parent, pub, signer)
	if err != nil {
		return CertAndKey{}, fmt.Errorf("error creating certificate: %w", err)
	}
	kb, err := keyPEM(key)
	if err != nil {
		return CertAndKey{}, fmt.Errorf("error pem-encoding key: %w", err)
	}
	g.issued(c, Certificate{
		CommonName: cn, IsCA: isCA, Serial: tmpl.SerialNumber.Text(16),
		NotBefore: win.notBefore, NotAfter: win.notAfter, ReissueAt: win.reissueAt,
	})
	return CertAndKey{
		Cert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		Key:  string(pem.EncodeToMemory(kb)),
	}, nil
}

// certKey derives the RSA 2048 key sprig generates for a certificate.
func (g *Generator) certKey(c *call) (crypto.PrivateKey, error) {
	return g.keyOf(c, "rsa", certRSABits)
}

func (g *Generator) genCA(c *call, cn string, days int) (CertAndKey, error) {
	key, err := g.certKey(c)
	if err != nil {
		return CertAndKey{}, err
	}
	return g.issue(c, cn, nil, nil, days, true, key, nil, nil)
}

func (g *Generator) genCAWithKey(c *call, cn string, days int, keyPEM string) (CertAndKey, error) {
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return CertAndKey{}, fmt.Errorf("parsing private key: %w", err)
	}
	return g.issue(c, cn, nil, nil, days, true, key, nil, nil)
}

func (g *Generator) genSelfSignedCert(c *call, cn string, ips, names []any, days int) (CertAndKey, error) {
	key, err := g.certKey(c)
	if err != nil {
		return CertAndKey{}, err
	}
	return g.issue(c, cn, ips, names, days, false, key, nil, nil)
}

func (g *Generator) genSelfSignedCertWithKey(c *call, cn string, ips, names []any, days int, keyPEM string) (CertAndKey, error) {
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return CertAndKey{}, fmt.Errorf("parsing private key: %w", err)
	}
	return g.issue(c, cn, ips, names, days, false, key, nil, nil)
}

func (g *Generator) genSignedCert(c *call, cn string, ips, names []any, days int, ca CertAndKey) (CertAndKey, error) {
	parent, signer, err := parseCA(ca)
	if err != nil {
		return CertAndKey{}, err
	}
	key, err := g.certKey(c)
	if err != nil {
		return CertAndKey{}, err
	}
	return g.issue(c, cn, ips, names, days, false, key, parent, signer)
}

func (g *Generator) genSignedCertWithKey(c *call, cn string, ips, names []any, days int, ca CertAndKey, keyPEM string) (CertAndKey, error) {
	parent, signer, err := parseCA(ca)
	if err != nil {
		return CertAndKey{}, err
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return CertAndKey{}, fmt.Errorf("parsing private key: %w", err)
	}
	return g.issue(c, cn, ips, names, days, false, key, parent, signer)
}

// parseCA reads a signing certificate and its key, with sprig's messages.
func parseCA(ca CertAndKey) (*x509.Certificate, crypto.PrivateKey, error) {
	cert, err := parseCertPEM(ca.Cert)
	if err != nil {
		return nil, nil, err
	}
	key, err := parseKeyPEM(ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("error parsing private key: %w", err)
	}
	return cert, key, nil
}

func parseCertPEM(s string) (*x509.Certificate, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return nil, errors.New("unable to decode certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("error parsing certificate: %w", err)
	}
	return cert, nil
}

// buildCustomCert is sprig's: a certificate and key given in base64 of PEM,
// checked, returned as this package's CertAndKey so genSignedCert takes it.
// It is deterministic; it is replaced only for the type.
func (g *Generator) buildCustomCert(_ *call, b64cert, b64key string) (CertAndKey, error) {
	cert, err := base64.StdEncoding.DecodeString(b64cert)
	if err != nil {
		return CertAndKey{}, errors.New("unable to decode base64 certificate")
	}
	key, err := base64.StdEncoding.DecodeString(b64key)
	if err != nil {
		return CertAndKey{}, errors.New("unable to decode base64 private key")
	}
	if _, err := parseCertPEM(string(cert)); err != nil {
		return CertAndKey{}, err
	}
	if _, err := parseKeyPEM(string(key)); err != nil {
		return CertAndKey{}, fmt.Errorf("error parsing private key: %w", err)
	}
	return CertAndKey{Cert: string(cert), Key: string(key)}, nil
}
