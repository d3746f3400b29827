package detgen

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/dsa" //nolint:staticcheck // genPrivateKey "dsa" is sprig's; DSA stays for compatibility
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
)

// KeyCache keeps the private keys a Generator derives between renders
// (see SetKeyCache): a store of small byte entries by key, such as the
// resolution cache's folder or Redis. Keys are "key:" and 64 hexadecimal
// digits; an entry has at most MaxKeyEntry bytes. A KeyCache knows nothing
// of the entries: they are sealed, and the Generator checks each it reads.
// Implementations must be safe for concurrent use.
type KeyCache interface {
	// Get returns the entry stored under key, if any; a store that fails
	// answers none.
	Get(key string) ([]byte, bool)
	// Put stores entry under key.
	Put(key string, entry []byte) error
}

// MaxKeyEntry bounds an entry of a KeyCache: a sealed RSA 4096 key takes
// about 4.5 KiB.
const MaxKeyEntry = 16 << 10

// keyCacheFormat names the format of an entry; it is sealed with the key,
// so an entry of another format never opens.
const keyCacheFormat = "digestpin-key-v1"

// KeyCacheStats is what a Generator's key cache did in one render.
type KeyCacheStats struct {
	// Hits counts the keys read from the cache; Derived, those derived
	// (not in the cache, or no cache set).
	Hits, Derived int
	// Rejected counts the entries the cache held that were not used (cut
	// short, corrupt, sealed under another seed or for another call, or
	// a key that fails its checks): each key was derived again and its
	// entry replaced. FirstRejected says which entry and why.
	Rejected      int
	FirstRejected string
	// Unstored counts the derived keys the cache failed to store;
	// FirstUnstored says why.
	Unstored      int
	FirstUnstored string
}

// memoKey is one derived key of a render, derived or read once however
// often its call runs.
type memoKey struct {
	once sync.Once
	key  crypto.PrivateKey
	err  error
}

// SetKeyCache makes the Generator keep the RSA and DSA keys it derives,
// which take up to seconds each, in c, and read them from there on later
// renders. (Within one render a key is derived once however often its call
// runs, with or without a cache.)
//
// An entry is the key sealed with AES-256-GCM under a key derived from the
// seed and the call, with the call (release, function, identity,
// arguments) and the key's type and size as associated data, under a
// storage key that is a MAC of the same under another derived key: without
// the seed an entry names no call and shows no key, and an entry copied
// under another call's storage key does not open. An entry read is used
// only when it opens and the key in it parses, passes its type's checks
// and matches the public key recorded beside it; any other is ignored,
// counted in KeyCacheStats, and replaced by the key derived again, so the
// cache can make a render faster but never change or fail it. Call it
// before Funcs.
func (g *Generator) SetKeyCache(c KeyCache) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keyCache = c
}

// KeyCacheStats returns what the key cache did in this render so far.
func (g *Generator) KeyCacheStats() KeyCacheStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.keyStats
}

// cachedKeyType reports whether keys of typ are worth keeping: RSA and
// DSA take up to seconds to derive; ECDSA and Ed25519 take microseconds,
// less than reading an entry.
func cachedKeyType(typ string) bool { return typ == "rsa" || typ == "dsa" }

// keyOf returns the key of type typ (of bits) of call c: from this
// render's memo, else from the key cache, else derived (and stored).
func (g *Generator) keyOf(c *call, typ string, bits int) (crypto.PrivateKey, error) {
	if !cachedKeyType(typ) {
		return g.deriveKey(c, typ, bits)
	}
	id := g.keyID(c, typ, bits)
	g.mu.Lock()
	m := g.memo[id]
	if m == nil {
		m = &memoKey{}
		g.memo[id] = m
	}
	cache := g.keyCache
	g.mu.Unlock()
	m.once.Do(func() { m.key, m.err = g.readOrDerive(c, typ, bits, id, cache) })
	return m.key, m.err
}

