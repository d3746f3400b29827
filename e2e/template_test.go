//go:build unix

package e2e

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// newSeed writes a seed with `digestpin seed > FILE` and returns FILE.
func newSeed(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "seed")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(digestpinBin(t), "seed")
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = f, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("digestpin seed: %v: %s", err, stderr.String())
	}
	return p
}

// TestTemplateLikeHelmTemplate: for a chart without generators, digestpin
// template's output is `helm template … | digestpin` under Helm 4.3.1,
// byte for byte, with each of helm template's flags the chart reacts to,
// and with pinning flags.
func TestTemplateLikeHelmTemplate(t *testing.T) {
	t.Parallel()
	bin, h4 := digestpinBin(t), helm4(t)
	reg := testregistry.New(t)
	for _, img := range []string{"app:1.0", "db:1.0", "tools:1.0"} {
		reg.PushImage(t, img)
	}
	chart := filepath.Join(repoRoot(t), "testdata", "chart")
	seed := newSeed(t)
	sets := []string{
		"--set", "image.app=" + reg.Ref("app:1.0"),
		"--set", "image.db=" + reg.Ref("db:1.0"),
		"--set", "image.tools=" + reg.Ref("tools:1.0"),
	}
	for _, tc := range []struct {
		name string
		helm []string // helm template's arguments after the chart
		pin  []string // digestpin's flags
	}{
		{name: "default"},
		{name: "namespace", helm: []string{"-n", "prod"}},
		{name: "show-only", helm: []string{"--show-only", "templates/deployment.yaml"}},
		{name: "skip-tests", helm: []string{"--skip-tests"}},
		{name: "no-hooks", helm: []string{"--no-hooks"}},
		{name: "kube-version", helm: []string{"--kube-version", "1.30.4", "--api-versions", "example.com/v1"}},
		{name: "values", helm: []string{"-f", writeValues(t, "replicas: 3\n"), "--set-string", "x=1"}},
		{name: "mode digest", pin: []string{"--mode", "digest"}},
		{name: "annotate", pin: []string{"--mode=annotate", "--checksum-annotation", "example.com/images"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := helmHome(t, "")
			helmArgs := append(append([]string{"template", "demo", chart}, sets...), tc.helm...)
			rendered := mustRun(t, env, h4, helmArgs...)
			want := runCmd(t, "", []byte(rendered), env, bin, tc.pin...)
			if want.err != nil {
				t.Fatalf("helm template | digestpin: %v\n%s", want.err, want.stderr)
			}
			args := append(append(append([]string{"template", "demo", chart}, sets...), tc.helm...), "--seed-file", seed)
			got := runCmd(t, "", nil, env, bin, append(args, tc.pin...)...)
			if got.err != nil {
				t.Fatalf("digestpin template: %v\n%s", got.err, got.stderr)
			}
			if got.stdout != want.stdout {
				t.Errorf("digestpin template differs from helm template | digestpin:\n--- got\n%s\n--- want\n%s", got.stdout, want.stdout)
			}
			if !strings.Contains(got.stdout, "@sha256:") && !strings.Contains(strings.Join(tc.pin, " "), "annotate") {
				t.Errorf("nothing pinned:\n%s", got.stdout)
			}
		})
	}
}

// writeValues writes a values file and returns its path.
func writeValues(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// generated renders testdata/generated (a webhook certificate, passwords,
// htpasswd, a hash of both in checksum/config) with digestpin template.
type generated struct {
	t    *testing.T
	bin  string
	reg  *testregistry.Registry
	seed string
}

func (g generated) render(name string, extra ...string) result {
	g.t.Helper()
	chart := filepath.Join(repoRoot(g.t), "testdata", "generated")
	args := append([]string{"template", name, chart, "-n", "ns", "--seed-file", g.seed, "--set", "image=" + g.reg.Ref("app:1.0")}, extra...)
	return runCmd(g.t, "", nil, helmHome(g.t, ""), g.bin, args...)
}

func (g generated) mustRender(name string, extra ...string) map[string]*yaml.RNode {
	g.t.Helper()
	res := g.render(name, extra...)
	if res.err != nil {
		g.t.Fatalf("digestpin template %s %q: %v\n%s", name, extra, res.err, res.stderr)
	}
	return objects(g.t, res.stdout)
}

// objects maps "Kind/name" to each object of a stream.
func objects(t *testing.T, stream string) map[string]*yaml.RNode {
	t.Helper()
	out := map[string]*yaml.RNode{}
	for _, d := range regexp.MustCompile(`(?m)^---\n`).Split(stream, -1) {
		if strings.TrimSpace(d) == "" {
			continue
		}
		n, err := yaml.Parse(d)
		if err != nil {
			t.Fatalf("parsing %q: %v", d, err)
		}
		if n.IsNilOrEmpty() {
			continue
		}
		out[n.GetKind()+"/"+n.GetName()] = n
	}
	return out
}

// field is the string at path in the object key of objs.
func field(t *testing.T, objs map[string]*yaml.RNode, key string, path ...string) string {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		t.Fatalf("no %s in the output", key)
	}
	n, err := o.Pipe(yaml.Lookup(path...))
	if err != nil || n == nil {
		t.Fatalf("%s has no %v", key, path)
	}
	return yaml.GetValue(n)
}

