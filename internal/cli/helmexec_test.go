package cli

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// These tests run the two files `make build` writes: bin/digestpin, the
// build without Helm's engine (the root package), and bin/digestpin-helm, the
// full build it runs for template, install, upgrade and argocd refresh.

// buildPair returns digestpin and digestpin-helm as the Makefile builds
// them (DIGESTPIN_TEST_BIN and its sibling).
func buildPair(t *testing.T) (slim, full string) {
	t.Helper()
	slim = testfiles.Tool(t, "DIGESTPIN_TEST_BIN", "DIGESTPIN_TEST_BIN does not name a digestpin binary; run the tests with `make test`, which builds it")
	full = filepath.Join(filepath.Dir(slim), "digestpin-helm")
	if _, err := os.Stat(full); err != nil {
		t.Fatalf("make build writes digestpin-helm beside digestpin: %v", err)
	}
	return slim, full
}

// place copies the files (name → source) into a new folder and returns it.
func place(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil { //nolint:gosec // an executable of the test
			t.Fatal(err)
		}
	}
	return dir
}

// execResult is what a run of a binary gave.
type execResult struct {
	stdout, stderr string
	code           int
}

// runBin runs bin with args in dir, with env over a PATH of path only
// and a HOME of its own (unless env names one).
func runBin(t *testing.T, dir, path string, env []string, bin string, args ...string) execResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + t.TempDir()}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running %s: %v", bin, err)
	}
	return execResult{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
}

// slimChart writes a chart whose render uses a generator function (so
// the seed matters) and an image of reg, and a seed, and returns the
// arguments of digestpin template for it.
func slimChart(t *testing.T, image string) []string {
	t.Helper()
	dir := t.TempDir()
	chart := filepath.Join(dir, "chart")
	files := map[string]string{
		"Chart.yaml":            "apiVersion: v2\nname: shop\nversion: 0.1.0\n",
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  password: {{ randAlphaNum 16 | quote }}\n",
		"templates/web.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: " + image + "\n",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chart, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	seed := filepath.Join(dir, "seed")
	if _, stderr, err := runIn(t, "", "seed", seed); err != nil {
		t.Fatalf("digestpin seed: %v\n%s", err, stderr)
	}
	return []string{"template", "web", chart, "--seed-file", seed}
}

// TestSlimRunsHelmBinary: digestpin template through the slim binary
// writes exactly what digestpin-helm writes, and a failing render's
// stderr and exit status are digestpin-helm's.
func TestSlimRunsHelmBinary(t *testing.T) {
	t.Parallel()
	slim, full := buildPair(t)
	reg := testregistry.New(t)
	reg.PushImage(t, "shop/web:1.4")
	args := slimChart(t, reg.Ref("shop/web:1.4"))
	empty := t.TempDir()
	// Helm's help names folders under HOME: one for both.
	env := []string{"HOME=" + t.TempDir()}
	for _, tc := range []struct {
		desc string
		args []string
		code int
	}{
		{desc: "render", args: args},
		{desc: "a failing render", args: append(args[:len(args):len(args)], "--set", "x={{"), code: 1},
		{desc: "a usage error", args: []string{"template"}, code: 2},
		{desc: "help", args: []string{"template", "--help"}},
		{desc: "install's usage error", args: []string{"install", "--no-such-flag"}, code: 2},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			want := runBin(t, empty, empty, env, full, tc.args...)
			got := runBin(t, empty, empty, env, slim, tc.args...)
			if want.code != tc.code {
				t.Fatalf("digestpin-helm %q exits %d, want %d:\n%s", tc.args, want.code, tc.code, want.stderr)
			}
			if got != want {
				t.Errorf("digestpin %q = %+v\nwant digestpin-helm's %+v", tc.args, got, want)
			}
			if tc.code == 0 && tc.desc == "render" && !strings.Contains(got.stdout, "@sha256:") {
				t.Errorf("digestpin template wrote no pinned image:\n%s", got.stdout)
			}
		})
	}
}