// readOrDerive returns the key of c under storage key id from cache, if
// it holds a good one, else derives it and stores it there.
func (g *Generator) readOrDerive(c *call, typ string, bits int, id string, cache KeyCache) (crypto.PrivateKey, error) {
	if cache == nil {
		k, err := g.deriveKey(c, typ, bits)
		if err == nil {
			g.count(func(s *KeyCacheStats) { s.Derived++ })
		}
		return k, err
	}
	aead, aad := g.keySealer(c, typ, bits, id)
	if b, ok := cache.Get(id); ok {
		k, err := openKey(b, aead, aad, typ, bits)
		if err == nil {
			g.count(func(s *KeyCacheStats) { s.Hits++ })
			return k, nil
		}
		g.count(func(s *KeyCacheStats) {
			if s.Rejected++; s.FirstRejected == "" {
				s.FirstRejected = fmt.Sprintf("entry %s: %v", id, err)
			}
		})
	}
	k, err := g.deriveKey(c, typ, bits)
	if err != nil {
		return nil, err
	}
	g.count(func(s *KeyCacheStats) { s.Derived++ })
	entry, err := sealKey(k, aead, aad, typ, bits)
	if err == nil {
		err = cache.Put(id, entry)
	}
	if err != nil {
		g.count(func(s *KeyCacheStats) {
			if s.Unstored++; s.FirstUnstored == "" {
				s.FirstUnstored = fmt.Sprintf("entry %s: %v", id, err)
			}
		})
	}
	return k, nil
}

// count updates the key cache's statistics.
func (g *Generator) count(f func(*KeyCacheStats)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(&g.keyStats)
}

// keyFields are the derivation's extra fields of a key of typ and bits.
func keyFields(typ string, bits int) [][]byte {
	return [][]byte{[]byte(typ), binary.BigEndian.AppendUint32(nil, uint32(bits))} //nolint:gosec // a key size, at most 4096
}

// keyID is the storage key of the key of c: a MAC of the call and the
// key's type and size under a derived key, which names the entry without
// showing the call.
func (g *Generator) keyID(c *call, typ string, bits int) string {
	return "key:" + hex.EncodeToString(g.derive(c, purposeKeyCacheID, 32, keyFields(typ, bits)...))
}

// keySealer returns the AEAD that seals the key of c (AES-256-GCM with
// random nonces, under a key derived from the seed and the call) and the
// associated data its entry is bound to: the format, the call in full,
// the key's type and size, and the storage key.
func (g *Generator) keySealer(c *call, typ string, bits int, id string) (cipher.AEAD, []byte) {
	block, err := aes.NewCipher(g.derive(c, purposeKeyCacheSeal, 32, keyFields(typ, bits)...))
	if err != nil {
		panic(fmt.Sprintf("detgen: aes: %v", err)) // a 32-byte key: never
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		panic(fmt.Sprintf("detgen: gcm: %v", err)) // AES: never
	}
	var e encoder
	e.str(keyCacheFormat)
	e.str(g.rel.Name)
	e.str(g.rel.Namespace)
	e.str(c.fn)
	e.bytes('d', c.identity)
	e.bytes('a', c.args)
	for _, f := range keyFields(typ, bits) {
		e.bytes('e', f)
	}
	e.str(id)
	return aead, e.b
}

// keyEntry is an entry of the key cache as stored; keyPlain is what
// Sealed holds.
type (
	keyEntry struct {
		Format string `json:"format"`
		Sealed []byte `json:"sealed"`
	}
	keyPlain struct {
		Type   string `json:"type"`
		Bits   int    `json:"bits"`
		PEM    string `json:"pem"`
		Public string `json:"public"` // hex SHA-256 of the public key (publicDigest)
	}
)

// sealKey returns the entry of k, a key of typ and bits.
func sealKey(k crypto.PrivateKey, aead cipher.AEAD, aad []byte, typ string, bits int) ([]byte, error) {
	block, err := keyPEM(k)
	if err != nil {
		return nil, err
	}
	pub, err := publicDigest(k)
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(keyPlain{Type: typ, Bits: bits, PEM: string(pem.EncodeToMemory(block)), Public: pub})
	if err != nil {
		return nil, fmt.Errorf("encoding %s key: %w", typ, err)
	}
	sealed := aead.Seal(nil, nil, plain, aad) //nolint:gosec // G407: NewGCMWithRandomNonce draws a random nonce for each Seal, and takes none
	b, err := json.Marshal(keyEntry{Format: keyCacheFormat, Sealed: sealed})
	if err != nil {
		return nil, fmt.Errorf("encoding %s key entry: %w", typ, err)
	}
	if len(b) > MaxKeyEntry {
		return nil, fmt.Errorf("%s key entry of %d bytes, more than %d", typ, len(b), MaxKeyEntry)
	}
	return b, nil
}