// TestTemplateDeterministic proves the properties of deterministic renders
// through the binary, across processes: the same seed, chart and values
// give the same bytes; a change of a generator's input gives a new value
// there and nowhere else; another release, namespace or seed shares no
// generated value; the certificates verify and are valid now.
func TestTemplateDeterministic(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	g := generated{t: t, bin: digestpinBin(t), reg: reg, seed: newSeed(t)}

	first := g.render("r")
	if first.err != nil {
		t.Fatalf("digestpin template: %v\n%s", first.err, first.stderr)
	}
	if again := g.render("r"); again.stdout != first.stdout {
		t.Fatalf("two renders with the same seed differ:\n%s\n---\n%s", first.stdout, again.stdout)
	}
	base := objects(t, first.stdout)
	secret := func(objs map[string]*yaml.RNode, key string) string {
		return field(t, objs, "Secret/r-app", "data", key)
	}
	tlsCrt := field(t, base, "Secret/r-tls", "data", "tls.crt")
	checksum := field(t, base, "Deployment/r-webhook", "spec", "template", "metadata", "annotations", "checksum/config")

	t.Run("cluster domain reaches the certificate only", func(t *testing.T) {
		objs := g.mustRender("r", "--set", "clusterDomain=example.internal")
		if field(t, objs, "Secret/r-tls", "data", "tls.crt") == tlsCrt {
			t.Error("a new clusterDomain kept the old certificate")
		}
		names := certNames(t, field(t, objs, "Secret/r-tls", "data", "tls.crt"))
		if !strings.Contains(strings.Join(names, " "), "r-webhook.ns.svc.example.internal") {
			t.Errorf("certificate names %v lack the new domain", names)
		}
		if secret(objs, "password") != secret(base, "password") {
			t.Error("a change to the certificate's names changed an unrelated password")
		}
		if field(t, objs, "Deployment/r-webhook", "spec", "template", "metadata", "annotations", "checksum/config") == checksum {
			t.Error("the pod template's checksum/config kept the old certificate's hash")
		}
	})
	t.Run("validity reaches the certificate", func(t *testing.T) {
		objs := g.mustRender("r", "--set", "certDays=30")
		crt := parseCert(t, field(t, objs, "Secret/r-tls", "data", "tls.crt"))
		if d := crt.NotAfter.Sub(crt.NotBefore); d != 30*24*time.Hour {
			t.Errorf("certificate valid for %v, want 30 days", d)
		}
	})
	t.Run("a value in a base64 config changes it", func(t *testing.T) {
		objs := g.mustRender("r", "--set", "title=New title")
		cfg, _ := base64.StdEncoding.DecodeString(secret(objs, "config"))
		if !strings.Contains(string(cfg), "title = New title") {
			t.Errorf("config %q lacks the new title", cfg)
		}
		if secret(objs, "sealed") == secret(base, "sealed") {
			t.Error("encryptAES of a new value kept the old ciphertext")
		}
		if secret(objs, "password") != secret(base, "password") {
			t.Error("a new title changed the password")
		}
	})
	t.Run("htpasswd of another user is new", func(t *testing.T) {
		objs := g.mustRender("r", "--set", "user=root")
		if secret(objs, "htpasswd") == secret(base, "htpasswd") {
			t.Error("htpasswd of a new user kept the old hash")
		}
	})
	t.Run("release, namespace and seed share nothing", func(t *testing.T) {
		other := generated{t: t, bin: g.bin, reg: reg, seed: newSeed(t)}
		for desc, objs := range map[string]map[string]*yaml.RNode{
			"another seed":      other.mustRender("r"),
			"another namespace": g.mustRender("r", "-n", "other"),
		} {
			for _, k := range []string{"password", "replication-password", "htpasswd", "token", "sealed"} {
				if secret(objs, k) == secret(base, k) {
					t.Errorf("%s: %s is the same", desc, k)
				}
			}
		}
		objs := g.mustRender("s")
		if field(t, objs, "Secret/s-app", "data", "password") == secret(base, "password") {
			t.Error("another release: the same password")
		}
	})
	t.Run("two calls, two values", func(t *testing.T) {
		if secret(base, "password") == secret(base, "replication-password") {
			t.Error("two calls of the same helper gave the same password")
		}
	})
	t.Run("certificates verify", func(t *testing.T) {
		ca := parseCert(t, field(t, base, "Secret/r-tls", "data", "ca.crt"))
		leaf := parseCert(t, tlsCrt)
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "r-webhook.ns.svc"}); err != nil {
			t.Errorf("the webhook certificate does not verify against its CA: %v", err)
		}
		if now := time.Now(); now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
			t.Errorf("the certificate is not valid now: %v to %v", leaf.NotBefore, leaf.NotAfter)
		}
		dir := t.TempDir()
		caFile, leafFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "leaf.pem")
		writePEM(t, caFile, ca)
		writePEM(t, leafFile, leaf)
		if out, err := exec.Command("openssl", "verify", "-CAfile", caFile, leafFile).CombinedOutput(); err != nil {
			t.Errorf("openssl verify: %v: %s", err, out)
		}
	})
	t.Run("the re-issue is announced and reported", func(t *testing.T) {
		if !strings.Contains(first.stderr, "2 generated certificates stay the same until their re-issue") || !strings.Contains(first.stderr, "re-issued from 20") {
			t.Errorf("stderr %q lacks the re-issue warning", first.stderr)
		}
		report := filepath.Join(t.TempDir(), "report.json")
		g.mustRender("r", "--report", report)
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Generated struct {
				Certificates []struct {
					Function, CommonName string
					NotBefore, NotAfter  time.Time
					ReissueAt            time.Time
				}
			}
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		certs := rep.Generated.Certificates
		if len(certs) != 2 {
			t.Fatalf("report lists %d certificates, want 2:\n%s", len(certs), b)
		}
		for _, c := range certs {
			if !c.NotBefore.Before(c.ReissueAt) || !c.ReissueAt.Before(c.NotAfter) || time.Now().After(c.ReissueAt) {
				t.Errorf("%s %q: NotBefore %v, re-issue %v, NotAfter %v: want NotBefore < now < re-issue < NotAfter", c.Function, c.CommonName, c.NotBefore, c.ReissueAt, c.NotAfter)
			}
		}
	})
	t.Run("against the earlier render, the changed keys by name", func(t *testing.T) {
		// The earlier output, a changed title (the config in r-app, its
		// ciphertext and the pod template's checksum/config follow it)
		// and a changed cluster domain (the webhook certificate is
		// issued again): the summaries and the report name the Secrets'
		// keys, never their values.
		dir := t.TempDir()
		earlier := filepath.Join(dir, "earlier.yaml")
		if err := os.WriteFile(earlier, []byte(first.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		text, md, report := filepath.Join(dir, "summary.txt"), filepath.Join(dir, "summary.md"), filepath.Join(dir, "report.json")
		now := g.render("r", "--set", "title=New title", "--set", "clusterDomain=example.internal",
			"--diff-against", earlier, "--summary-text", text, "--summary", md, "--report", report, "-v")
		if now.err != nil {
			t.Fatalf("digestpin template --diff-against: %v\n%s", now.err, now.stderr)
		}
		objs := objects(t, now.stdout)
		got := string(testfiles.Read(t, text))
		same := g.render("r", "--diff-against", earlier, "--summary-text", filepath.Join(dir, "same.txt"))
		if same.err != nil {
			t.Fatalf("digestpin template --diff-against: %v\n%s", same.err, same.stderr)
		}
		if s := string(testfiles.Read(t, filepath.Join(dir, "same.txt"))); s != "no image moved, 1 unchanged (against the earlier output)\n" {
			t.Errorf("against an equal render, the summary text = %q, want nothing changed", s)
		}
		for _, want := range []string{
			"no image moved, 1 unchanged, 1 workload rolls for another reason, 2 Secrets changed (against the earlier output)\n",
			"\nDeployment/r-webhook rolls for another reason: metadata.annotations.checksum/config\n",
			"\nSecret/r-app: config, sealed changed\n",
			"\nSecret/r-tls: tls.crt",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("summary text lacks %q:\n%s", want, got)
			}
		}
		all := got + string(testfiles.Read(t, md)) + string(testfiles.Read(t, report)) + now.stderr
		for _, objs := range []map[string]*yaml.RNode{base, objs} {
			for _, k := range []string{"config", "sealed", "password", "htpasswd"} {
				if v := secret(objs, k); strings.Contains(all, v) {
					t.Errorf("the summaries, report or log show r-app's %s", k)
				}
			}
			for _, k := range []string{"tls.crt", "tls.key"} {
				if v := field(t, objs, "Secret/r-tls", "data", k); strings.Contains(all, v) || strings.Contains(all, v[:40]) {
					t.Errorf("the summaries, report or log show r-tls's %s", k)
				}
			}
		}
	})
	t.Run("an image push changes the Deployment only", func(t *testing.T) {
		reg.PushImage(t, "app:1.0")
		objs := g.mustRender("r")
		if field(t, objs, "Secret/r-tls", "data", "tls.crt") != tlsCrt || secret(objs, "password") != secret(base, "password") {
			t.Error("a re-pushed image changed generated values")
		}
		img := func(o map[string]*yaml.RNode) string {
			return field(t, o, "Deployment/r-webhook", "spec", "template", "spec", "containers", "[name=webhook]", "image")
		}
		if img(objs) == img(base) {
			t.Error("a re-pushed image kept the old digest")
		}
	})
}

