package fluxoci

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/digestpin/digestpin/internal/readfile"
)

// LoadSigner reads the private key at path: a key of cosign
// generate-key-pair (PEM "ENCRYPTED SIGSTORE PRIVATE KEY", or the older
// "ENCRYPTED COSIGN PRIVATE KEY"), decrypted with password, or an
// unencrypted PEM private key (PKCS#8, EC or PKCS#1).
func LoadSigner(path string, password []byte) (signature.Signer, error) {
	b, err := readfile.Regular(path, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("reading the signing key %s: %w", path, err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("reading the signing key %s: no PEM block in it", path)
	}
	var priv crypto.PrivateKey
	switch block.Type {
	case "ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY":
		der, err := encrypted.Decrypt(block.Bytes, password)
		if err != nil {
			return nil, fmt.Errorf("decrypting the signing key %s (the password is COSIGN_PASSWORD): %w", path, err)
		}
		if priv, err = x509.ParsePKCS8PrivateKey(der); err != nil {
			return nil, fmt.Errorf("reading the signing key %s: %w", path, err)
		}
	default:
		if priv, err = cryptoutils.UnmarshalPEMToPrivateKey(b, cryptoutils.SkipPassword); err != nil {
			return nil, fmt.Errorf("reading the signing key %s: %w", path, err)
		}
	}
	s, err := signature.LoadSigner(priv, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("loading the signing key %s: %w", path, err)
	}
	return s, nil
}
