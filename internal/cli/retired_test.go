package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
	"github.com/spf13/pflag"
)

// retiredLine is the whole of stderr for a run that used retired flags,
// variables or Argo CD settings; subject names them, with its verb:
// "--previous was", "--state-key and --state-store were".
func retiredLine(subject string) string {
	return "digestpin: error: " + subject + ` retired after 0.1.0: two renders cannot tell a certificate, hash or ciphertext made from new input from one made from new randomness, so it could keep a real change; render with "digestpin template NAME CHART --seed-file FILE" instead (docs/deterministic.md)` + "\n"
}

// TestRetiredFlags runs each retired flag of the two-render mode as a
// person would write it (with a value, with =, alone, from its variable,
// beside other mistakes): exit 2, nothing on stdout, and one line on
// stderr that names what the person wrote.
func TestRetiredFlags(t *testing.T) {
	_, in := shop(t)
	type run struct {
		desc string
		args []string
		env  map[string]string
		want string // what the message names, with its verb
	}
	var runs []run
	for _, f := range []struct{ flag, value string }{
		{"volatile-from", "second.yaml"},
		{"previous", "rendered/web.yaml"},
		{"state-dir", "/var/cache/digestpin-state"},
		{"state-key", "prod/shop/web"},
		{"state-store", "redis://127.0.0.1:6379/0"},
		{"state-ttl", "168h"},
	} {
		env := envName(f.flag)
		runs = append(runs,
			run{desc: "--" + f.flag + " VALUE", args: []string{"--" + f.flag, f.value}, want: "--" + f.flag + " was"},
			run{desc: "--" + f.flag + "=VALUE", args: []string{"--" + f.flag + "=" + f.value}, want: "--" + f.flag + " was"},
			run{desc: "--" + f.flag + " alone", args: []string{"--mode", "digest", "--" + f.flag}, want: "--" + f.flag + " was"},
			run{desc: env, env: map[string]string{env: f.value}, want: env + " was"},
			// Not a duration: the variable still names the retirement.
			run{desc: env + " of any value", env: map[string]string{env: "x,y"}, want: env + " was"},
			// The flag wins over its variable, as for every flag.
			run{desc: "--" + f.flag + " beside " + env, args: []string{"--" + f.flag, f.value}, env: map[string]string{env: f.value}, want: "--" + f.flag + " was"},
		)
	}
	runs = append(runs,
		run{desc: "before a bad flag value", args: []string{"--previous", "p.yaml", "--mode", "sideways"}, want: "--previous was"},
		run{desc: "before an unknown flag", args: []string{"--volatile-from=s.yaml", "--no-such-flag"}, want: "--volatile-from was"},
		run{desc: "before a bad variable", args: []string{"--state-dir", "s"}, env: map[string]string{"DIGESTPIN_CONCURRENCY": "many"}, want: "--state-dir was"},
		run{desc: "two", args: []string{"--state-store", "redis://h/0", "--state-key", "k"}, want: "--state-key and --state-store were"},
		run{desc: "three, flags and variables", args: []string{"--previous", "p.yaml", "--volatile-from", "s.yaml"}, env: map[string]string{"DIGESTPIN_STATE_TTL": "1h"}, want: "--volatile-from, --previous and DIGESTPIN_STATE_TTL were"},
		run{desc: "with --version", args: []string{"--version", "--previous", "p.yaml"}, want: "--previous was"},
	)
	for _, tc := range runs {
		t.Run(tc.desc, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out, stderr, err := runIn(t, in, tc.args...)
			if code := ExitCode(err); code != 2 {
				t.Errorf("run(%q) = %v, exit %d; want exit 2", tc.args, err, code)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			if want := retiredLine(tc.want); stderr != want {
				t.Errorf("stderr =\n%s\nwant\n%s", stderr, want)
			}
		})
	}
}

// TestRetiredFlagsHidden: the retired flags are in neither the help nor
// what completion offers, and every other flag is in both.
func TestRetiredFlagsHidden(t *testing.T) {
	t.Parallel()
	fs := pflag.NewFlagSet("digestpin", pflag.ContinueOnError)
	NewOptions().Bind(fs)
	var help bytes.Buffer
	usage(&help, fs)
	// What completion offers for a flag: the names cobra's scripts show.
	var names bytes.Buffer
	if err := run(context.Background(), []string{"__complete", "--"}, nil, &names, io.Discard); err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{"help": help.String(), "completion": names.String()}
	retired := map[string]bool{}
	for _, f := range retiredFlags {
		retired[f] = true
	}
	fs.VisitAll(func(f *pflag.Flag) {
		// The name as a word of its own: "--cache" is not in
		// "--cache-dir", fish writes "-l cache".
		word := regexp.MustCompile(`(^|[^a-z-])-*` + regexp.QuoteMeta(f.Name) + `([^a-z-]|$)`)
		for what, s := range scripts {
			if got := word.MatchString(s); got == retired[f.Name] {
				t.Errorf("%s holds --%s: %v, want %v", what, f.Name, got, !retired[f.Name])
			}
		}
	})
	if len(retired) != 6 {
		t.Errorf("retired flags = %v, want the six of the two-render mode", retiredFlags)
	}
}

