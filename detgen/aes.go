package detgen

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"fmt"
)

// encryptAES is sprig's: AES-256-CBC under the password's first 32 bytes
// (zero-padded), PKCS #7 padding, base64 of IV‖ciphertext, "" for "" — so
// sprig's decryptAES reads it. The IV is derived from the call, the key and
// the plaintext: the same text under the same key at the same call is the
// same ciphertext, and any change makes a new IV.
func (g *Generator) encryptAES(c *call, password, plaintext string) (string, error) {
	if plaintext == "" {
		return "", nil
	}
	key := make([]byte, 32)
	copy(key, password)
	block, err := aes.NewCipher(key)
	if err != nil {
		return "", fmt.Errorf("encryptAES: %w", err)
	}
	pad := aes.BlockSize - len(plaintext)%aes.BlockSize
	out := make([]byte, aes.BlockSize, aes.BlockSize+len(plaintext)+pad)
	var e encoder
	e.bytes('k', key)
	e.str(plaintext)
	copy(out, g.derive(c, purposeIV, aes.BlockSize, e.b))
	out = append(out, plaintext...)
	for range pad {
		out = append(out, byte(pad))
	}
	cipher.NewCBCEncrypter(block, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], out[aes.BlockSize:])
	return base64.StdEncoding.EncodeToString(out), nil
}
