package detgen

import (
	"crypto/sha256"
	"encoding/hex"
)

// c2sp.org/det-keygen test vectors: the seed and the SHA-256 of the
// expected PKCS #8 key (the first secp256r1 and 2048-bit vectors).
const (
	detKeygenP256Seed  = "QkJCQkJCQkJCQkJCQkJCQg=="
	detKeygenP256PKCS8 = "b89a5413339a75dcbe8b629c6303fb1d6455d3899f442f066e6447451ba8aab0"
	detKeygenRSASeed   = "Xl2U+6mkaGMosq89epJzbg=="
	detKeygenRSAPKCS8  = "e81b5a0fdfb9e83ddec581598df84400047dc979f4c82bd142b0aca29a51ba2e"
)

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
