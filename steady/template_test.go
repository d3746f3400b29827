package steady

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	mrand "math/rand/v2"
	"strings"
	"testing"
)

// TestTemplate checks which values fit the template of two renders of a
// field: the shared text must be there, in order, and the gaps hold words
// and the punctuation one of the renders held there.
func TestTemplate(t *testing.T) {
	conf := func(pw, title string) string {
		return "[admin]\npassword = " + pw + "\ntitle = " + title + "\n"
	}
	cert := func(body string) string {
		return "-----BEGIN CERTIFICATE-----\n" + body + "\n-----END CERTIFICATE-----\n"
	}
	for _, tc := range []struct {
		desc string
		a, b string
		fits []string
		not  []string
	}{
		{
			desc: "a password beside a value",
			a:    conf("Xk2pQ9rT", "Shop"), b: conf("b7Yw1LmZ", "Shop"),
			fits: []string{conf("Pq8sR2tU", "Shop"), conf("", "Shop")},
			not: []string{
				conf("Pq8sR2tU", "Shop 2"), conf("Pq8sR2tU", "Sho"), "", conf("Pq8sR2tU", "Shop") + "x", "x" + conf("Pq8sR2tU", "Shop"),
				// A gap holds what the renders held there: one word,
				// not a line that a value added beside the password.
				conf("a b", "Shop"), conf("Pq8sR2tU\nport = 80", "Shop"),
			},
		},
		{
			desc: "a whole value",
			a:    "Xk2pQ9rT", b: "b7Yw1LmZ",
			fits: []string{"anything", ""},
		},
		{
			desc: "base64 with + / and padding",
			a:    "a+b/cd3F==", b: "Q9/x+Yz1==",
			fits: []string{"zz+9/Kd==", "ZmFrZQ=", "ZmFr"},
		},
		{
			desc: "a certificate, line by line",
			a:    cert("MIIBszCCAVmgAwIBAgIQ\nabcd+ef/12"), b: cert("MIIBszCCAVmgAwIBAgIR\nzz99+ab/cd"),
			fits: []string{cert("MIIBxyz\nq")},
			not:  []string{strings.Replace(cert("MIIBxyz\nq"), "CERTIFICATE", "PRIVATE KEY", 1)},
		},
		{
			desc: "two generated values",
			a:    "user: app\npass: AAAA\ntoken: CCCC\nend", b: "user: app\npass: BBBB\ntoken: DDDD\nend",
			fits: []string{"user: app\npass: 1\ntoken: 2\nend"},
			not:  []string{"user: web\npass: 1\ntoken: 2\nend", "user: app\npass: 1\ntoken: 2\nend2", "user: app\npass: 1\ntokens: 2\nend"},
		},
		{
			desc: "a uuidv4",
			a:    "2c5ea4c0-4067-41d4-9f2d-5a8a2b1f0e11", b: "a8098c1a-f86e-41d4-8fd2-6a6b2b1e9c07",
			fits: []string{"a8098c1a-f86e-41d4-8fd2-6a6b2b1e9c07", "0e3f5c2a-1b2c-41d4-a1b2-c3d4e5f60718"},
			// The groups that happen to be equal must be equal again.
			not: []string{"0e3f5c2a-1b2c-4aaa-a1b2-c3d4e5f60718"},
		},
		{
			desc: "a name with a random suffix",
			a:    "r-test-ab1cd", b: "r-test-x9yz2",
			fits: []string{"r-test-qq7"},
			not:  []string{"web-test-qq7", "r-test-qq7-x"},
		},
		{
			desc: "a value only in one render",
			a:    "a b", b: "a",
			fits: []string{"a c", "a"},
			not:  []string{"b c"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tm := newTemplate(tc.a, tc.b)
			for _, s := range append([]string{tc.a, tc.b}, tc.fits...) {
				if !tm.fits(s) {
					t.Errorf("template of %q and %q (%q) does not fit %q", tc.a, tc.b, tm.lits, s)
				}
			}
			for _, s := range tc.not {
				if tm.fits(s) {
					t.Errorf("template of %q and %q (%q) fits %q", tc.a, tc.b, tm.lits, s)
				}
			}
		})
	}
}

// TestTemplateTooBig checks that two renders too big to align give a
// template that fits nothing: the field is compared whole.
func TestTemplateTooBig(t *testing.T) {
	var a, b strings.Builder
	for i := range 2000 {
		a.WriteString("x" + strings.Repeat("a", i%7) + " ")
		b.WriteString("y" + strings.Repeat("b", i%5) + " ")
	}
	tm := newTemplate(a.String(), b.String())
	if tm.fits(a.String()) || tm.fits("") {
		t.Errorf("a template of renders too big to align fits a value")
	}
}

func TestTokens(t *testing.T) {
	for in, want := range map[string][]string{
		"":                     nil,
		"password = a+b/c==\n": {"password", " ", "=", " ", "a+b/c==", "\n"},
		"r-test-ab1.x_y":       {"r", "-", "test", "-", "ab1.x_y"},
		"ü:é\xff":              {"ü", ":", "é", "\xff"},
	} {
		got := tokens(in)
		if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("tokens(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTemplateGenerated checks that a third value made the way charts make
// them (Sprig's genPrivateKey and randAlphaNum, as PEM text and base64)
// fits the template of two others, every time: a field that only a
// generator fills must never look changed. (A generated value that
// punctuation splits into short pieces, such as uuidv4's "4xxx" group, can
// line up by chance with the other render's, about once in 3,000: then the
// new output is written, a restart and never a hidden change.)
func TestTemplateGenerated(t *testing.T) {
	pemKey := func() string {
		k, err := rsa.GenerateKey(rand.Reader, 1024)
		if err != nil {
			t.Fatal(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	}
	alnum := func() string {
		const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
		b := make([]byte, 16)
		for i := range b {
			b[i] = chars[mrand.IntN(len(chars))]
		}
		return string(b)
	}
	b64 := func(f func() string) func() string {
		return func() string { return base64.StdEncoding.EncodeToString([]byte(f())) }
	}
	conf := func() string {
		return "[admin]\nuser = admin\npassword = " + alnum() + "\nsecret_key = " + b64(alnum)() + "\n"
	}
	for name, gen := range map[string]func() string{
		"PEM key":            pemKey,
		"base64 of PEM key":  b64(pemKey),
		"randAlphaNum":       alnum,
		"config file":        conf,
		"base64 of a config": b64(conf),
	} {
		t.Run(name, func(t *testing.T) {
			n := 20
			if strings.Contains(name, "PEM") {
				n = 5 // a key takes a while, and its lines never line up
			}
			for range n {
				a, b, c := gen(), gen(), gen()
				if a == b {
					continue
				}
				if tm := newTemplate(a, b); !tm.fits(c) {
					t.Fatalf("template of\n%s\nand\n%s\n(%q) does not fit\n%s", a, b, tm.lits, c)
				}
			}
		})
	}
}
