package detgen

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
	xbcrypt "golang.org/x/crypto/bcrypt"
)

// TestBcryptVectors: bcryptHash gives the published bcrypt vectors
// (OpenBSD/Openwall crypt_blowfish and jBCrypt), and x/crypto/bcrypt
// accepts each vector, so both sides agree on what the vector means.
func TestBcryptVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ password, hash string }{
		{"U*U", "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"},
		{"U*U*", "$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"},
		{"U*U*U", "$2a$05$XXXXXXXXXXXXXXXXXXXXXOAcXxm9kjPGEMsLznoKqmqw7tc8WCx4a"},
		{"", "$2a$05$CCCCCCCCCCCCCCCCCCCCC.7uG0VCzI2bS7j6ymqJi9CdcdxiRTWNy"},
		{"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "$2a$05$abcdefghijklmnopqrstuu5s2v8.iXieOjg/.AySBTTZIIVFJeBui"},
		{"", "$2a$06$DCq7YPn5Rq63x1Lad4cll.TV4S6ytwfsfvkgY8jIucDrjc8deX1s."},
		{"a", "$2a$06$m0CrhHm10qJ3lXRY.5zDGO3rS2KdeeWLuGmsfGlMfOxih58VYVfxe"},
		{"abc", "$2a$06$If6bvum7DFjUnE9p2uDeDu0YHzrHM6tf.iqN8.yx.jNN1ILEf7h0i"},
		{"~!@#$%^&*()      ~!@#$%^&*()PNBFRD", "$2a$06$fPIsBO8qRqkjj273rfaOI.HtSV9jLDpTbZn782DC6/t7qT67P6FfO"},
	} {
		if err := xbcrypt.CompareHashAndPassword([]byte(tc.hash), []byte(tc.password)); err != nil {
			t.Errorf("x/crypto/bcrypt rejects vector %q: %v", tc.hash, err)
		}
		var cost int
		if _, err := fmt.Sscanf(tc.hash[4:6], "%d", &cost); err != nil {
			t.Fatal(err)
		}
		raw, err := bcryptEncoding.DecodeString(tc.hash[7:29])
		if err != nil || len(raw) != 16 {
			t.Fatalf("salt of %q: %v", tc.hash, err)
		}
		got, err := bcryptHash([]byte(tc.password), cost, [16]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		// The salt's last character carries 2 bits; compare the hash part
		// whole and the salt by its bytes.
		if got[29:] != tc.hash[29:] || got[:7] != tc.hash[:7] {
			t.Errorf("bcryptHash(%q) = %s, want %s", tc.password, got, tc.hash)
		}
	}
}

// TestBcryptOutput: bcrypt and htpasswd are cost-10 $2a$ hashes that
// x/crypto/bcrypt verifies, with sprig's messages for a long password and
// a user with ":".
func TestBcryptOutput(t *testing.T) {
	t.Parallel()
	v := values(t, mustRender(t, newTestGenerator(), map[string]string{"c/templates/a.yaml": `b: {{ bcrypt "s3cret" }}
h: {{ htpasswd "admin" "pässword" }}
long: {{ bcrypt (repeat 73 "x") }}
max: {{ bcrypt (repeat 72 "x") }}
colon: {{ htpasswd "a:b" "x" }}`}, nil))
	if !strings.HasPrefix(v["b"], "$2a$10$") || xbcrypt.CompareHashAndPassword([]byte(v["b"]), []byte("s3cret")) != nil {
		t.Errorf("bcrypt = %q does not verify as a cost-10 $2a$ hash", v["b"])
	}
	user, hash, _ := strings.Cut(v["h"], ":")
	if user != "admin" || xbcrypt.CompareHashAndPassword([]byte(hash), []byte("pässword")) != nil {
		t.Errorf("htpasswd = %q does not verify", v["h"])
	}
	if xbcrypt.CompareHashAndPassword([]byte(v["max"]), []byte(strings.Repeat("x", 72))) != nil {
		t.Errorf("bcrypt of 72 bytes = %q does not verify", v["max"])
	}
	f := sprig.TxtFuncMap()
	if want := f["bcrypt"].(func(string) string)(strings.Repeat("x", 73)); v["long"] != want {
		t.Errorf("bcrypt of 73 bytes = %q, sprig's %q", v["long"], want)
	}
	if want := f["htpasswd"].(func(string, string) string)("a:b", "x"); v["colon"] != want {
		t.Errorf("htpasswd of a:b = %q, sprig's %q", v["colon"], want)
	}
}

// TestEncryptAESWithSprig: sprig's decryptAES reads encryptAES's output;
// the IV changes with the key and the text; "" stays "".
func TestEncryptAESWithSprig(t *testing.T) {
	t.Parallel()
	files := map[string]string{"c/templates/a.yaml": `{{- $long := repeat 40 "k" -}}
a: {{ encryptAES "key" "some text" }}
b: {{ encryptAES "key" "some text" | decryptAES "key" }}
c: {{ encryptAES $long "exactly sixteen!" | decryptAES $long }}
d: {{ encryptAES "key" "" | quote }}
e: {{ encryptAES "key" "some texu" }}
`}
	v := values(t, mustRender(t, newTestGenerator(), files, nil))
	if v["b"] != "some text" || v["c"] != "exactly sixteen!" || v["d"] != `""` {
		t.Errorf("round trips through sprig's decryptAES: %q, %q, %q", v["b"], v["c"], v["d"])
	}
	a, _ := base64.StdEncoding.DecodeString(v["a"])
	e, _ := base64.StdEncoding.DecodeString(v["e"])
	if len(a) != 32 || string(a[:16]) == string(e[:16]) {
		t.Errorf("ciphertexts %x and %x: want 32 bytes, other IVs", a, e)
	}
}

// TestRandomStrings: sprig's alphabets and lengths, "" for a count below 1,
// and every character of the alphabet about equally often.
func TestRandomStrings(t *testing.T) {
	t.Parallel()
	g := newTestGenerator()
	for _, tc := range []struct {
		fn       func(*call, int) string
		name     string
		alphabet string
	}{
		{g.randAlphaNum, "randAlphaNum", "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"},
		{g.randAlpha, "randAlpha", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"},
		{g.randNumeric, "randNumeric", "0123456789"},
		{g.randASCII, "randAscii", " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{fn: tc.name}
			if got := tc.fn(c, 0) + tc.fn(c, -5); got != "" {
				t.Errorf("%s(0), %s(-5) = %q, want \"\"", tc.name, tc.name, got)
			}
			const n = 200_000
			s := tc.fn(c, n)
			if len(s) != n {
				t.Fatalf("%s(%d) has %d bytes", tc.name, n, len(s))
			}
			counts := map[rune]int{}
			for _, r := range s {
				counts[r]++
			}
			if len(counts) != len(tc.alphabet) {
				t.Errorf("%s draws %d characters, want the %d of its alphabet", tc.name, len(counts), len(tc.alphabet))
			}
			want := float64(n) / float64(len(tc.alphabet))
			chi := 0.0
			for _, r := range tc.alphabet {
				d := float64(counts[r]) - want
				chi += d * d / want
			}
			// The 99.99th percentile of χ² with k-1 degrees of freedom is
			// below 2k+40 for these k: a biased draw (modulo bias of 256 %
			// 62) lands far above.
			if limit := float64(2*len(tc.alphabet) + 40); chi > limit {
				t.Errorf("%s: χ² = %.1f over %d characters, above %.0f", tc.name, chi, len(tc.alphabet), limit)
			}
		})
	}
}

// TestUUIDv4: the version and variant bits and the textual form.
func TestUUIDv4(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	g := newTestGenerator()
	seen := map[string]bool{}
	for i := range 200 {
		u := g.uuidv4(&call{fn: "uuidv4", identity: []byte{byte(i)}})
		if !re.MatchString(u) || seen[u] {
			t.Fatalf("uuidv4 = %q: not a fresh version 4 UUID", u)
		}
		seen[u] = true
	}
}

// TestRandInt: within [min, max), every value of a small range drawn, and
// an error where sprig panics.
func TestRandInt(t *testing.T) {
	t.Parallel()
	g := newTestGenerator()
	seen := map[int]bool{}
	for i := range 400 {
		n, err := g.randInt(&call{fn: "randInt", identity: []byte(fmt.Sprint(i))}, -3, 4)
		if err != nil || n < -3 || n >= 4 {
			t.Fatalf("randInt(-3, 4) = %d, %v", n, err)
		}
		seen[n] = true
	}
	if len(seen) != 7 {
		t.Errorf("randInt(-3, 4) drew %v", seen)
	}
	for _, r := range [][2]int{{1, 1}, {2, 1}} {
		if _, err := g.randInt(&call{}, r[0], r[1]); err == nil {
			t.Errorf("randInt(%d, %d) = nil error", r[0], r[1])
		}
	}
}

// TestVarying: what reads the clock, the cluster or DNS is recorded with
// its file, template and line; a date given a time is not.
func TestVarying(t *testing.T) {
	t.Parallel()
	g := newTestGenerator()
	files := map[string]string{
		"c/templates/_h.tpl": `{{ define "c.when" }}{{ now | date "2006" }}{{ end }}`,
		"c/templates/a.yaml": `a: {{ include "c.when" . }}
b: {{ date "2006" .Values.notATime }}
c: {{ date "2006" 0 }}
d: {{ ago .Values.t }}
e: {{ lookup "v1" "Secret" "ns" "db" | len }}
f: {{ getHostByName "example.com" | quote }}
g: {{ htmlDate "x" }}
h: {{ durationRound .Values.t }}
i: {{ tpl "{{ now.Year }}" . }}
j: {{ include "c.when" . }}
`,
	}
	mustRender(t, g, files, map[string]any{"notATime": "x", "t": testNow.Add(-time.Hour)})
	var got []string
	for _, u := range g.Varying() {
		got = append(got, fmt.Sprintf("%s %s %s:%d %d", u.Function, u.Template, u.Enclosing, u.Line, u.Count))
	}
	want := []string{
		"now c/templates/a.yaml c.when:1 2",
		"date c/templates/a.yaml c/templates/a.yaml:2 1",
		"ago c/templates/a.yaml c/templates/a.yaml:4 1",
		"lookup c/templates/a.yaml c/templates/a.yaml:5 1",
		"getHostByName c/templates/a.yaml c/templates/a.yaml:6 1",
		"htmlDate c/templates/a.yaml c/templates/a.yaml:7 1",
		"durationRound c/templates/a.yaml c/templates/a.yaml:8 1",
		"now c/templates/a.yaml tpl:1 1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Varying() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// SetLookup reads through the real function.
	g2 := newTestGenerator()
	g2.SetLookup(func(apiVersion, kind, ns, name string) (map[string]any, error) {
		return map[string]any{"kind": kind, "name": name}, nil
	})
	out := mustRender(t, g2, map[string]string{"c/templates/a.yaml": `{{ (lookup "v1" "Secret" "ns" "db").name }}`}, nil)
	if out["c/templates/a.yaml"] != "db" || len(g2.Varying()) != 1 {
		t.Errorf("lookup through SetLookup = %q, uses %v", out["c/templates/a.yaml"], g2.Varying())
	}
}

// TestDateFunctionsMatchSprig: given a time, the replaced date functions
// format as sprig's.
func TestDateFunctionsMatchSprig(t *testing.T) {
	t.Parallel()
	const tmpl = `{{ date "2006-01-02T15:04:05Z07:00" .T }} {{ date "2006" .U }} {{ dateInZone "15:04 MST" .T "Asia/Tokyo" }} {{ date_in_zone "15:04" .I32 "Nowhere/Unknown" }}
{{ htmlDate .T }} {{ htmlDateInZone .P "Europe/Berlin" }} {{ durationRound "90h" }} {{ durationRound .N }} {{ durationRound 3 }} {{ durationRound "-400h" }} {{ ago 1 | regexMatch "^[0-9]+h[0-9]+m[0-9]+s$" }}`
	data := map[string]any{"T": testNow, "U": 1700000000, "I32": int32(1600000000), "P": &testNow, "N": int64(3 * time.Minute)}
	run := func(f template.FuncMap) string {
		var b strings.Builder
		if err := template.Must(template.New("d").Funcs(f).Parse(tmpl)).Execute(&b, data); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	f := sprig.TxtFuncMap()
	theirs := run(f)
	for k, v := range newTestGenerator().Funcs() {
		f[k] = v
	}
	if ours := run(f); ours != theirs {
		t.Errorf("ours:\n%s\nsprig's:\n%s", ours, theirs)
	}
}

// TestKeysValuesSorted: keys and values come in key order, which sprig
// leaves to Go's randomised map iteration.
func TestKeysValuesSorted(t *testing.T) {
	t.Parallel()
	v := values(t, mustRender(t, newTestGenerator(), map[string]string{"c/templates/a.yaml": `k: {{ keys (dict "z" 1 "b" 2 "m" 3 "a" 4) (dict "y" 1 "c" 2) | join "," }}
v: {{ values (dict "z" 1 "b" 2 "m" 3 "a" 4) | join "," }}`}, nil))
	if v["k"] != "a,b,m,z,c,y" || v["v"] != "4,2,3,1" {
		t.Errorf("keys = %q, values = %q", v["k"], v["v"])
	}
}

// TestFuncsCoverage: Funcs replaces only functions Helm has, with their
// signatures; each rewritten function has its located form; what Rewrite
// locates is what Funcs replaces; and every function of Helm's map that
// draws randomness or reads the clock is replaced.
func TestFuncsCoverage(t *testing.T) {
	t.Parallel()
	helm := sprig.TxtFuncMap()
	helm["lookup"] = func(string, string, string, string) (map[string]any, error) { return nil, nil }
	funcs := newTestGenerator().Funcs()
	var specNames []string
	for _, s := range newTestGenerator().specs() {
		specNames = append(specNames, s.name)
	}
	for name, f := range funcs {
		if strings.HasPrefix(name, locatedPrefix) && !rewritten[strings.TrimPrefix(name, locatedPrefix)] {
			continue // the stack's bookkeeping (frames.go)
		}
		if fn, ok := OriginalName(name); ok {
			if _, ok := funcs[fn]; !ok {
				t.Errorf("%s has no unlocated form", name)
			}
			continue
		}
		h, ok := helm[name]
		if !ok {
			t.Errorf("Funcs has %s, which Helm does not", name)
			continue
		}
		// The same parameters and first result (sprig's certificate type
		// is its own); an error result may be added where sprig panics.
		a, b := reflect.TypeOf(f), reflect.TypeOf(h)
		same := a.NumIn() == b.NumIn() && a.IsVariadic() == b.IsVariadic() && a.Out(0).Kind() == b.Out(0).Kind()
		for i := 0; same && i < a.NumIn(); i++ {
			same = a.In(i) == b.In(i) || b.In(i).Name() == "certificate"
		}
		if !same || (a.NumOut() < b.NumOut()) {
			t.Errorf("%s: %s, Helm's %s", name, a, b)
		}
	}
	for fn := range rewritten {
		if !slices.Contains(specNames, fn) {
			t.Errorf("Rewrite locates %s, which Funcs does not replace", fn)
		}
	}
	for _, fn := range specNames {
		if !rewritten[fn] {
			t.Errorf("Funcs replaces %s, which Rewrite does not locate", fn)
		}
		if _, ok := funcs[LocatedName(fn)]; !ok {
			t.Errorf("no located %s", fn)
		}
	}
	// sprig's own list of functions that are not hermetic, and the rest of
	// Helm's map that draws randomness or reads the clock.
	for _, fn := range []string{"date", "date_in_zone", "now", "htmlDate", "htmlDateInZone", "dateInZone",
		"randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randBytes", "uuidv4", "getHostByName",
		"randInt", "shuffle", "genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
		"genSignedCert", "genSignedCertWithKey", "bcrypt", "htpasswd", "encryptAES", "ago", "durationRound", "lookup", "keys", "values"} {
		if _, ok := funcs[fn]; !ok {
			t.Errorf("Funcs does not replace %s", fn)
		}
	}
}

// BenchmarkFuncs: a typical mix of generator calls in one rendered file
// (passwords, a UUID, random bytes, an encryptAES, a certificate from a
// given ECDSA key), rewritten once, executed per iteration with a new
// Generator.
func BenchmarkFuncs(b *testing.B) {
	key := newTestGenerator().genPrivateKey(&call{fn: "k"}, "ecdsa")
	src := `{{- range $i := until 20 }}
p{{ $i }}: {{ randAlphaNum 32 | b64enc }}
{{- end }}
u: {{ uuidv4 }}
r: {{ randBytes 32 }}
e: {{ encryptAES "key" "text" }}
c: {{ (genSelfSignedCertWithKey "x" nil (list "a.example") 365 .Values.key).Cert | len }}
t: {{ now | date "2006" }}
`
	files := map[string]string{"c/templates/a.yaml": src}
	vals := map[string]any{"key": key}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := render(New(testSeed, testRelease, fixedClock(testNow)), files, vals, true); err != nil {
			b.Fatal(err)
		}
	}
}
