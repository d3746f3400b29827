package detgen

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"maps"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"

	"filippo.io/keygen"
)

// memKeys is a KeyCache in memory, which remembers the order of its
// entries; the stores digestpin uses (a folder, Redis) are tested in e2e.
type memKeys struct {
	mu    sync.Mutex
	m     map[string][]byte
	order []string // keys by first Put
	fail  error    // Put's answer, when set
}

func newMemKeys() *memKeys { return &memKeys{m: map[string][]byte{}} }

func (s *memKeys) Get(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	return bytes.Clone(b), ok
}

func (s *memKeys) Put(key string, entry []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if _, ok := s.m[key]; !ok {
		s.order = append(s.order, key)
	}
	s.m[key] = bytes.Clone(entry)
	return nil
}

func (s *memKeys) clone() *memKeys {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &memKeys{m: maps.Clone(s.m), order: slices.Clone(s.order)}
}

// keyChart derives two RSA 2048 keys; a.yaml runs twice, once included
// for a checksum, and derives its key once.
var keyChart = map[string]string{
	"c/templates/a.yaml": "a: {{ (genCA \"a\" 10).Key | b64enc }}\n",
	"c/templates/b.yaml": "b: {{ (genSelfSignedCert \"b\" nil nil 10).Key | b64enc }}\nchecksum: {{ include \"c/templates/a.yaml\" . | sha256sum }}\n",
}

// renderKeys renders keyChart with seed and rel, keeping keys in store
// (none when nil), and returns the output and the key cache's statistics.
func renderKeys(t *testing.T, seed Seed, rel Release, store KeyCache) (string, KeyCacheStats) {
	t.Helper()
	g := New(seed, rel, fixedClock(testNow))
	if store != nil {
		g.SetKeyCache(store)
	}
	return dump(mustRender(t, g, keyChart, nil)), g.KeyCacheStats()
}

// keysOf returns the DER of every key keyChart's output holds.
func keysOf(t *testing.T, out string) [][]byte {
	t.Helper()
	var ders [][]byte
	for l := range strings.SplitSeq(out, "\n") {
		_, v, ok := strings.Cut(l, ": ")
		if !ok || strings.HasPrefix(l, "checksum") {
			continue
		}
		p, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			continue
		}
		if b, _ := pem.Decode(p); b != nil {
			ders = append(ders, b.Bytes)
		}
	}
	if len(ders) != 2 {
		t.Fatalf("found %d keys in the output, want 2:\n%s", len(ders), out)
	}
	return ders
}

// TestKeyCacheWarmIsCold: a render that reads its keys from the cache
// writes the bytes of one that derives them, and of one without a cache;
// a key whose call runs twice in a render is derived once; no entry
// holds a key, in DER or PEM.
func TestKeyCacheWarmIsCold(t *testing.T) {
	t.Parallel()
	plain, st := renderKeys(t, testSeed, testRelease, nil)
	if st != (KeyCacheStats{Derived: 2}) {
		t.Errorf("without a cache: %+v, want 2 keys derived (a.yaml's once, though it runs twice)", st)
	}
	store := newMemKeys()
	cold, st := renderKeys(t, testSeed, testRelease, store)
	if cold != plain || st != (KeyCacheStats{Derived: 2}) {
		t.Errorf("cold: %+v, same output %v; want 2 derived and the output without a cache", st, cold == plain)
	}
	if len(store.m) != 2 {
		t.Fatalf("the cache holds %d entries, want 2", len(store.m))
	}
	warm, st := renderKeys(t, testSeed, testRelease, store)
	if warm != plain || st != (KeyCacheStats{Hits: 2}) {
		t.Errorf("warm: %+v, same output %v; want 2 read and the output without a cache", st, warm == plain)
	}
	for _, der := range keysOf(t, plain) {
		body := base64.StdEncoding.EncodeToString(der)
		for k, e := range store.m {
			if bytes.Contains(e, der[16:48]) || strings.Contains(string(e), body[20:80]) {
				t.Errorf("entry %s holds a key in clear", k)
			}
			if strings.Contains(k, testRelease.Name) || !strings.HasPrefix(k, "key:") || len(k) != len("key:")+64 {
				t.Errorf("storage key %q is not key: and a MAC", k)
			}
			if strings.Contains(string(e), testRelease.Name) || strings.Contains(string(e), testRelease.Namespace) {
				t.Errorf("entry %s names the release", k)
			}
		}
	}
}