// TestSlimSignalReachesHelmBinary: a SIGTERM to the digestpin that the
// user started stops digestpin-helm's render as if sent to it (exit 143,
// its message), because digestpin-helm runs in that process.
func TestSlimSignalReachesHelmBinary(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no execve: the child gets the console's Ctrl-C itself")
	}
	t.Parallel()
	slim, _ := buildPair(t)
	asked := make(chan struct{}, 1)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	args := slimChart(t, strings.TrimPrefix(hang.URL, "http://")+"/shop/web:1.4")
	cmd := exec.Command(slim, args...)
	cmd.Env = []string{"PATH=" + t.TempDir(), "HOME=" + t.TempDir()}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("digestpin template never asked the registry")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) || out.Len() != 0 || !strings.Contains(errb.String(), "stopped by terminated") {
		t.Errorf("digestpin template after SIGTERM: exit %d, stdout %q, stderr %q; want 143, nothing, digestpin-helm's message", code, out.String(), errb.String())
	}
}

// TestSlimFindsHelmBinary: where the slim digestpin looks for
// digestpin-helm, and what it says when there is none it may run.
func TestSlimFindsHelmBinary(t *testing.T) {
	t.Parallel()
	slim, full := buildPair(t)
	version := strings.TrimPrefix(strings.TrimSpace(runBin(t, "", "", nil, full, "--version").stdout), "digestpin ")
	// A digestpin-helm that says who it is, with its arguments and
	// what it was told of the version.
	planted := func(who string) string {
		p := filepath.Join(t.TempDir(), "digestpin-helm")
		script := "#!/bin/sh\necho " + who + " \"$@\" \"$" + execVersionEnv + "\"\n"
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil { //nolint:gosec // an executable of the test
			t.Fatal(err)
		}
		return p
	}
	pathPlant := filepath.Dir(planted("path"))
	alone := place(t, map[string]string{"digestpin": slim})
	withSibling := place(t, map[string]string{"digestpin": slim, "digestpin-helm": planted("sibling")})
	linked := t.TempDir()
	if err := os.Symlink(filepath.Join(withSibling, "digestpin"), filepath.Join(linked, "digestpin")); err != nil {
		t.Fatal(err)
	}
	dangling := place(t, map[string]string{"digestpin": slim})
	if err := os.Symlink("nowhere", filepath.Join(dangling, "digestpin-helm")); err != nil {
		t.Fatal(err)
	}
	loop := place(t, map[string]string{"digestpin": slim})
	if err := os.Symlink("digestpin-helm", filepath.Join(loop, "digestpin-helm")); err != nil {
		t.Fatal(err)
	}
	selfAsHelm := place(t, map[string]string{"digestpin": slim, "digestpin-helm": slim})
	relative := place(t, map[string]string{"digestpin-helm": planted("relative")})
	for _, tc := range []struct {
		desc, bin, dir, path string
		env                  []string
		args                 []string
		want                 string // stdout, when it ran
		err                  string // else: part of the one line on stderr
	}{
		{desc: "beside it", bin: filepath.Join(withSibling, "digestpin"), want: "sibling template -x " + version},
		{desc: "beside it wins over PATH", bin: filepath.Join(withSibling, "digestpin"), path: pathPlant, want: "sibling template -x " + version},
		{desc: "beside the file a link names", bin: filepath.Join(linked, "digestpin"), path: pathPlant, want: "sibling template -x " + version},
		{desc: "on PATH", bin: filepath.Join(alone, "digestpin"), path: pathPlant, want: "path template -x " + version},
		{desc: "argocd refresh", bin: filepath.Join(withSibling, "digestpin"), args: []string{"argocd", "refresh", "x"}, want: "sibling argocd refresh x " + version},
		// Set by hand: this digestpin takes itself for a digestpin-helm
		// that a digestpin ran, or refuses the other version.
		{desc: "the variable set by hand", bin: filepath.Join(withSibling, "digestpin"), env: []string{execVersionEnv + "=" + version}, err: "was run as digestpin-helm"},
		{desc: "the variable set by hand, another version", bin: filepath.Join(withSibling, "digestpin"), env: []string{execVersionEnv + "=0.0.0-other"}, err: "but the digestpin that ran it is 0.0.0-other"},
		{desc: "missing", bin: filepath.Join(alone, "digestpin"), err: "digestpin template needs digestpin-helm, the full build, which is neither in " + alone + " (beside digestpin) nor on PATH: install both files of the release archive, or go install github.com/digestpin/digestpin/cmd/digestpin-helm@"},
		{desc: "a relative PATH folder", bin: filepath.Join(alone, "digestpin"), dir: relative, path: ".", err: "is on PATH only in a relative folder"},
		{desc: "a dangling link beside it", bin: filepath.Join(dangling, "digestpin"), path: pathPlant, err: "is a link to nothing"},
		{desc: "a link loop beside it", bin: filepath.Join(loop, "digestpin"), path: pathPlant, err: "too many levels of symbolic links"},
		{desc: "itself as digestpin-helm", bin: filepath.Join(selfAsHelm, "digestpin"), err: "but it is digestpin without Helm's engine"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = t.TempDir()
			}
			args := tc.args
			if args == nil {
				args = []string{"template", "-x"}
			}
			r := runBin(t, tc.dir, path, tc.env, tc.bin, args...)
			if tc.err == "" {
				if r.code != 0 || strings.TrimSpace(r.stdout) != tc.want {
					t.Errorf("digestpin %q = %+v, want stdout %q", args, r, tc.want)
				}
				return
			}
			if r.code != 1 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "digestpin: error: ") || !strings.Contains(r.stderr, tc.err) {
				t.Errorf("digestpin %q = %+v, want exit 1, nothing on stdout and one line with %q", args, r, tc.err)
			}
		})
	}
}

