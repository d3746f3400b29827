package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// configMap is a stream without images: it needs no registry, and comes
// out as it went in.
const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n"

// TestEnvironmentNeverRunsActions checks that DIGESTPIN_VERSION does not
// turn on --version: it replaced the manifests with the version, exit 0.
// It is ignored, with a warning; --version itself still works.
func TestEnvironmentNeverRunsActions(t *testing.T) {
	for _, v := range []string{"true", "1", "0.1.0"} {
		t.Setenv("DIGESTPIN_VERSION", v)
		out, stderr, err := runIn(t, configMap)
		if err != nil || out != configMap {
			t.Errorf("DIGESTPIN_VERSION=%s: run() = %v, stdout %q; want the manifests", v, err, out)
		}
		if want := "digestpin: warning: DIGESTPIN_VERSION is ignored: the environment does not set --version, which is an action; give it on the command line\n"; stderr != want {
			t.Errorf("DIGESTPIN_VERSION=%s: stderr %q, want %q", v, stderr, want)
		}
	}
	out, stderr, err := runIn(t, "", "--version")
	if err != nil || !strings.HasPrefix(out, "digestpin ") || stderr != "" {
		t.Errorf("--version = %v, %q, %q; want the version and no warning", err, out, stderr)
	}
}

// TestUnknownEnvironmentWarns checks that a DIGESTPIN_* variable that sets
// nothing (before: ignored without a word) warns, one line each, with the
// variable it was most likely meant to be, and never its value; the
// variables of the project's other parts do not.
func TestUnknownEnvironmentWarns(t *testing.T) {
	for k, v := range map[string]string{
		"DIGESTPIN_MOD":                 "digest",
		"DIGESTPIN_CACHETTL":            "5m",
		"DIGESTPIN_INSECURE_REGISTRIES": "SENTINEL-value",
		"DIGESTPIN_SOMETHING_ELSE":      "1",
		"DIGESTPIN_CI_MODE":             "update",
		"DIGESTPIN_PLUGIN_URL":          "http://127.0.0.1:1",
		"DIGESTPIN_REDIS_PASSWORD":      "x",
		"DIGESTPIN_TEST_ANYTHING":       "x",
	} {
		t.Setenv(k, v)
	}
	out, stderr, err := runIn(t, configMap)
	if err != nil || out != configMap {
		t.Fatalf("run() = %v, stdout %q; want the manifests", err, out)
	}
	want := []string{
		"digestpin: warning: DIGESTPIN_CACHETTL is not a digestpin setting, ignored; did you mean DIGESTPIN_CACHE_TTL?",
		"digestpin: warning: DIGESTPIN_INSECURE_REGISTRIES is not a digestpin setting, ignored; did you mean DIGESTPIN_INSECURE_REGISTRY?",
		"digestpin: warning: DIGESTPIN_MOD is not a digestpin setting, ignored; did you mean DIGESTPIN_MODE?",
		"digestpin: warning: DIGESTPIN_SOMETHING_ELSE is not a digestpin setting, ignored",
	}
	if got := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, strings.Join(want, "\n"))
	}
	if strings.Contains(stderr, "SENTINEL") {
		t.Errorf("a warning shows a variable's value: %q", stderr)
	}
	// Not for --version, whose output the install hook reads with its
	// stderr.
	if _, stderr, _ := runIn(t, "", "--version"); stderr != "" {
		t.Errorf("--version printed %q, want no warning", stderr)
	}
}

// TestOtherEnvListed checks that every DIGESTPIN_* variable the project's
// scripts, templates and docs read is a flag's or in otherEnv, so that
// setting it never warns.
func TestOtherEnvListed(t *testing.T) {
	t.Parallel()
	ls := exec.Command("git", "ls-files")
	ls.Dir = repoRoot
	out, err := ls.Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	fs := pflag.NewFlagSet("digestpin", pflag.ContinueOnError)
	NewOptions().Bind(fs)
	flags := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { flags[envName(f.Name)] = true })
	// A shell or YAML read ($DIGESTPIN_X, ${DIGESTPIN_X…}), or in Go a
	// string.
	shell := regexp.MustCompile(`\$\{?(DIGESTPIN_[A-Z0-9_]*[A-Z0-9])\b`)
	goString := regexp.MustCompile(`"(DIGESTPIN_[A-Z0-9_]*[A-Z0-9])"`)
	found := 0
	for _, f := range strings.Fields(string(out)) {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "CHANGELOG") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			continue
		}
		read := shell
		if strings.HasSuffix(f, ".go") {
			read = goString
		}
		for _, m := range read.FindAllStringSubmatch(string(b), -1) {
			found++
			if v := m[1]; !flags[v] && len(envWarnings(fs, []string{v + "=x"})) > 0 {
				t.Errorf("%s reads %s, which digestpin warns about: add it to otherEnv", f, v)
			}
		}
	}
	if found < 20 {
		t.Errorf("found %d reads of DIGESTPIN_* variables, want the scripts' many: not a real search", found)
	}
}