// TestKeyCacheBadEntries: an entry that is not the one the call stored
// (another call's, cut short, garbage, too large, of another format,
// altered, another seed's or another release's) is ignored and counted,
// the key derived again, the output unchanged, and the entry replaced.
func TestKeyCacheBadEntries(t *testing.T) {
	t.Parallel()
	base := newMemKeys()
	want, _ := renderKeys(t, testSeed, testRelease, base)
	other := func(seed Seed, rel Release) *memKeys {
		s := newMemKeys()
		renderKeys(t, seed, rel, s)
		return s
	}
	otherSeed := testSeed
	otherSeed[0] ^= 1
	bySeed := other(otherSeed, testRelease)
	byRelease := other(testSeed, Release{Name: "other", Namespace: testRelease.Namespace})

	for _, tc := range []struct {
		name    string
		corrupt func(s *memKeys, id string)
		why     string
	}{
		{"another call's", func(s *memKeys, id string) { s.m[id] = s.m[s.order[1]] }, "does not open"},
		{"cut short", func(s *memKeys, id string) { s.m[id] = s.m[id][:len(s.m[id])/2] }, "not a key entry"},
		{"garbage", func(s *memKeys, id string) { s.m[id] = []byte("\x00\xffnot json") }, "not a key entry"},
		{"empty", func(s *memKeys, id string) { s.m[id] = nil }, "not a key entry"},
		{"too large", func(s *memKeys, id string) { s.m[id] = bytes.Repeat([]byte{'{'}, MaxKeyEntry+1) }, "more than"},
		{"another format", func(s *memKeys, id string) {
			s.m[id] = bytes.Replace(s.m[id], []byte(keyCacheFormat), []byte("digestpin-key-v0"), 1)
		}, `format "digestpin-key-v0"`},
		{"a bit flipped", func(s *memKeys, id string) {
			var e keyEntry
			if err := json.Unmarshal(s.m[id], &e); err != nil {
				t.Fatal(err)
			}
			e.Sealed[len(e.Sealed)/2] ^= 0x10
			s.m[id], _ = json.Marshal(e)
		}, "does not open"},
		{"another seed's", func(s *memKeys, id string) { s.m[id] = bySeed.m[bySeed.order[0]] }, "does not open"},
		{"another release's", func(s *memKeys, id string) { s.m[id] = byRelease.m[byRelease.order[0]] }, "does not open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := base.clone()
			id := s.order[0]
			tc.corrupt(s, id)
			got, st := renderKeys(t, testSeed, testRelease, s)
			if got != want {
				t.Error("the output differs from the render with good entries")
			}
			if st.Rejected != 1 || st.Hits != 1 || st.Derived != 1 || !strings.Contains(st.FirstRejected, id) || !strings.Contains(st.FirstRejected, tc.why) {
				t.Errorf("stats %+v, want 1 rejected (%s), 1 read, 1 derived", st, tc.why)
			}
			if _, st := renderKeys(t, testSeed, testRelease, s); st != (KeyCacheStats{Hits: 2}) {
				t.Errorf("the render after: %+v, want 2 read (the entry replaced)", st)
			}
		})
	}
}

// TestKeyCacheUnstored: a cache that cannot store is counted, and the
// render's output is the same.
func TestKeyCacheUnstored(t *testing.T) {
	t.Parallel()
	want, _ := renderKeys(t, testSeed, testRelease, nil)
	s := newMemKeys()
	s.fail = errors.New("disk full")
	got, st := renderKeys(t, testSeed, testRelease, s)
	if got != want || st.Unstored != 2 || st.Derived != 2 || !strings.Contains(st.FirstUnstored, "disk full") {
		t.Errorf("stats %+v, same output %v; want 2 derived, 2 unstored (disk full)", st, got == want)
	}
}

// TestOpenKeyChecks: an entry that opens is still refused when the key in
// it is not the key it says, or not one deriveKey makes.
func TestOpenKeyChecks(t *testing.T) {
	t.Parallel()
	block, err := aes.NewCipher(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		t.Fatal(err)
	}
	aad := []byte("call")
	k, err := keygen.RSA(2048, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := keygen.RSA(2048, bytes.Repeat([]byte{8}, 32))
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(k *rsa.PrivateKey) string {
		b, err := keyPEM(k)
		if err != nil {
			t.Fatal(err)
		}
		return string(pem.EncodeToMemory(b))
	}
	pub, err := publicDigest(k)
	if err != nil {
		t.Fatal(err)
	}
	bad := *k
	bad.D = new(big.Int).Add(k.D, big.NewInt(2))
	bad.Precomputed = rsa.PrecomputedValues{}
	seal := func(p keyPlain) []byte {
		plain, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(keyEntry{Format: keyCacheFormat, Sealed: aead.Seal(nil, nil, plain, aad)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good, err := sealKey(k, aead, aad, "rsa", 2048)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := openKey(good, aead, aad, "rsa", 2048); err != nil || !k.Equal(got) {
		t.Fatalf("openKey of a good entry: %v", err)
	}
	for _, tc := range []struct {
		name  string
		entry []byte
		typ   string
		bits  int
		why   string
	}{
		{"other associated data", good, "rsa", 2048, "does not open"},
		{"another size asked", good, "rsa", 4096, "holds a rsa key of 2048 bits"},
		{"another type asked", good, "dsa", 2048, "holds a rsa key"},
		{"a size that lies", seal(keyPlain{Type: "rsa", Bits: 4096, PEM: pemOf(k), Public: pub}), "rsa", 4096, "an RSA key of 2048 bits"},
		{"another public key", seal(keyPlain{Type: "rsa", Bits: 2048, PEM: pemOf(k2), Public: pub}), "rsa", 2048, "does not match the public key"},
		{"an invalid key", seal(keyPlain{Type: "rsa", Bits: 2048, PEM: pemOf(&bad), Public: pub}), "rsa", 2048, "invalid"},
		{"no key", seal(keyPlain{Type: "rsa", Bits: 2048, PEM: "not pem", Public: pub}), "rsa", 2048, "no PEM data"},
		{"not json inside", func() []byte {
			b, _ := json.Marshal(keyEntry{Format: keyCacheFormat, Sealed: aead.Seal(nil, nil, []byte("{"), aad)})
			return b
		}(), "rsa", 2048, "sealed content is no key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := aad
			if tc.name == "other associated data" {
				a = []byte("another call")
			}
			_, err := openKey(tc.entry, aead, a, tc.typ, tc.bits)
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("openKey = %v, want an error containing %q", err, tc.why)
			}
		})
	}
}