// TestTemplateVarying: `now` still varies, and digestpin template says so
// on one line naming the template, without changing it.
func TestTemplateVarying(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	g := generated{t: t, bin: digestpinBin(t), reg: reg, seed: newSeed(t)}
	a, b := g.render("r", "--set", "withNow=true"), g.render("r", "--set", "withNow=true")
	if a.err != nil || b.err != nil {
		t.Fatalf("digestpin template: %v %v\n%s", a.err, b.err, a.stderr)
	}
	if a.stdout == b.stdout {
		t.Error("two renders with now are the same: now was made constant")
	}
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(a.stderr), "\n") {
		if strings.Contains(l, "now") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "templates/now.yaml") || !strings.Contains(lines[0], "warning") {
		t.Errorf("stderr = %q, want one warning line naming now and templates/now.yaml", a.stderr)
	}
	if c := g.render("r"); strings.Contains(c.stderr, "now") {
		t.Errorf("a render without now warns: %q", c.stderr)
	}
}

// TestTemplateOrdered: a value that can only follow the order the chart
// runs in (a range over a list of entries with no name) is named in one
// warning line, with its file and line, and in the report; a chart whose
// every call has a key gets no such line.
func TestTemplateOrdered(t *testing.T) {
	t.Parallel()
	bin, seed := digestpinBin(t), newSeed(t)
	chart := filepath.Join(repoRoot(t), "helmaction", "testdata", "charts", "gen-principals")
	rep := filepath.Join(t.TempDir(), "report.json")
	res := runCmd(t, "", nil, helmHome(t, ""), bin, "template", "r", chart, "--seed-file", seed, "--report", rep, "--set-json", `accounts=[{"role":"admin"},{"role":"ci"}]`)
	if res.err != nil {
		t.Fatalf("digestpin template: %v\n%s", res.err, res.stderr)
	}
	want := "digestpin: warning: gen-principals/templates/users-secret.yaml:9: range over a list whose entries have no name, id or key field: the values generated for an entry follow its position in the list"
	if lines := strings.Split(strings.TrimSpace(res.stderr), "\n"); !slices.Contains(lines, want) || strings.Count(res.stderr, "range over a list") != 1 {
		t.Errorf("stderr = %q, want the one line %q", res.stderr, want)
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Generated struct {
			Ordered []struct{ Template, Function string }
		}
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("decoding the report: %v", err)
	}
	if o := r.Generated.Ordered; len(o) != 1 || o[0].Template != "gen-principals/templates/users-secret.yaml:9" || o[0].Function != "range" {
		t.Errorf("report = %s, want generated.ordered naming users-secret.yaml:9", b)
	}
	if res := runCmd(t, "", nil, helmHome(t, ""), bin, "template", "r", chart, "--seed-file", seed); res.err != nil || strings.Contains(res.stderr, "order") {
		t.Errorf("digestpin template of named entries: %v, stderr %q, want no warning", res.err, res.stderr)
	}
}

