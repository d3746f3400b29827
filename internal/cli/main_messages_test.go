package cli

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/pin"
)

// TestUnusedMirrorWarns checks that a --registry-mirror whose FROM no
// image is from (a typo) warns, naming the mirror, whether the render
// succeeds or fails; before, it was left out without a word, even with
// --mirror-only -v. A mirror that an image is from, however either spells
// the host, does not warn.
func TestUnusedMirrorWarns(t *testing.T) {
	t.Parallel()
	reg, in := shop(t)
	mirror := testregistry.New(t)
	for _, img := range []string{"shop/migrate:1.4", "shop/web:1.4", "shop/proxy:2"} {
		mirror.PushImage(t, "cache/"+img)
	}
	mirror.PushIndex(t, "cache/shop/multi:1", "linux/amd64", "linux/arm64/v8")
	typo := "registry.exmple=" + mirror.Host() + "/cache"
	warning := "digestpin: warning: registry mirror " + typo + ": no image is from registry.exmple, so the mirror is never asked"
	for _, tc := range []struct {
		desc string
		in   string
		args []string
		fail bool
		warn bool
	}{
		{desc: "a typo", in: in, args: []string{"--registry-mirror", typo, "--mirror-only", "-v"}, warn: true},
		{desc: "a typo, and the render fails", in: strings.Replace(in, "shop/proxy:2", "shop/gone:1", 1), args: []string{"--registry-mirror", typo, "--mirror-only"}, fail: true, warn: true},
		{desc: "a mirror in use", in: in, args: []string{"--registry-mirror", reg.Host() + "=" + mirror.Host() + "/cache", "--mirror-only"}},
		{desc: "a mirror in use, its host in another case", in: strings.ReplaceAll(in, reg.Host()+"/shop/proxy", "localhost"+strings.TrimPrefix(reg.Host(), "127.0.0.1")+"/shop/proxy"), args: []string{"--registry-mirror", "LOCALHOST" + strings.TrimPrefix(reg.Host(), "127.0.0.1") + "=" + mirror.Host() + "/cache", "--mirror-only"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, stderr, err := runIn(t, tc.in, tc.args...)
			if (err != nil) != tc.fail {
				t.Fatalf("run() = %v, want failure %v; stderr:\n%s", err, tc.fail, stderr)
			}
			if got := strings.Contains(stderr, warning); got != tc.warn {
				t.Errorf("stderr:\n%s\nwarns about the mirror: %v, want %v", stderr, got, tc.warn)
			}
			if tc.warn && strings.Count(stderr, "registry mirror ") != 1 {
				t.Errorf("stderr:\n%s\nwant one warning about the mirror", stderr)
			}
		})
	}
}

