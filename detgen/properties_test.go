package detgen

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"strings"
	"testing"
)

// values parses "key: value" lines of a render into a map, failing on a
// key seen twice.
func values(t *testing.T, out map[string]string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, text := range out {
		for _, line := range strings.Split(text, "\n") {
			k, v, ok := strings.Cut(line, ": ")
			if !ok {
				continue
			}
			if _, dup := m[k]; dup {
				t.Fatalf("key %q twice in the render", k)
			}
			m[k] = v
		}
	}
	return m
}

// TestInputsChangeOutput: changing any one argument of a generator (given
// through values, so the call's line and identity stay) changes its output,
// and a string output is not a prefix of the other.
func TestInputsChangeOutput(t *testing.T) {
	t.Parallel()
	ecKey := `{{ $k := genPrivateKey .Values.kt }}`
	for _, tc := range []struct {
		desc   string
		tmpl   string
		base   map[string]any
		change map[string]any
	}{
		{"randAlphaNum count", `{{ randAlphaNum .Values.n }}`, map[string]any{"n": 16}, map[string]any{"n": 17}},
		{"randAlpha count", `{{ randAlpha .Values.n }}`, map[string]any{"n": 16}, map[string]any{"n": 17}},
		{"randNumeric count", `{{ randNumeric .Values.n }}`, map[string]any{"n": 16}, map[string]any{"n": 17}},
		{"randAscii count", `{{ randAscii .Values.n }}`, map[string]any{"n": 16}, map[string]any{"n": 17}},
		{"randBytes count", `{{ randBytes .Values.n }}`, map[string]any{"n": 15}, map[string]any{"n": 18}},
		{"randInt min", `{{ randInt .Values.lo .Values.hi }}`, map[string]any{"lo": 0, "hi": 1 << 40}, map[string]any{"lo": 1, "hi": 1 << 40}},
		{"randInt max", `{{ randInt .Values.lo .Values.hi }}`, map[string]any{"lo": 0, "hi": 1 << 40}, map[string]any{"lo": 0, "hi": 1<<40 + 1}},
		{"shuffle text", `{{ shuffle .Values.s }}`, map[string]any{"s": "abcdefghijklmnopqrstuvwxyz"}, map[string]any{"s": "abcdefghijklmnopqrstuvwxyZ"}},
		{"genPrivateKey type", `{{ genPrivateKey .Values.kt }}`, map[string]any{"kt": "ecdsa"}, map[string]any{"kt": "ed25519"}},
		{"bcrypt password", `{{ bcrypt .Values.p }}`, map[string]any{"p": "one"}, map[string]any{"p": "two"}},
		{"htpasswd user", `{{ htpasswd .Values.u .Values.p }}`, map[string]any{"u": "a", "p": "pw"}, map[string]any{"u": "b", "p": "pw"}},
		{"htpasswd password", `{{ htpasswd .Values.u .Values.p }}`, map[string]any{"u": "a", "p": "pw"}, map[string]any{"u": "a", "p": "pw2"}},
		{"encryptAES key", `{{ encryptAES .Values.k .Values.p }}`, map[string]any{"k": "k1", "p": "text"}, map[string]any{"k": "k2", "p": "text"}},
		{"encryptAES plaintext", `{{ encryptAES .Values.k .Values.p }}`, map[string]any{"k": "k1", "p": "text"}, map[string]any{"k": "k1", "p": "texu"}},
		{"self-signed CN", ecKey + `{{ (genSelfSignedCertWithKey .Values.cn .Values.ips .Values.dns .Values.days $k).Cert }}`,
			map[string]any{"kt": "ecdsa", "cn": "a", "ips": []any{"10.0.0.1"}, "dns": []any{"a.example"}, "days": 30},
			map[string]any{"kt": "ecdsa", "cn": "b", "ips": []any{"10.0.0.1"}, "dns": []any{"a.example"}, "days": 30}},
		{"self-signed IPs", ecKey + `{{ (genSelfSignedCertWithKey .Values.cn .Values.ips .Values.dns .Values.days $k).Cert }}`,
			map[string]any{"kt": "ecdsa", "cn": "a", "ips": []any{"10.0.0.1"}, "dns": []any{"a.example"}, "days": 30},
			map[string]any{"kt": "ecdsa", "cn": "a", "ips": []any{"10.0.0.2"}, "dns": []any{"a.example"}, "days": 30}},
		{"self-signed DNS names", ecKey + `{{ (genSelfSignedCertWithKey .Values.cn .Values.ips .Values.dns .Values.days $k).Cert }}`,
			map[string]any{"kt": "ecdsa", "cn": "a", "ips": []any{"10.0.0.1"}, "dns": []any{"a.example"}, "days": 30},
			map[string]any{"kt": "ecdsa", "cn": "a", "ips": []any{"10.0.0.1"}, "dns": []any{"a.example", "b.example"}, "days": 30}},
		{"self-signed days", ecKey + `{{ (genSelfSignedCertWithKey .Values.cn .Values.ips .Values.dns .Values.days $k).Cert }}`,
			map[string]any{"kt": "ecdsa", "cn": "a", "ips": []any{"10.0.0.1"}, "dns": []any{"a.example"}, "days": 30},
			map[string]any{"kt": "ecdsa", "cn": "a", "ips": []any{"10.0.0.1"}, "dns": []any{"a.example"}, "days": 31}},
		{"self-signed key type", ecKey + `{{ (genSelfSignedCertWithKey .Values.cn .Values.ips .Values.dns .Values.days $k).Cert }}`,
			map[string]any{"kt": "ecdsa", "cn": "a", "ips": []any{}, "dns": []any{}, "days": 30},
			map[string]any{"kt": "ed25519", "cn": "a", "ips": []any{}, "dns": []any{}, "days": 30}},
		{"CA with key CN", ecKey + `{{ (genCAWithKey .Values.cn .Values.days $k).Cert }}`,
			map[string]any{"kt": "ecdsa", "cn": "a", "days": 30}, map[string]any{"kt": "ecdsa", "cn": "b", "days": 30}},
		{"signed by another CA", ecKey + `{{ $ca := genCAWithKey .Values.ca 30 $k }}{{ (genSignedCertWithKey "leaf" nil nil 30 $ca $k).Cert }}`,
			map[string]any{"kt": "ecdsa", "ca": "ca1"}, map[string]any{"kt": "ecdsa", "ca": "ca2"}},
		{"signed cert names", ecKey + `{{ $ca := genCAWithKey "ca" 30 $k }}{{ (genSignedCertWithKey "leaf" nil .Values.dns 30 $ca $k).Cert }}`,
			map[string]any{"kt": "ecdsa", "dns": []any{"a"}}, map[string]any{"kt": "ecdsa", "dns": []any{"b"}}},
		{"genCA CN (RSA key derived)", `{{ $c := genCA .Values.cn 30 }}{{ $c.Cert }}{{ $c.Key }}`,
			map[string]any{"cn": "a"}, map[string]any{"cn": "b"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			files := map[string]string{"c/templates/a.yaml": tc.tmpl}
			a := mustRender(t, newTestGenerator(), files, tc.base)["c/templates/a.yaml"]
			b := mustRender(t, newTestGenerator(), files, tc.change)["c/templates/a.yaml"]
			if a == "" || strings.HasPrefix(b, a) || strings.HasPrefix(a, b) {
				t.Errorf("with %v: %q\nwith %v: %q\nwant outputs that differ, neither a prefix of the other", tc.base, a, tc.change, b)
			}
		})
	}
}

