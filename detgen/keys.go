package detgen

import (
	"crypto"
	"crypto/dsa" //nolint:staticcheck // genPrivateKey "dsa" is sprig's; DSA stays for compatibility
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"filippo.io/keygen"
)

// Key types and sizes of sprig: genPrivateKey's RSA is 4096 bits, the
// certificate functions' own keys are RSA 2048.
const (
	genPrivateKeyRSABits = 4096
	certRSABits          = 2048
)

// deriveKey returns the private key of type typ ("rsa" with bits, "ecdsa"
// P-256, "ed25519", "dsa" L2048N256) derived from the call: RSA and ECDSA as
// c2sp.org/det-keygen specifies (filippo.io/keygen), Ed25519 from a derived
// seed, DSA from crypto/dsa's own procedure reading a derived stream. The
// key depends on the call's identity and arguments only, never on time.
func (g *Generator) deriveKey(c *call, typ string, bits int) (crypto.PrivateKey, error) {
	switch typ {
	case "rsa":
		k, err := keygen.RSA(bits, g.derive(c, purposeKey, 32))
		if err != nil {
			return nil, fmt.Errorf("deriving rsa key: %w", err)
		}
		return k, nil
	case "ecdsa":
		k, err := keygen.ECDSA(elliptic.P256(), g.derive(c, purposeKey, 32))
		if err != nil {
			return nil, fmt.Errorf("deriving ecdsa key: %w", err)
		}
		return k, nil
	case "ed25519":
		return ed25519.NewKeyFromSeed(g.derive(c, purposeKey, ed25519.SeedSize)), nil
	case "dsa":
		// crypto/dsa reads only the reader it is given (TestDSAReaderOnly
		// checks), so a derived stream makes it deterministic.
		s := g.stream(c, purposeKey)
		k := new(dsa.PrivateKey)
		if err := dsa.GenerateParameters(&k.Parameters, s, dsa.L2048N256); err != nil {
			return nil, fmt.Errorf("deriving dsa parameters: %w", err)
		}
		if err := dsa.GenerateKey(k, s); err != nil {
			return nil, fmt.Errorf("deriving dsa key: %w", err)
		}
		return k, nil
	}
	return nil, fmt.Errorf("unknown key type %q", typ)
}

// genPrivateKey is sprig's: "" or "rsa" (4096 bits), "ecdsa" (P-256),
// "ed25519", "dsa"; the PEM of the key, or, as sprig, a message in place of
// the key for an unknown type or a failure.
func (g *Generator) genPrivateKey(c *call, typ string) string {
	bits := 0
	switch typ {
	case "", "rsa":
		typ, bits = "rsa", genPrivateKeyRSABits
	case "ecdsa", "ed25519", "dsa":
	default:
		return "Unknown type " + typ
	}
	k, err := g.keyOf(c, typ, bits)
	if err != nil {
		return fmt.Sprintf("failed to generate private key: %s", err)
	}
	b, err := keyPEM(k)
	if err != nil {
		return fmt.Sprintf("failed to generate private key: %s", err)
	}
	return string(pem.EncodeToMemory(b))
}

// dsaKeyASN1 is OpenSSL's DSA private key structure, which sprig writes in
// a "DSA PRIVATE KEY" block.
type dsaKeyASN1 struct {
	Version       int
	P, Q, G, Y, X *big.Int
}

// keyPEM is the PEM block sprig writes for a key: PKCS #1 "RSA PRIVATE KEY",
// SEC 1 "EC PRIVATE KEY", OpenSSL "DSA PRIVATE KEY", PKCS #8 "PRIVATE KEY"
// for the rest (Ed25519).
func keyPEM(k crypto.PrivateKey) (*pem.Block, error) {
	switch k := k.(type) {
	case *rsa.PrivateKey:
		return &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}, nil
	case *ecdsa.PrivateKey:
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, fmt.Errorf("encoding ecdsa key: %w", err)
		}
		return &pem.Block{Type: "EC PRIVATE KEY", Bytes: b}, nil
	case *dsa.PrivateKey:
		b, err := asn1.Marshal(dsaKeyASN1{P: k.P, Q: k.Q, G: k.G, Y: k.Y, X: k.X})
		if err != nil {
			return nil, fmt.Errorf("encoding dsa key: %w", err)
		}
		return &pem.Block{Type: "DSA PRIVATE KEY", Bytes: b}, nil
	default:
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return nil, fmt.Errorf("encoding %T key: %w", k, err)
		}
		return &pem.Block{Type: "PRIVATE KEY", Bytes: b}, nil
	}
}

// parseKeyPEM reads the first PEM block of s as a private key, accepting
// what sprig accepts: "PRIVATE KEY" (PKCS #8) and "RSA", "EC" and "DSA
// PRIVATE KEY".
func parseKeyPEM(s string) (crypto.PrivateKey, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return nil, errors.New("no PEM data in input")
	}
	if block.Type == "PRIVATE KEY" {
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("decoding PEM as PKCS#8: %w", err)
		}
		return k, nil
	}
	kind, ok := strings.CutSuffix(block.Type, " PRIVATE KEY")
	if !ok {
		return nil, fmt.Errorf("no private key data in PEM block of type %s", block.Type)
	}
	switch kind {
	case "RSA":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing RSA private key from PEM: %w", err)
		}
		return k, nil
	case "EC":
		k, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing EC private key from PEM: %w", err)
		}
		return k, nil
	case "DSA":
		var d dsaKeyASN1
		if _, err := asn1.Unmarshal(block.Bytes, &d); err != nil {
			return nil, fmt.Errorf("parsing DSA private key from PEM: %w", err)
		}
		return &dsa.PrivateKey{PublicKey: dsa.PublicKey{Parameters: dsa.Parameters{P: d.P, Q: d.Q, G: d.G}, Y: d.Y}, X: d.X}, nil
	}
	return nil, fmt.Errorf("invalid private key type %s", block.Type)
}

// publicKey returns k's public key.
func publicKey(k crypto.PrivateKey) (crypto.PublicKey, error) {
	switch k := k.(type) {
	case interface{ Public() crypto.PublicKey }:
		return k.Public(), nil
	case *dsa.PrivateKey:
		return &k.PublicKey, nil
	}
	return nil, fmt.Errorf("unable to get public key for type %T", k)
}