// openKey returns the key of typ and bits that entry b holds, when it
// opens under aead with aad and the key passes its checks.
func openKey(b []byte, aead cipher.AEAD, aad []byte, typ string, bits int) (crypto.PrivateKey, error) {
	if len(b) > MaxKeyEntry {
		return nil, fmt.Errorf("%d bytes, more than %d", len(b), MaxKeyEntry)
	}
	var e keyEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("not a key entry: %w", err)
	}
	if e.Format != keyCacheFormat {
		return nil, fmt.Errorf("a key entry of format %q, want %q", e.Format, keyCacheFormat)
	}
	plain, err := aead.Open(nil, nil, e.Sealed, aad)
	if err != nil {
		return nil, errors.New("does not open under this seed for this call (cut short, corrupt, of another seed or another call's)")
	}
	var p keyPlain
	if err := json.Unmarshal(plain, &p); err != nil {
		return nil, fmt.Errorf("sealed content is no key: %w", err)
	}
	if p.Type != typ || p.Bits != bits {
		return nil, fmt.Errorf("holds a %s key of %d bits, want %s of %d", p.Type, p.Bits, typ, bits)
	}
	k, err := parseKeyPEM(p.PEM)
	if err != nil {
		return nil, err
	}
	if err := checkKey(k, typ, bits); err != nil {
		return nil, err
	}
	if pub, err := publicDigest(k); err != nil || pub != p.Public {
		return nil, errors.New("the key does not match the public key recorded with it")
	}
	return k, nil
}

// checkKey checks k as a key of typ and bits that deriveKey could have
// made: an RSA key of two primes, e 65537, of exactly bits, that
// crypto/rsa validates; a DSA L2048N256 key whose y is g^x mod p.
func checkKey(k crypto.PrivateKey, typ string, bits int) error {
	switch k := k.(type) {
	case *rsa.PrivateKey:
		if typ != "rsa" || k.N.BitLen() != bits || k.E != 65537 || len(k.Primes) != 2 {
			return fmt.Errorf("an RSA key of %d bits, e %d and %d primes, want %s of %d bits", k.N.BitLen(), k.E, len(k.Primes), typ, bits)
		}
		if err := k.Validate(); err != nil {
			return fmt.Errorf("an invalid RSA key: %w", err)
		}
		return nil
	case *dsa.PrivateKey:
		one := big.NewInt(1)
		switch {
		case typ != "dsa":
			return fmt.Errorf("a DSA key, want %s", typ)
		case k.P == nil || k.Q == nil || k.G == nil || k.X == nil || k.Y == nil ||
			k.P.BitLen() != 2048 || k.Q.BitLen() != 256 || k.G.Cmp(one) <= 0 || k.G.Cmp(k.P) >= 0 ||
			k.X.Sign() <= 0 || k.X.Cmp(k.Q) >= 0:
			return errors.New("a DSA key out of the L2048N256 ranges")
		case new(big.Int).Exp(k.G, k.X, k.P).Cmp(k.Y) != 0:
			return errors.New("a DSA key whose y is not g^x mod p")
		}
		return nil
	}
	return fmt.Errorf("a key of type %T, want %s", k, typ)
}

// dsaPublicASN1 is a DSA public key, for publicDigest.
type dsaPublicASN1 struct{ P, Q, G, Y *big.Int }

// publicDigest is the hex SHA-256 of k's public key: PKCS #1 for RSA,
// the parameters and y for DSA.
func publicDigest(k crypto.PrivateKey) (string, error) {
	var b []byte
	switch k := k.(type) {
	case *rsa.PrivateKey:
		b = x509.MarshalPKCS1PublicKey(&k.PublicKey)
	case *dsa.PrivateKey:
		var err error
		if b, err = asn1.Marshal(dsaPublicASN1{k.P, k.Q, k.G, k.Y}); err != nil {
			return "", fmt.Errorf("encoding dsa public key: %w", err)
		}
	default:
		return "", fmt.Errorf("no public key digest for %T", k)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