// TestShufflePermutationDepends: the permutation itself, not only the
// letters, changes with the text shuffled.
func TestShufflePermutationDepends(t *testing.T) {
	t.Parallel()
	files := map[string]string{"c/templates/a.yaml": `{{ shuffle .Values.s }}`}
	perm := func(s string) string {
		out := mustRender(t, newTestGenerator(), files, map[string]any{"s": s})["c/templates/a.yaml"]
		var p []string
		for _, r := range out {
			p = append(p, fmt.Sprint(strings.IndexRune(s, r)))
		}
		return strings.Join(p, ",")
	}
	if a, b := perm("abcdefghijklmnop"), perm("bcdefghijklmnopq"); a == b {
		t.Errorf("shuffle of two texts used the same permutation %s", a)
	}
}

// trackedChart is a chart whose generated values are labelled v1...v6, for
// the edits of TestUnrelatedEditsKeepValues.
var trackedChart = map[string]string{
	"c/templates/_helpers.tpl": `{{- define "c.pw" -}}{{ randAlphaNum 12 }}{{- end -}}`,
	"c/templates/secret.yaml": `v1: {{ randAlphaNum 16 }}
v2: {{ uuidv4 }}
v3: {{ include "c.pw" . }}
v4: {{ randBytes 12 }}
`,
	"c/templates/other.yaml": `v5: {{ randAlpha 10 }}
v6: {{ encryptAES "k" "plain" }}
v7: {{ tpl "{{ randAlpha 9 }}" . }}
`,
}

