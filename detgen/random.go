package detgen

import (
	"encoding/base64"
	"encoding/hex"

	"fmt"
)

// The alphabets of sprig's random strings (Masterminds/goutils'
// CryptoRandom): letters and digits are the ASCII ones, randAscii is the
// printable ASCII range with space, 32 through 126.
const (
	digits  = "0123456789"
	letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

var asciiPrintable = func() string {
	b := make([]byte, 0, 95)
	for c := byte(32); c <= 126; c++ {
		b = append(b, c)
	}
	return string(b)
}()

// randString returns count characters drawn uniformly from alphabet; like
// sprig, a count below 1 gives "".
func (g *Generator) randString(c *call, count int, alphabet string) string {
	if count <= 0 {
		return ""
	}
	s := g.stream(c, purposeValue)
	b := make([]byte, count)
	for i := range b {
		b[i] = alphabet[s.below(uint64(len(alphabet)))]
	}
	return string(b)
}

func (g *Generator) randAlphaNum(c *call, count int) string {
	return g.randString(c, count, digits+letters)
}

func (g *Generator) randAlpha(c *call, count int) string {
	return g.randString(c, count, letters)
}

func (g *Generator) randNumeric(c *call, count int) string {
	return g.randString(c, count, digits)
}

func (g *Generator) randASCII(c *call, count int) string {
	return g.randString(c, count, asciiPrintable)
}

// randBytes returns count derived bytes in standard base64, as sprig.
func (g *Generator) randBytes(c *call, count int) (string, error) {
	if count < 0 {
		return "", fmt.Errorf("randBytes: count %d is negative", count)
	}
	b := make([]byte, count)
	_, _ = g.stream(c, purposeValue).Read(b)
	return base64.StdEncoding.EncodeToString(b), nil
}

// randInt returns an integer in [min, max), as sprig; sprig panics for max
// <= min, this is an error.
func (g *Generator) randInt(c *call, lo, hi int) (int, error) {
	if hi <= lo {
		return 0, fmt.Errorf("randInt: max %d is not above min %d", hi, lo)
	}
	// The span hi-lo, computed in uint64 where it cannot overflow; lo plus
	// a draw below it wraps back into [lo, hi).
	span := uint64(hi) - uint64(lo)                             //nolint:gosec // two's complement: the exact span for hi > lo
	return lo + int(g.stream(c, purposeValue).below(span)), nil //nolint:gosec // the draw is below the span
}

// uuidv4 returns a version 4, RFC 9562 variant UUID in its 36-character
// lowercase form.
func (g *Generator) uuidv4(c *call) string {
	var u [16]byte
	_, _ = g.stream(c, purposeValue).Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// shuffle permutes the runes of s (Fisher–Yates with unbiased draws), as
// sprig's xstrings.Shuffle does with math/rand.
func (g *Generator) shuffle(c *call, s string) string {
	r := []rune(s)
	if len(r) < 2 {
		return s
	}
	st := g.stream(c, purposeValue)
	for i := len(r) - 1; i > 0; i-- {
		j := st.below(uint64(i) + 1)
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}
