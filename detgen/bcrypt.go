package detgen

import (
	"encoding/base64"
	"fmt"
	"strings"

	"golang.org/x/crypto/blowfish" //nolint:staticcheck // bcrypt's cipher, as in x/crypto/bcrypt
)

// bcryptCost is sprig's (golang.org/x/crypto/bcrypt.DefaultCost).
const bcryptCost = 10

// bcryptMaxPassword is the longest password bcrypt reads; like
// x/crypto/bcrypt's GenerateFromPassword, a longer one is refused.
const bcryptMaxPassword = 72

// bcryptEncoding is bcrypt's base64: its own alphabet, no padding.
var bcryptEncoding = base64.NewEncoding("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789").WithPadding(base64.NoPadding)

// bcryptMagic is the text bcrypt encrypts 64 times under the expensive key
// schedule.
const bcryptMagic = "OrpheanBeholderScryDoubt"

// bcryptHash is bcrypt (Provos and Mazières, "A Future-Adaptable Password
// Scheme", 1999, as OpenBSD's $2a$ and x/crypto/bcrypt implement it) with a
// given salt, over x/crypto/blowfish's exported key schedule:
//
//	state := EksBlowfishSetup(cost, salt, password‖NUL)
//	  = ExpandKey(state₀, salt, key), then 2^cost times ExpandKey(key), ExpandKey(salt)
//	ctext := "OrpheanBeholderScryDoubt" encrypted 64 times in ECB mode
//	"$2a$" cost "$" base64(salt) base64(ctext[:23])
//
// x/crypto/bcrypt has no salt parameter; TestBcryptVectors checks this
// against published vectors and x/crypto/bcrypt.CompareHashAndPassword.
func bcryptHash(password []byte, cost int, salt [16]byte) (string, error) {
	if len(password) > bcryptMaxPassword {
		return "", fmt.Errorf("bcrypt: password length exceeds %d bytes", bcryptMaxPassword)
	}
	// The key is the password with its C string terminator, as OpenBSD's.
	key := make([]byte, len(password)+1)
	copy(key, password)
	c, err := blowfish.NewSaltedCipher(key, salt[:])
	if err != nil {
		return "", fmt.Errorf("bcrypt: %w", err)
	}
	for range 1 << cost {
		blowfish.ExpandKey(key, c)
		blowfish.ExpandKey(salt[:], c)
	}
	ctext := []byte(bcryptMagic)
	for i := 0; i < len(ctext); i += blowfish.BlockSize {
		for range 64 {
			c.Encrypt(ctext[i:i+blowfish.BlockSize], ctext[i:i+blowfish.BlockSize])
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "$2a$%02d$", cost)
	b.WriteString(bcryptEncoding.EncodeToString(salt[:]))
	b.WriteString(bcryptEncoding.EncodeToString(ctext[:23]))
	return b.String(), nil
}

// bcrypt is sprig's: the $2a$ hash at cost 10, or the message of the error
// in its place; the salt is derived from the call.
func (g *Generator) bcrypt(c *call, password string) string {
	h, err := bcryptHash([]byte(password), bcryptCost, [16]byte(g.derive(c, purposeSalt, 16)))
	if err != nil {
		return fmt.Sprintf("failed to encrypt string with bcrypt: %s", err)
	}
	return h
}

// htpasswd is sprig's: "user:" and the bcrypt hash of password; a user
// with ":" gives a message instead.
func (g *Generator) htpasswd(c *call, user, password string) string {
	if strings.Contains(user, ":") {
		return fmt.Sprintf("invalid username: %s", user)
	}
	return user + ":" + g.bcrypt(c, password)
}