// TestHelmBinaryRefusesOtherVersion: digestpin-helm run for a digestpin
// of another version refuses in one line that names both and its path;
// for its own version, the variable is gone before anything else runs.
func TestHelmBinaryRefusesOtherVersion(t *testing.T) {
	t.Parallel()
	_, full := buildPair(t)
	version := strings.TrimPrefix(strings.TrimSpace(runBin(t, "", "", nil, full, "--version").stdout), "digestpin ")
	r := runBin(t, "", t.TempDir(), []string{execVersionEnv + "=0.0.0-other"}, full, "template", "--help")
	want := "digestpin: error: " + full + " is digestpin " + version + ", but the digestpin that ran it is 0.0.0-other"
	if r.code != 1 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, want) {
		t.Errorf("digestpin-helm for another version = %+v, want exit 1 and one line %q…", r, want)
	}
	// With its own version it runs, and warns of no unknown DIGESTPIN_
	// variable: it is unset before the filter reads the environment.
	r = runBin(t, "", t.TempDir(), []string{execVersionEnv + "=" + version}, full, "-f", os.DevNull)
	if r.code != 0 || r.stderr != "" {
		t.Errorf("digestpin-helm for its own version = %+v, want exit 0 and nothing on stderr", r)
	}
}

// TestCheckExecVersion: the variable is checked, then removed from the
// process's environment, so that what digestpin starts never sees it.
func TestCheckExecVersion(t *testing.T) {
	t.Setenv(execVersionEnv, versionString())
	if started, err := checkExecVersion(os.LookupEnv, os.Unsetenv); !started || err != nil {
		t.Errorf("checkExecVersion() = %v, %v; want true, nil", started, err)
	}
	if v, ok := os.LookupEnv(execVersionEnv); ok {
		t.Errorf("%s=%q is still set", execVersionEnv, v)
	}
	t.Setenv(execVersionEnv, "0.0.0-other")
	if _, err := checkExecVersion(os.LookupEnv, os.Unsetenv); err == nil || !strings.Contains(err.Error(), "0.0.0-other") || !strings.Contains(err.Error(), versionString()) {
		t.Errorf("checkExecVersion() = %v, want an error naming both versions", err)
	}
	os.Unsetenv(execVersionEnv)
	if started, err := checkExecVersion(os.LookupEnv, os.Unsetenv); started || err != nil {
		t.Errorf("checkExecVersion() without the variable = %v, %v; want false, nil", started, err)
	}
}
