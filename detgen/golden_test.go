package detgen

import (
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// everyCall is a chart calling every replaced function once or more, with
// a helper included from two files, a call in a tpl string, and a call in
// a subchart.
var everyCall = map[string]string{
	"mychart/templates/_helpers.tpl": `{{- define "mychart.password" -}}
{{ randAlphaNum 20 }}
{{- end -}}`,
	"mychart/templates/secret.yaml": `alnum: {{ randAlphaNum 16 }}
alpha: {{ randAlpha 16 }}
numeric: {{ randNumeric 16 }}
ascii: {{ randAscii 16 | quote }}
bytes: {{ randBytes 24 }}
int: {{ randInt 1000 2000000 }}
uuid: {{ uuidv4 }}
shuffle: {{ shuffle "abcdefghijklmnopqrstuvwxyz" }}
helper: {{ include "mychart.password" . }}
bcrypt: {{ bcrypt "hunter2" }}
htpasswd: {{ htpasswd "admin" "hunter2" }}
aes: {{ encryptAES "0123456789abcdef0123456789abcdef" "attack at dawn" }}
tpl: {{ tpl "{{ randAlpha 8 }}" . }}
keys: {{ keys (dict "b" 1 "a" 2 "c" 3) | join "," }}
`,
	"mychart/templates/keys.yaml": `{{ genPrivateKey "ecdsa" }}
{{ genPrivateKey "ed25519" }}
`,
	"mychart/templates/tls.yaml": `{{- $ca := genCA "demo-ca" 365 -}}
{{- $leaf := genSignedCert "demo.apps.svc" (list "10.0.0.1") (list "demo" "demo.apps.svc") 90 $ca -}}
{{- $self := genSelfSignedCert "self" nil (list "self.example") 30 -}}
{{- $key := genPrivateKey "ecdsa" -}}
{{- $withKey := genSelfSignedCertWithKey "withkey" nil nil 10 $key -}}
{{- $caWithKey := genCAWithKey "ca-with-key" 100 $key -}}
{{- $leafWithKey := genSignedCertWithKey "leaf-with-key" nil (list "x.example") 50 $caWithKey (genPrivateKey "ed25519") -}}
{{ $ca.Cert }}{{ $ca.Key }}{{ $leaf.Cert }}{{ $leaf.Key }}{{ $self.Cert }}{{ $withKey.Cert }}{{ $caWithKey.Cert }}{{ $leafWithKey.Cert }}{{ $leafWithKey.Key }}
helper: {{ include "mychart.password" . }}
`,
	"mychart/charts/sub/templates/sub.yaml": `sub: {{ randAlphaNum 16 }}
`,
}

// slowCalls adds the two slow key types (RSA 4096, DSA) for the golden file
// only.
var slowCalls = map[string]string{
	"mychart/templates/slowkeys.yaml": `{{ genPrivateKey "rsa" }}
{{ genPrivateKey "dsa" }}
`,
}

// dump is a render's files in Helm's order, each under a "# Source:" line.
func dump(out map[string]string) string {
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString("# Source: " + n + "\n" + out[n])
	}
	return b.String()
}

func withSlow() map[string]string {
	files := map[string]string{}
	for k, v := range everyCall {
		files[k] = v
	}
	for k, v := range slowCalls {
		files[k] = v
	}
	return files
}

// TestGoldenValues: a fixed seed, release and clock give exactly the
// values in testdata/golden/every.golden, which an earlier process on
// another machine or Go version wrote: any change of the derivation, an
// encoding, det-keygen or Go's crypto shows here. Rendering again gives the
// same bytes, and so does a render that reads every RSA and DSA key from
// the key cache the first one filled.
func TestGoldenValues(t *testing.T) {
	t.Parallel()
	files := withSlow()
	keys := newMemKeys()
	cold := newTestGenerator()
	cold.SetKeyCache(keys)
	got := dump(mustRender(t, cold, files, nil))
	golden(t, "golden/every.golden", got)
	warm := newTestGenerator()
	warm.SetKeyCache(keys)
	if again := dump(mustRender(t, warm, files, nil)); again != got {
		t.Error("a render with the keys from the cache differs")
	}
	if c, w := cold.KeyCacheStats(), warm.KeyCacheStats(); c.Derived < 5 || w != (KeyCacheStats{Hits: c.Derived}) {
		t.Errorf("key cache: cold %+v, warm %+v; want at least 5 derived (RSA 2048, 4096, DSA), then each read", c, w)
	}
	if again := dump(mustRender(t, newTestGenerator(), everyCall, nil)); again != dump(mustRender(t, newTestGenerator(), everyCall, nil)) {
		t.Error("two renders of the same chart differ")
	}
}

// TestAcrossProcesses: a child process (this test binary) renders the same
// chart with the same seed to the same bytes.
func TestAcrossProcesses(t *testing.T) {
	t.Parallel()
	if os.Getenv("DETGEN_CHILD") == "1" {
		_, _ = os.Stdout.WriteString("<<<" + dump(mustRender(t, newTestGenerator(), everyCall, nil)) + ">>>")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DETGEN_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	_, rest, _ := strings.Cut(string(out), "<<<")
	child, _, ok := strings.Cut(rest, ">>>")
	if !ok {
		t.Fatalf("child printed no render: %q", out)
	}
	if want := dump(mustRender(t, newTestGenerator(), everyCall, nil)); child != want {
		t.Errorf("the child process rendered other bytes:\n%s\nwant\n%s", child, want)
	}
}
