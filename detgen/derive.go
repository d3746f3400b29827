package detgen

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"sort"
	"time"
)

// hkdfSalt is the domain label of every derivation. A new version of the
// derivation (a new encoding, a new procedure) takes a new label, so values
// of two versions can never collide.
const hkdfSalt = "digestpin.dev/detgen/v1"

// Purposes separate the values one call derives: a certificate's key, serial
// and validity offset come from one call and must be independent.
const (
	purposeValue  = "value"  // the random stream of strings, bytes, uuids
	purposeKey    = "key"    // a private key's det-keygen secret
	purposeSerial = "serial" // a certificate's serial number
	purposeOffset = "offset" // a certificate's re-issue window offset
	purposeSalt   = "salt"   // a bcrypt salt
	purposeIV     = "iv"     // an encryptAES initialisation vector

	// A derived private key kept in a KeyCache: the entry's key (a MAC of
	// the call, which names it without showing it) and the AEAD key that
	// seals it. Neither enters a generated value.
	purposeKeyCacheID   = "key-cache-id"
	purposeKeyCacheSeal = "key-cache-seal"
)

// encoder builds the canonical, injective byte encoding of a derivation's
// inputs: every field is a type tag and a length-prefixed body, so no two
// different input lists encode alike.
type encoder struct{ b []byte }

func (e *encoder) bytes(tag byte, p []byte) {
	e.b = append(e.b, tag)
	e.b = binary.BigEndian.AppendUint64(e.b, uint64(len(p)))
	e.b = append(e.b, p...)
}

func (e *encoder) str(s string) { e.bytes('s', []byte(s)) }

func (e *encoder) int(i int64) { e.bytes('i', binary.AppendVarint(nil, i)) }

// value encodes a template argument by its dynamic type.
func (e *encoder) value(v reflect.Value) {
	if !v.IsValid() {
		e.bytes('n', nil)
		return
	}
	if c, ok := v.Interface().(CertAndKey); ok {
		e.bytes('c', nil)
		e.certAndKey(c)
		return
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			e.bytes('n', nil)
			return
		}
		e.value(v.Elem())
	case reflect.String:
		e.str(v.String())
	case reflect.Bool:
		if v.Bool() {
			e.bytes('b', []byte{1})
		} else {
			e.bytes('b', []byte{0})
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.int(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.bytes('u', binary.BigEndian.AppendUint64(nil, v.Uint()))
	case reflect.Float32, reflect.Float64:
		e.bytes('f', binary.BigEndian.AppendUint64(nil, math.Float64bits(v.Float())))
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			e.bytes('n', nil)
			return
		}
		e.bytes('l', binary.AppendVarint(nil, int64(v.Len())))
		for i := range v.Len() {
			e.value(v.Index(i))
		}
	case reflect.Map:
		keys := v.MapKeys()
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = fmt.Sprint(k.Interface())
		}
		sort.Sort(byName{names, keys})
		e.bytes('m', binary.AppendVarint(nil, int64(len(keys))))
		for i, k := range keys {
			e.str(names[i])
			e.value(v.MapIndex(k))
		}
	default:
		// Values no generator takes (funcs, channels, structs): their type
		// and printed form.
		if t, ok := v.Interface().(time.Time); ok {
			e.bytes('t', []byte(t.UTC().Format(time.RFC3339Nano)))
			return
		}
		e.bytes('x', fmt.Appendf(nil, "%T:%v", v.Interface(), v.Interface()))
	}
}

// certAndKey encodes a certificate argument by what of it enters a
// certificate it signs: the signing key and the issuer's name and key id.
// The issuer's serial and validity stay out, so a leaf does not change when
// its CA is re-issued with the same key (and still chains to both).
func (e *encoder) certAndKey(c CertAndKey) {
	e.str(c.Key)
	if cert, err := parseCertPEM(c.Cert); err == nil {
		e.bytes('r', cert.RawSubject)
		e.bytes('k', cert.SubjectKeyId)
		return
	}
	e.str(c.Cert)
}

// byName sorts map keys by their printed form.
type byName struct {
	names []string
	keys  []reflect.Value
}

func (b byName) Len() int           { return len(b.names) }
func (b byName) Less(i, j int) bool { return b.names[i] < b.names[j] }
func (b byName) Swap(i, j int) {
	b.names[i], b.names[j] = b.names[j], b.names[i]
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
}

// derive returns n bytes of HKDF-SHA256 output from the seed for purpose and
// the call's inputs (release, function, identity, arguments) and any extra
// fields. n is at most 255·32.
func (g *Generator) derive(c *call, purpose string, n int, extra ...[]byte) []byte {
	var e encoder
	e.str(purpose)
	e.str(g.rel.Name)
	e.str(g.rel.Namespace)
	e.str(c.fn)
	e.bytes('d', c.identity)
	e.bytes('a', c.args)
	for _, x := range extra {
		e.bytes('e', x)
	}
	out, err := hkdf.Key(sha256.New, g.seed[:], []byte(hkdfSalt), string(e.b), n)
	if err != nil {
		// Only a length over 255·32 or a FIPS-only mode refusal get here;
		// both are programming errors of this package.
		panic(fmt.Sprintf("detgen: hkdf: %v", err))
	}
	return out
}

// stream is a deterministic cryptographically strong byte stream (ChaCha8,
// math/rand/v2, keyed from HKDF) with unbiased uniform choices.
type stream struct{ c *rand.ChaCha8 }

func (g *Generator) stream(c *call, purpose string) *stream {
	return &stream{c: rand.NewChaCha8([32]byte(g.derive(c, purpose, 32)))}
}

// Read fills p; it never fails.
func (s *stream) Read(p []byte) (int, error) { return s.c.Read(p) }

// uint64 returns 8 bytes of the stream, big-endian.
func (s *stream) uint64() uint64 {
	var b [8]byte
	_, _ = s.c.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

// below returns a uniform integer in [0, n) for n > 0 by rejection
// sampling: draws below 2⁶⁴ mod n are discarded, so the rest is a whole
// number of runs of n and the remainder carries no bias.
func (s *stream) below(n uint64) uint64 {
	if n == 0 {
		panic("detgen: below(0)")
	}
	reject := -n % n // = 2⁶⁴ mod n
	for {
		if r := s.uint64(); r >= reject {
			return r % n
		}
	}
}

// serial turns 16 derived bytes into a positive certificate serial number
// of at most 16 bytes (RFC 5280 allows 20).
func serial(b []byte) *big.Int {
	b[0] &= 0x7f
	n := new(big.Int).SetBytes(b[:16])
	if n.Sign() == 0 {
		n.SetInt64(1)
	}
	return n
}