// TestRetiredArgocdSettings: argocdGate, which digestpin argocd generate
// runs before it renders, refuses the plugin's
// settings of the two-render mode, naming the setting and its value, with
// exit 2 and nothing on stdout. DIGESTPIN_STEADY=false asked for what the
// plugin does now, and still works.
func TestRetiredArgocdSettings(t *testing.T) {
	params := `[{"name":"release-name","string":"shop"}]`
	for _, tc := range []struct {
		desc string
		env  map[string]string
		want string // what the message names, with its verb; "" for no error
	}{
		{desc: "steady on", env: map[string]string{"ARGOCD_ENV_DIGESTPIN_STEADY": "true"}, want: `the Argo CD plugin env DIGESTPIN_STEADY="true" was`},
		{desc: "steady of another value", env: map[string]string{"ARGOCD_ENV_DIGESTPIN_STEADY": "yes\nplease"}, want: `the Argo CD plugin env DIGESTPIN_STEADY="yes\nplease" was`},
		{desc: "steady off", env: map[string]string{"ARGOCD_ENV_DIGESTPIN_STEADY": "false"}},
		{desc: "steady empty", env: map[string]string{"ARGOCD_ENV_DIGESTPIN_STEADY": ""}},
		{desc: "the sidecar's state folder", env: map[string]string{"DIGESTPIN_CMP_STATE_DIR": "/var/cache/digestpin-state"}, want: `the Argo CD sidecar's DIGESTPIN_CMP_STATE_DIR="/var/cache/digestpin-state" was`},
		{desc: "the sidecar's state folder, steady off", env: map[string]string{"DIGESTPIN_CMP_STATE_DIR": "/s", "ARGOCD_ENV_DIGESTPIN_STEADY": "false"}, want: `the Argo CD sidecar's DIGESTPIN_CMP_STATE_DIR="/s" was`},
		{desc: "both", env: map[string]string{"DIGESTPIN_CMP_STATE_DIR": "/s", "ARGOCD_ENV_DIGESTPIN_STEADY": "true"}, want: `the Argo CD plugin env DIGESTPIN_STEADY="true" and the Argo CD sidecar's DIGESTPIN_CMP_STATE_DIR="/s" were`},
		{desc: "the sidecar's state store", env: map[string]string{"DIGESTPIN_STATE_STORE": "redis://argocd-redis:6379/0"}, want: "DIGESTPIN_STATE_STORE was"},
		{desc: "state settings of an Application, which generate.sh never passes on", env: map[string]string{"ARGOCD_ENV_DIGESTPIN_STATE_DIR": "/s", "ARGOCD_ENV_DIGESTPIN_PREVIOUS": "p"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Setenv(argocdParametersEnv, params)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stderr bytes.Buffer
			err := argocdGate(context.Background(), &stderr)
			if tc.want == "" {
				if err != nil {
					t.Errorf("argocdGate = %v\n%s; want the parameters taken", err, stderr.String())
				}
				return
			}
			if code := ExitCode(err); code != 2 {
				t.Errorf("argocdGate = %v, exit %d; want exit 2", err, code)
			}
			if want := retiredLine(tc.want); stderr.String() != want {
				t.Errorf("stderr =\n%s\nwant\n%s", stderr.String(), want)
			}
		})
	}
}

// TestDocsRetiredSample checks that docs/deterministic.md shows the line digestpin
// really prints for a retired flag, word for word.
func TestDocsRetiredSample(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deterministic.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runIn(t, "", "--previous", "rendered/web.yaml")
	if err == nil || !strings.Contains(string(readme), "\n"+stderr) {
		t.Errorf("docs/deterministic.md does not show what digestpin prints for --previous:\n%s", stderr)
	}
}

// TestRetiredAfter holds the version the retired flags' message names to
// the truth: a version of CHANGELOG.md's, no newer than this tree's own
// (plugin.yaml's), so that no message names a version yet to come; the
// flags' hidden help names it too.
func TestRetiredAfter(t *testing.T) {
	t.Parallel()
	plugin, err := os.ReadFile(filepath.Join(repoRoot, "plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	own := regexp.MustCompile(`(?m)^version: *"?([^"\n]*)"?$`).FindSubmatch(plugin)
	if own == nil {
		t.Fatal("plugin.yaml has no version")
	}
	self, err := semver.StrictNewVersion(string(own[1]))
	if err != nil {
		t.Fatalf("plugin.yaml's version: %v", err)
	}
	named, err := semver.StrictNewVersion(retiredAfter)
	if err != nil {
		t.Fatalf("retiredAfter: %v", err)
	}
	if named.GreaterThan(self) {
		t.Errorf("retiredAfter = %s, newer than this version, %s", named, self)
	}
	changelog, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^## ` + regexp.QuoteMeta(retiredAfter) + `( |$)`).Match(changelog) {
		t.Errorf("retiredAfter = %s, which CHANGELOG.md has no section for", retiredAfter)
	}
	if _, stderr, _ := runIn(t, "", "--previous"); !strings.Contains(stderr, " retired after "+retiredAfter+": ") {
		t.Errorf("--previous: %q, want it to name %s", stderr, retiredAfter)
	}
	fs := pflag.NewFlagSet("digestpin", pflag.ContinueOnError)
	NewOptions().Bind(fs)
	for _, name := range retiredFlags {
		if got, want := fs.Lookup(name).Usage, "retired after "+retiredAfter; got != want {
			t.Errorf("--%s's usage = %q, want %q", name, got, want)
		}
	}
}