// TestTemplateBadInput: each bad input is exit 2 or 1 with one line that
// names it, and nothing on stdout.
func TestTemplateBadInput(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	chart := filepath.Join(repoRoot(t), "testdata", "generated")
	dir := t.TempDir()
	mk := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := newSeed(t)
	goodText, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		code int
		want string
	}{
		{"no seed", []string{"template", "r", chart}, nil, 2, "--seed-file"},
		{"missing seed", []string{"template", "r", chart, "--seed-file", filepath.Join(dir, "absent")}, nil, 2, "absent"},
		{"empty seed", []string{"template", "r", chart, "--seed-file", mk("empty", "", 0o600)}, nil, 2, "empty"},
		{"short seed", []string{"template", "r", chart, "--seed-file", mk("short", "abc\n", 0o600)}, nil, 2, "short"},
		{"seed is a folder", []string{"template", "r", chart, "--seed-file", dir}, nil, 2, dir},
		{"world-readable seed", []string{"template", "r", chart, "--seed-file", mk("open", string(goodText), 0o644)}, nil, 2, "chmod 600"},
		{"seed from the environment", []string{"template", "r", chart}, []string{"DIGESTPIN_SEED_FILE=" + filepath.Join(dir, "absent")}, 2, "DIGESTPIN_SEED_FILE"},
		{"unknown flag", []string{"template", "r", chart, "--seed-file", good, "--no-such-flag"}, nil, 2, "--no-such-flag"},
		{"enable-dns", []string{"template", "r", chart, "--seed-file", good, "--enable-dns"}, nil, 2, "--enable-dns"},
		{"server dry run", []string{"template", "r", chart, "--seed-file", good, "--dry-run=server"}, nil, 1, "--dry-run=client"},
		{"retired flag", []string{"template", "r", chart, "--seed-file", good, "--previous", "x"}, nil, 2, "retired"},
		{"no chart", []string{"template", "--seed-file", good}, nil, 2, "CHART"},
		{"chart does not render", []string{"template", "r", chart, "--seed-file", good, "--set", "certDays=notanumber", "--set-string", "image={{"}, nil, 1, "r"},
		{"chart missing", []string{"template", "r", filepath.Join(dir, "nochart"), "--seed-file", good}, nil, 1, "nochart"},
		{"bad release name", []string{"template", "BAD_NAME", chart, "--seed-file", good}, nil, 1, "invalid release name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runCmd(t, "", nil, append(helmHome(t, ""), tc.env...), bin, tc.args...)
			if res.stdout != "" {
				t.Errorf("stdout = %q, want nothing", res.stdout)
			}
			if code := exitCode(res.err); code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, res.stderr)
			}
			lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) || !strings.HasPrefix(lines[0], "digestpin: error: ") {
				t.Errorf("stderr = %q, want one error line with %q", res.stderr, tc.want)
			}
			if strings.Contains(res.stderr, strings.TrimSpace(string(goodText))) {
				t.Error("an error shows the seed")
			}
		})
	}
}