// TestUnrelatedEditsKeepValues: adding, removing or reordering unrelated
// lines, files and generator calls leaves the other values as they were.
func TestUnrelatedEditsKeepValues(t *testing.T) {
	t.Parallel()
	base := values(t, mustRender(t, newTestGenerator(), trackedChart, nil))
	if len(base) != 7 {
		t.Fatalf("base render has %d values, want 7: %v", len(base), base)
	}
	edit := func(f func(m map[string]string)) map[string]string {
		m := maps.Clone(trackedChart)
		f(m)
		return m
	}
	for _, tc := range []struct {
		desc  string
		files map[string]string
	}{
		{"lines added above", edit(func(m map[string]string) {
			m["c/templates/secret.yaml"] = "# a comment\n\n{{/* and a template comment */}}\n" + m["c/templates/secret.yaml"]
		})},
		{"lines added between", edit(func(m map[string]string) {
			m["c/templates/secret.yaml"] = strings.Replace(m["c/templates/secret.yaml"], "v2:", "x: 1\ny: 2\nv2:", 1)
		})},
		{"an unrelated generator call added first", edit(func(m map[string]string) {
			m["c/templates/secret.yaml"] = "n1: {{ randAlphaNum 16 }} new\nn2: {{ uuidv4 }}\n" + m["c/templates/secret.yaml"]
		})},
		{"lines reordered", edit(func(m map[string]string) {
			lines := strings.Split(m["c/templates/secret.yaml"], "\n")
			lines[0], lines[3] = lines[3], lines[0]
			m["c/templates/secret.yaml"] = strings.Join(lines, "\n")
		})},
		{"a call removed", edit(func(m map[string]string) {
			m["c/templates/secret.yaml"] = strings.Replace(m["c/templates/secret.yaml"], "v2: {{ uuidv4 }}\n", "", 1)
		})},
		{"a file added before and one after", edit(func(m map[string]string) {
			m["c/templates/aaa.yaml"] = "a1: {{ randAlphaNum 16 }}\na2: {{ uuidv4 }}\na3: {{ tpl \"{{ randAlpha 9 }}\" . }}\n"
			m["c/templates/zzz.yaml"] = "z1: {{ randAlphaNum 16 }}\nz2: {{ include \"c.pw\" . }}\n"
			m["c/charts/sub/templates/s.yaml"] = "s1: {{ randAlphaNum 16 }}\n"
		})},
		{"a file removed", edit(func(m map[string]string) { delete(m, "c/templates/other.yaml") })},
		{"another define in the partial", edit(func(m map[string]string) {
			m["c/templates/_helpers.tpl"] = `{{- define "c.other" -}}{{ randAlphaNum 12 }}{{- end -}}` + "\n" + m["c/templates/_helpers.tpl"]
		})},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := values(t, mustRender(t, newTestGenerator(), tc.files, nil))
			n := 0
			for k, v := range base {
				if g, ok := got[k]; ok {
					n++
					if g != v {
						t.Errorf("%s = %q, was %q", k, g, v)
					}
				}
			}
			if n < 3 {
				t.Errorf("only %d of the values are left to compare", n)
			}
			for k, v := range got {
				if _, ok := base[k]; !ok {
					for bk, bv := range base {
						if bv == v {
							t.Errorf("new %s took %s's value %q", k, bk, v)
						}
					}
				}
			}
		})
	}
}

// TestIdenticalCallsByOrder documents the known limit: equal calls on
// identical lines of one file take their values by order, so removing the
// first hands its value to the second.
func TestIdenticalCallsByOrder(t *testing.T) {
	t.Parallel()
	two := mustRender(t, newTestGenerator(), map[string]string{"c/templates/a.yaml": "{{ uuidv4 }}\n{{ uuidv4 }}\n"}, nil)["c/templates/a.yaml"]
	one := mustRender(t, newTestGenerator(), map[string]string{"c/templates/a.yaml": "{{ uuidv4 }}\n"}, nil)["c/templates/a.yaml"]
	first, second, _ := strings.Cut(strings.TrimSpace(two), "\n")
	if first == second {
		t.Fatalf("two equal calls gave one value %q", first)
	}
	if strings.TrimSpace(one) != first {
		t.Errorf("the remaining call got %q, want the first's %q", one, first)
	}
}

// shareChart renders many kinds of value, for TestReleasesAndSeedsShareNothing.
var shareChart = map[string]string{
	"c/templates/a.yaml": `a: {{ randAlphaNum 24 }}
b: {{ uuidv4 }}
c: {{ randBytes 24 }}
d: {{ encryptAES "k" "same text" }}
e: {{ htpasswd "u" "same" }}
f: {{ genPrivateKey "ecdsa" | b64enc }}
g: {{ genPrivateKey "ed25519" | b64enc }}
h: {{ randNumeric 30 }}
i: {{ tpl "{{ randAlphaNum 24 }}" . }}
j: {{ $k := genPrivateKey "ecdsa" }}{{ (genSelfSignedCertWithKey "x" nil nil 30 $k).Cert | b64enc }}
`,
}