// TestVerboseOncePerImage checks that -v logs each image once (the
// resolver logged it a second time), and says which mirror answered
// where it said "(registry)". The mirror holds another image than the
// registry: --mirror-lag=warn pins it and warns once.
func TestVerboseOncePerImage(t *testing.T) {
	t.Parallel()
	reg, in := shop(t)
	mirror := testregistry.New(t)
	mirror.PushImage(t, "cache/shop/web:1.4")
	report := filepath.Join(t.TempDir(), "report.json")
	_, stderr, err := runIn(t, in, "-v", "--registry-mirror", reg.Host()+"="+mirror.Host()+"/cache", "--mirror-lag", "warn", "--report", report)
	if err != nil {
		t.Fatalf("run() = %v; stderr:\n%s", err, stderr)
	}
	if warning := "digestpin: warning: " + reg.Ref("shop/web:1.4") + ": mirror " + mirror.Ref("cache/shop/web:1.4") + " serves sha256:"; strings.Count(stderr, warning) != 1 || !strings.Contains(stderr, "pinning the mirror's digest (--mirror-lag=warn)") {
		t.Errorf("stderr:\n%s\nwant one warning %q…", stderr, warning)
	}
	// The report says so too.
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep pin.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for _, im := range rep.Images {
		if want := map[bool]string{true: mirror.Host()}[im.Reference == reg.Ref("shop/web:1.4")]; im.Mirror != want || im.Source != "registry" {
			t.Errorf("report: %s has source %s, mirror %q; want registry, %q", im.Reference, im.Source, im.Mirror, want)
		}
	}
	for img, source := range map[string]string{
		"shop/web:1.4":     "(mirror " + mirror.Host() + ")",
		"shop/migrate:1.4": "(registry)",
		"shop/proxy:2":     "(registry)",
		"shop/multi:1":     "(registry)",
	} {
		var lines []string
		for _, l := range strings.Split(stderr, "\n") {
			if strings.Contains(l, reg.Ref(img)) && !strings.HasPrefix(l, "digestpin: warning: ") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.HasSuffix(lines[0], source) || !strings.HasPrefix(lines[0], "digestpin: "+reg.Ref(img)+": sha256:") {
			t.Errorf("-v logs %s in %q, want one line \"%s: sha256:… %s\"", img, lines, reg.Ref(img), source)
		}
	}
}

// TestRefusalSaysWhichCredentials checks that a registry's 401 says
// whether credentials were sent and where they came from (before, the
// line was the same with and without), never the secret: none, from the
// docker config, from a credential helper, from a pull secret.
func TestRefusalSaysWhichCredentials(t *testing.T) {
	const secret = "SENTINEL-p4ssw0rd"
	reg := testregistry.New(t)
	reg.PushImage(t, "private/app:1")
	reg.Handle(testregistry.BasicAuth("alice", "right-password"))
	in := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: a\n    image: " + reg.Ref("private/app:1") + "\n"
	auth := base64.StdEncoding.EncodeToString([]byte("alice:" + secret))
	helperDir := t.TempDir()
	// A credential helper, as docker-credential-* are: a program on PATH.
	helper := "#!/bin/sh\nread -r _\necho '{\"Username\":\"alice\",\"Secret\":\"" + secret + "\"}'\n"
	if err := os.WriteFile(filepath.Join(helperDir, "docker-credential-test"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	pullSecret := filepath.Join(t.TempDir(), ".dockerconfigjson")
	if err := os.WriteFile(pullSecret, []byte(`{"auths":{"`+reg.Host()+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc   string
		config string // config.json; "" for none
		args   []string
		want   string
	}{
		{desc: "none", want: "no credentials sent: none for " + reg.Host() + " (no docker config:"},
		{desc: "none in the docker config", config: `{"auths":{"other.example":{"auth":"` + auth + `"}}}`, want: "no credentials sent: none for " + reg.Host() + " in docker config DIR/config.json"},
		{desc: "docker config", config: `{"auths":{"` + reg.Host() + `":{"auth":"` + auth + `"}}}`, want: `credentials sent: user "alice" from docker config DIR/config.json`},
		{desc: "credential helper", config: `{"credHelpers":{"` + reg.Host() + `":"test"}}`, want: `credentials sent: user "alice" from credential helper docker-credential-test (docker config DIR/config.json)`},
		{desc: "credential store", config: `{"credsStore":"test"}`, want: `credentials sent: user "alice" from credential store docker-credential-test (docker config DIR/config.json)`},
		{desc: "pull secret", args: []string{"--pull-secret", pullSecret}, want: `credentials sent: user "alice" from pull secret ` + pullSecret},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("HOME", t.TempDir())
			t.Setenv("DOCKER_CONFIG", dir)
			t.Setenv("PATH", helperDir+":"+os.Getenv("PATH"))
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, stderr, err := runIn(t, in, tc.args...)
			want := strings.ReplaceAll(tc.want, "DIR", dir)
			if err == nil || !strings.Contains(stderr, "401 Unauthorized") || !strings.Contains(stderr, want) {
				t.Errorf("run() = %v, stderr:\n%s\nwant a 401 that says %q", err, stderr, want)
			}
			if strings.Contains(stderr, secret) || strings.Contains(stderr, auth) {
				t.Errorf("stderr shows the secret:\n%s", stderr)
			}
		})
	}
}

// TestLibraryMessagesNameFlags: a message of the library that says which
// option would change the outcome names the flag, as the command calls
// it (--registry-ca-file under digestpin template and install), or the
// variable that set it.
func TestLibraryMessagesNameFlags(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		renames map[string]string
		env     []string // flags set from their variable
		option  string
		want    string
	}{
		{desc: "the filter", option: "WithCAFiles", want: "--ca-file"},
		{desc: "template", renames: TemplateRenames, option: "WithCAFiles", want: "--registry-ca-file"},
		{desc: "install", renames: DeployRenames, option: "WithCAFiles", want: "--registry-ca-file"},
		{desc: "install, a flag not renamed", renames: DeployRenames, option: "Frozen", want: "--frozen"},
		{desc: "a renamed flag from its variable", renames: TemplateRenames, env: []string{"registry-ca-file"}, option: "WithCAFiles", want: "DIGESTPIN_CA_FILE"},
		{desc: "a renderer field", option: "ImagePaths", want: "--image-path"},
		{desc: "a renderer field from its variable", env: []string{"strict"}, option: "Strict", want: "DIGESTPIN_STRICT"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := NewOptions()
			if tc.renames != nil {
				BindPinning(o, pflag.NewFlagSet("x", pflag.ContinueOnError), tc.renames)
			}
			for _, f := range tc.env {
				o.fromEnv[f] = true
			}
			if got := o.OptionName(tc.option); got != tc.want {
				t.Errorf("OptionName(%q) = %q, want %q", tc.option, got, tc.want)
			}
		})
	}

	// And in a run: the resolver's hint for an unknown certificate
	// authority, the renderer's for --strict.
	reg := testregistry.NewTLS(t)
	reg.PushImage(t, "app:1")
	in := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: a\n    image: " + reg.TLSRef("app:1") + "\n"
	_, stderr, err := runIn(t, in)
	if want := "(add its CA with --ca-file, or name the host with --insecure-registry)"; err == nil || !strings.Contains(stderr, want) {
		t.Errorf("run() = %v, stderr %q, want %q", err, stderr, want)
	}
}