// TestSeedCommand: digestpin seed writes a mode 0600 seed to a file it
// creates, or to a stdout redirected to a file, and never over a file.
func TestSeedCommand(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	p := newSeed(t)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("digestpin seed > FILE: mode %v, want 0600", fi.Mode().Perm())
	}
	q := filepath.Join(t.TempDir(), "seed")
	if res := runCmd(t, "", nil, nil, bin, "seed", q); res.err != nil {
		t.Fatalf("digestpin seed FILE: %v %s", res.err, res.stderr)
	}
	if fi, err := os.Stat(q); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("digestpin seed FILE: %v %v", fi, err)
	}
	a, _ := os.ReadFile(p)
	b, _ := os.ReadFile(q)
	if len(a) == 0 || string(a) == string(b) {
		t.Errorf("two seeds are the same or empty: %q %q", a, b)
	}
	res := runCmd(t, "", nil, nil, bin, "seed", q)
	if exitCode(res.err) != 2 || !strings.Contains(res.stderr, "exists") {
		t.Errorf("digestpin seed over a seed: exit %d, %q", exitCode(res.err), res.stderr)
	}
	if c, _ := os.ReadFile(q); string(c) != string(b) {
		t.Error("digestpin seed replaced a seed")
	}
}

// exitCode is the exit status err reports, 0 for nil.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func parseCert(t *testing.T, b64 string) *x509.Certificate {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(raw)
	if blk == nil {
		t.Fatalf("no PEM in %q", raw)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func certNames(t *testing.T, b64 string) []string { return parseCert(t, b64).DNSNames }

func writePEM(t *testing.T, path string, c *x509.Certificate) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTemplateTimeout: --timeout bounds the render too, even a template
// that would run for hours; nothing is written.
func TestTemplateTimeout(t *testing.T) {
	t.Parallel()
	chart := t.TempDir()
	for name, content := range map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: slow\nversion: 0.1.0\n",
		"templates/slow.yaml": "{{- range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}\n",
	} {
		p := filepath.Join(chart, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	res := runCmd(t, "", nil, helmHome(t, ""), digestpinBin(t), "template", "r", chart, "--seed-file", newSeed(t), "--timeout", "1s")
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("--timeout 1s took %v", took)
	}
	if res.err == nil || res.stdout != "" || !strings.Contains(res.stderr, "--timeout 1s") {
		t.Errorf("err %v, stdout %q, stderr %q: want a failure naming --timeout 1s and no output", res.err, res.stdout, res.stderr)
	}
}

// TestTemplateChartSources renders testdata/generated from each place a
// chart comes from: its folder, its .tgz, a chart repository with basic
// auth (--repo, --username, --password), and an OCI registry (oci://,
// --plain-http), all on loopback. The generated values depend on the seed,
// the release and the chart only, so every source gives the same bytes.
func TestTemplateChartSources(t *testing.T) {
	t.Parallel()
	bin, h4 := digestpinBin(t), helm4(t)
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	seed := newSeed(t)
	dir := t.TempDir()
	if r := runCmd(t, dir, nil, helmHome(t, ""), h4, "package", filepath.Join(repoRoot(t), "testdata", "generated"), "-d", dir); r.err != nil {
		t.Fatalf("helm package: %v\n%s", r.err, r.stderr)
	}
	tgz := filepath.Join(dir, "webhook-0.1.0.tgz")
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != "ci" || p != "s3cret-pw" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	if r := runCmd(t, dir, nil, helmHome(t, ""), h4, "repo", "index", dir, "--url", srv.URL); r.err != nil {
		t.Fatalf("helm repo index: %v\n%s", r.err, r.stderr)
	}
	home := helmHome(t, "")
	if r := runCmd(t, dir, nil, home, h4, "push", tgz, "oci://"+reg.Host()+"/charts", "--plain-http"); r.err != nil {
		t.Fatalf("helm push: %v\n%s", r.err, r.stderr)
	}
	common := []string{"-n", "ns", "--seed-file", seed, "--set", "image=" + reg.Ref("app:1.0")}
	render := func(chartArgs ...string) result {
		return runCmd(t, "", nil, home, bin, append(append([]string{"template", "r"}, chartArgs...), common...)...)
	}
	want := render(filepath.Join(repoRoot(t), "testdata", "generated"))
	if want.err != nil {
		t.Fatalf("digestpin template of the folder: %v\n%s", want.err, want.stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"archive", []string{tgz}},
		{"chart repository", []string{"webhook", "--repo", srv.URL, "--version", "0.1.0", "--username", "ci", "--password", "s3cret-pw"}},
		{"oci", []string{"oci://" + reg.Host() + "/charts/webhook", "--version", "0.1.0", "--plain-http"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := render(tc.args...)
			if got.err != nil {
				t.Fatalf("digestpin template: %v\n%s", got.err, got.stderr)
			}
			if got.stdout != want.stdout {
				t.Errorf("the render differs from the folder's:\n%s", got.stdout)
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		got := render("webhook", "--repo", srv.URL, "--version", "0.1.0", "--username", "ci", "--password", "wrong-pw-42")
		if got.err == nil || got.stdout != "" || strings.Contains(got.stderr, "wrong-pw-42") || strings.Count(strings.TrimSpace(got.stderr), "\n") != 0 {
			t.Errorf("err %v, stdout %q, stderr %q: want one error line without the password and no output", got.err, got.stdout, got.stderr)
		}
	})
}