// TestReleasesAndSeedsShareNothing: another release name, namespace or
// seed shares no generated value with the first.
func TestReleasesAndSeedsShareNothing(t *testing.T) {
	t.Parallel()
	other := testSeed
	other[31] ^= 1
	base := values(t, mustRender(t, New(testSeed, testRelease, fixedClock(testNow)), shareChart, nil))
	for _, tc := range []struct {
		desc string
		g    *Generator
	}{
		{"release name", New(testSeed, Release{Name: "demo2", Namespace: "apps"}, fixedClock(testNow))},
		{"namespace", New(testSeed, Release{Name: "demo", Namespace: "apps2"}, fixedClock(testNow))},
		{"name and namespace boundary", New(testSeed, Release{Name: "demoa", Namespace: "pps"}, fixedClock(testNow))},
		{"seed", New(other, testRelease, fixedClock(testNow))},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := values(t, mustRender(t, tc.g, shareChart, nil))
			for k, v := range got {
				for bk, bv := range base {
					if v == bv || (len(v) > 40 && strings.Contains(bv, v[len(v)/2:len(v)/2+20])) {
						t.Errorf("%s = %q shares with the first render's %s", k, v, bk)
					}
				}
			}
		})
	}
}

// TestNoSecretInOutput: no rendered value, record or error shows the seed
// (raw, hex, base64) or a derived secret.
func TestNoSecretInOutput(t *testing.T) {
	t.Parallel()
	g := newTestGenerator()
	out := dump(mustRender(t, g, shareChart, nil))
	var texts []string
	texts = append(texts, out, fmt.Sprintf("%+v %+v %+v", g.Certificates(), g.Varying(), g))
	for _, bad := range []string{
		`{{ randInt 3 1 }}`, `{{ randBytes -1 }}`, `{{ genCA "x" 0 }}`, `{{ genCAWithKey "x" 3 "junk" }}`,
		`{{ _dp_uuidv4 "forged" }}`, `{{ genSignedCert "x" nil nil 3 (buildCustomCert "eA==" "eA==") }}`,
	} {
		_, err := render(newTestGenerator(), map[string]string{"c/templates/bad.yaml": bad}, nil, true)
		if err == nil {
			t.Errorf("rendering %s gave no error", bad)
			continue
		}
		texts = append(texts, err.Error())
	}
	c := &call{fn: "randAlphaNum"}
	secrets := map[string][]byte{
		"seed":           testSeed[:],
		"derived secret": g.derive(c, purposeValue, 32),
		"derived key":    g.derive(c, purposeKey, 32),
	}
	for _, text := range texts {
		for what, s := range secrets {
			for _, form := range []string{string(s), hex.EncodeToString(s), base64.StdEncoding.EncodeToString(s), base64.RawURLEncoding.EncodeToString(s), fmt.Sprintf("%d", s)} {
				if strings.Contains(text, form[:len(form)/2]) {
					t.Errorf("%s shows up in %.200q", what, text)
				}
			}
		}
	}
}

// TestTplCalls: calls Rewrite cannot see (in tpl strings) are still
// deterministic, differ by occurrence, and are counted per top-level file.
func TestTplCalls(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"c/templates/a.yaml": "a1: {{ tpl \"{{ randAlphaNum 10 }}\" . }}\na2: {{ tpl \"{{ randAlphaNum 10 }}\" . }}\n",
		"c/templates/b.yaml": "b1: {{ tpl \"{{ randAlphaNum 10 }}\" . }}\n",
	}
	v1 := values(t, mustRender(t, newTestGenerator(), files, nil))
	v2 := values(t, mustRender(t, newTestGenerator(), files, nil))
	if !maps.Equal(v1, v2) {
		t.Errorf("two renders: %v and %v", v1, v2)
	}
	if v1["a1"] == v1["a2"] || v1["a1"] == v1["b1"] || len(v1["a1"]) != 10 {
		t.Errorf("tpl values %v: want three different 10-character values", v1)
	}
}

// TestForgedIdentity: a located function called with something that is
// not an identity Rewrite writes is an error, not a value.
func TestForgedIdentity(t *testing.T) {
	t.Parallel()
	for _, src := range []string{`{{ _dp_randAlphaNum "nope" 3 }}`, `{{ _dp_genCA "v1|x|y|z" "a" 3 }}`, `{{ _dp_now "v1|0|k|t" }}`} {
		_, err := render(newTestGenerator(), map[string]string{"c/templates/a.yaml": src}, nil, false)
		if err == nil || !strings.Contains(err.Error(), "malformed call identity") {
			t.Errorf("render(%s) = %v, want a malformed call identity error", src, err)
		}
	}
}
