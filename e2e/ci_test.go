package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/lockfile"
)

// exitStatus returns a command's exit status, 0 for success and -1 when
// it did not run.
func exitStatus(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// ciChart copies the shop chart of testdata/argocd-app and builds its
// dependencies, as a CI job does before rendering. It returns the chart
// folder.
func ciChart(t *testing.T, sc *sidecar, reg *testregistry.Registry) string {
	t.Helper()
	chart := argoApp(t, registryValues(reg))
	if r := runCmd(t, chart, nil, sc.env(), helm4(t), "dependency", "build", "."); r.err != nil {
		t.Fatalf("helm dependency build: %v\n%s", r.err, r.stderr)
	}
	return chart
}

func TestCIStep(t *testing.T) {
	reg := testregistry.New(t)
	digests := pushShop(t, reg)
	first := digests["shop/web:1.4"]
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	work := filepath.Dir(chart)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	lock := filepath.Join(chart, "digests.lock")
	// The CI job's environment: the sidecar's, without Argo CD's variables.
	var env []string
	for _, kv := range sc.env() {
		if !strings.HasPrefix(kv, "ARGOCD_") && !strings.HasPrefix(kv, "KUBE_") {
			env = append(env, kv)
		}
	}
	env = append(env, "RELEASE=shop")
	values := []string{"--values", filepath.Join("web", "values-e2e.yaml"), "--namespace", "prod"}

	// lockDigests reads the lock file as repository:tag → digest.
	lockDigests := func() map[string]string {
		t.Helper()
		l, err := lockfile.Read(lock)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, e := range l.Entries() {
			m[strings.TrimPrefix(e.Reference, reg.Host()+"/")] = e.Digest
		}
		return m
	}

	for _, s := range []struct {
		desc   string
		args   []string
		push   string // push this repository:tag again first
		status int
		stderr []string
		stdout string // what stdout starts with; nothing by default
		noLock bool   // the lock file must not exist after the step
	}{
		{desc: "usage", args: nil, status: 2, stderr: []string{"Usage:", "digestpin-lock.sh [--check]"}, noLock: true},
		{desc: "help", args: []string{"--help"}, stdout: "Usage:\n  digestpin-lock.sh [--check]", noLock: true},
		{desc: "unknown option", args: []string{"--chek", "web"}, status: 2, stderr: []string{"unknown option --chek", "Usage:"}, noLock: true},
		{desc: "check and commit", args: []string{"--check", "--commit", "web"}, status: 2, stderr: []string{"--check only reads it"}, noLock: true},
		{desc: "check before anything is recorded", args: []string{"--check", "web"}, status: 1, stderr: []string{"lock file web/digests.lock not found"}, noLock: true},
		{desc: "record", args: []string{"--output", "manifests.yaml", "web"}, stderr: []string{"web/digests.lock updated: commit it"}},
		{desc: "record again", args: []string{"web"}, stderr: []string{"web/digests.lock unchanged"}},
		{desc: "check", args: []string{"--check", "web"}, stderr: []string{"web/digests.lock matches the registry"}},
		{
			desc: "check after a push", args: []string{"--check", "--output", "manifests.yaml", "web"}, push: "shop/web:1.4", status: 3,
			stderr: []string{reg.Ref("shop/web:1.4") + ": moved from " + digests["shop/web:1.4"].String(), "run this step without --check and commit the lock file"},
		},
		{desc: "record the push", args: []string{"web"}, stderr: []string{"web/digests.lock updated"}},
		{desc: "check again", args: []string{"--check", "web"}, stderr: []string{"matches the registry"}},
	} {
		if s.push != "" {
			digests[s.push] = pushFixed(t, reg, s.push, "2")
		}
		args := s.args
		if len(args) > 0 {
			args = append(append([]string(nil), args...), values...)
		}
		r := runCmd(t, work, nil, env, step, args...)
		if got := exitStatus(r.err); got != s.status {
			t.Fatalf("%s: exit status %d, want %d\nstderr:\n%s", s.desc, got, s.status, r.stderr)
		}
		for _, w := range s.stderr {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr does not contain %q:\n%s", s.desc, w, r.stderr)
			}
		}
		if !strings.HasPrefix(r.stdout, s.stdout) || (s.stdout == "") != (r.stdout == "") {
			t.Errorf("%s: stdout = %q, want %q", s.desc, r.stdout, s.stdout)
		}
		if _, err := os.Stat(lock); s.noLock != os.IsNotExist(err) {
			t.Errorf("%s: lock file: %v, want it to exist: %v", s.desc, err, !s.noLock)
		}
		if s.noLock || s.status != 0 {
			continue
		}
		// After every successful step the lock holds what the registry
		// serves, one entry per distinct image.
		got := lockDigests()
		if len(got) != len(shopImages) {
			t.Errorf("%s: lock has %d entries, want %d: %v", s.desc, len(got), len(shopImages), got)
		}
		for im, d := range digests {
			if got[im] != d.String() {
				t.Errorf("%s: lock has %s for %s, want %s", s.desc, got[im], im, d)
			}
		}
	}
	// A failed check leaves --output as it was: what "record" wrote, with
	// the digest the push replaced.
	b, err := os.ReadFile(filepath.Join(work, "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), reg.Ref("shop/web:1.4")+"@"+first.String()) {
		t.Errorf("manifests.yaml after a failed check does not pin shop/web:1.4 to %s as recorded:\n%s", first, b)
	}
}

func TestCIStepOutput(t *testing.T) {
	reg := testregistry.New(t)
	digests := pushShop(t, reg)
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	out := filepath.Join(t.TempDir(), "manifests.yaml")
	r := runCmd(t, chart, nil, sc.env(), step, "--output", out, "--lock", "pinned.lock", ".", "--values", "values-e2e.yaml")
	if r.err != nil {
		t.Fatalf("digestpin-lock.sh: %v\n%s", r.err, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for im, d := range digests {
		if want := "image: " + reg.Ref(im) + "@" + d.String(); !strings.Contains(string(b), want) {
			t.Errorf("--output manifests lack %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(chart, "pinned.lock")); err != nil {
		t.Errorf("--lock pinned.lock: %v", err)
	}
}

// TestCIStepOutputUnchanged runs the CI step twice with --output: the
// second run, with the same registry state, says the file is unchanged
// and leaves it untouched (the same file, the same time), with no
// temporary file left beside it; a push replaces it.
func TestCIStepOutputUnchanged(t *testing.T) {
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	out := filepath.Join(chart, "manifests.yaml")
	run := func(want string) (os.FileInfo, string) {
		t.Helper()
		r := runCmd(t, chart, nil, sc.env(), step, "--output", "manifests.yaml", ".", "--values", "values-e2e.yaml")
		if r.err != nil {
			t.Fatalf("digestpin-lock.sh: %v\n%s", r.err, r.stderr)
		}
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return fi, string(b)
	}
	first, b := run("manifests.yaml updated: commit it")
	second, b2 := run("manifests.yaml unchanged")
	if !os.SameFile(first, second) || !first.ModTime().Equal(second.ModTime()) || b2 != b {
		t.Error("the second run replaced manifests.yaml")
	}
	if left, _ := filepath.Glob(filepath.Join(chart, ".digestpin-lock.*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	moved := pushFixed(t, reg, "shop/web:1.4", "2")
	if _, b3 := run("manifests.yaml updated: commit it"); !strings.Contains(b3, "@"+moved.String()) {
		t.Errorf("after a push manifests.yaml does not pin %s", moved)
	}
}

// TestCIStepRenderFailure checks that a chart that helm cannot render is
// reported as a render failure, naming helm and its error, and neither
// taken for a registry difference (--check) nor recorded as a lock file
// without images.
func TestCIStepRenderFailure(t *testing.T) {
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	lock := filepath.Join(chart, "digests.lock")
	if r := runCmd(t, chart, nil, sc.env(), step, ".", "--values", "values-e2e.yaml"); r.err != nil {
		t.Fatalf("recording: %v\n%s", r.err, r.stderr)
	}
	recorded, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(chart, "templates", "broken.yaml")
	if err := os.WriteFile(broken, []byte("value: {{ .Values.missing.deeper }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--check"}, nil, {"--output", "manifests.yaml"}} {
		args = append(args, ".", "--values", "values-e2e.yaml")
		r := runCmd(t, chart, nil, sc.env(), step, args...)
		if got := exitStatus(r.err); got != 1 {
			t.Errorf("digestpin-lock.sh %s: exit status %d, want 1\n%s", strings.Join(args, " "), got, r.stderr)
		}
		var last string
		if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) > 0 {
			last = lines[len(lines)-1]
		}
		for _, want := range []string{"digestpin-lock: render failed", "template web .", "broken.yaml", "nil pointer"} {
			if !strings.Contains(last, want) {
				t.Errorf("digestpin-lock.sh %s: last line %q does not contain %q\n%s", strings.Join(args, " "), last, want, r.stderr)
			}
		}
		if strings.Contains(r.stderr, "registry") {
			t.Errorf("digestpin-lock.sh %s blames the registry:\n%s", strings.Join(args, " "), r.stderr)
		}
		if got, err := os.ReadFile(lock); err != nil || string(got) != string(recorded) {
			t.Errorf("digestpin-lock.sh %s: lock file changed (%v):\n%s", strings.Join(args, " "), err, got)
		}
		if _, err := os.Stat(filepath.Join(chart, "manifests.yaml")); !os.IsNotExist(err) {
			t.Errorf("digestpin-lock.sh %s: --output file: %v, want none", strings.Join(args, " "), err)
		}
	}
}

// TestCIStepExitStatus: a --check that finds the registry moved away from
// the lock file exits 3, from digestpin and from the CI step, so that a
// pipeline tells it from a failure (1) without reading messages.
func TestCIStepExitStatus(t *testing.T) {
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	if r := runCmd(t, chart, nil, sc.env(), step, ".", "--values", "values-e2e.yaml"); r.err != nil {
		t.Fatalf("recording: %v\n%s", r.err, r.stderr)
	}
	render := runCmd(t, chart, nil, sc.env(), helm4(t), "template", "web", ".", "--values", "values-e2e.yaml")
	if render.err != nil {
		t.Fatalf("helm template: %v\n%s", render.err, render.stderr)
	}
	pushFixed(t, reg, "shop/web:1.4", "2")
	for _, tc := range []struct {
		desc   string
		env    []string
		status int
	}{
		{desc: "the registry moved", status: 3},
		// The same check, failing for another reason: exit 1.
		{desc: "a registry that does not answer", env: []string{"DIGESTPIN_REGISTRY_MIRROR=" + reg.Host() + "=127.0.0.1:1", "DIGESTPIN_MIRROR_ONLY=true", "DIGESTPIN_REQUEST_TIMEOUT=1s", "DIGESTPIN_TIMEOUT=5s"}, status: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			env := append(sc.env(), tc.env...)
			r := runCmd(t, chart, []byte(render.stdout), env, digestpinBin(t), "--lock", "digests.lock", "--check")
			if got := exitStatus(r.err); got != tc.status {
				t.Errorf("digestpin --check: exit status %d, want %d\n%s", got, tc.status, r.stderr)
			}
			r = runCmd(t, chart, nil, env, step, "--check", ".", "--values", "values-e2e.yaml")
			if got := exitStatus(r.err); got != tc.status {
				t.Errorf("digestpin-lock.sh --check: exit status %d, want %d\n%s", got, tc.status, r.stderr)
			}
		})
	}
}

// TestCIStepHostileNames runs the CI step on file names that a shell
// script gets wrong: spaces, a leading -, and links. A lock or output file
// that is a symbolic link out of the working folder (a pull request can
// commit one) is never written through.
func TestCIStepHostileNames(t *testing.T) {
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	work := filepath.Dir(chart)
	odd := filepath.Join(work, "-my chart")
	if err := os.Rename(chart, odd); err != nil {
		t.Fatal(err)
	}
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	env := append(sc.env(), "RELEASE=shop")
	values := []string{"--values", "-my chart/values-e2e.yaml"}
	run := func(args ...string) result {
		t.Helper()
		return runCmd(t, work, nil, env, step, append(args, values...)...)
	}

	lock := filepath.Join(odd, "-di gests.lock")
	if r := run("--lock", "-my chart/-di gests.lock", "--output", "-out put.yaml", "--", "-my chart"); r.err != nil {
		t.Fatalf("recording: %v\n%s", r.err, r.stderr)
	}
	for _, f := range []string{lock, filepath.Join(work, "-out put.yaml")} {
		if b, err := os.ReadFile(f); err != nil || !strings.Contains(string(b), reg.Host()) {
			t.Errorf("%s: %v, want it written", f, err)
		}
	}
	if r := run("--check", "--lock", "-my chart/-di gests.lock", "--", "-my chart"); r.err != nil {
		t.Errorf("checking: %v\n%s", r.err, r.stderr)
	}

	// Links out of the working folder: a file the job may write that is
	// not the repository's.
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("untouched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc string
		args []string
		link string
		want string
	}{
		{desc: "lock file", args: []string{"--lock", "link.lock"}, link: "link.lock", want: "digestpin-lock: lock file link.lock: a symbolic link to " + outside + ", outside the working folder"},
		{desc: "dangling lock file", args: []string{"--lock", "link.lock"}, link: "link.lock", want: "outside the working folder"},
		{desc: "output file", args: []string{"--output", "link.yaml"}, link: "link.yaml", want: "digestpin-lock: output file link.yaml: a symbolic link to " + outside + ", outside the working folder"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			target := outside
			if strings.HasPrefix(tc.desc, "dangling") {
				target = filepath.Join(filepath.Dir(outside), "new")
			}
			link := filepath.Join(work, tc.link)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(link)
			r := run(append(tc.args, "--", "-my chart")...)
			if got := exitStatus(r.err); got != 1 {
				t.Errorf("exit status %d, want 1\n%s", got, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not contain %q:\n%s", tc.want, r.stderr)
			}
			if b, err := os.ReadFile(outside); err != nil || string(b) != "untouched\n" {
				t.Errorf("the link's target holds %q (%v), want it untouched", b, err)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(outside), "new")); !os.IsNotExist(err) {
				t.Errorf("the dangling link's target: %v, want none", err)
			}
		})
	}

	// digestpin-ci.sh under set -u, without any GITHUB_*, RUNNER_* or
	// TMPDIR variable, as a plain shell runs it.
	ci := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-ci.sh")
	var bare []string
	for _, kv := range sc.env() {
		if !strings.HasPrefix(kv, "GITHUB_") && !strings.HasPrefix(kv, "RUNNER_") && !strings.HasPrefix(kv, "TMPDIR=") {
			bare = append(bare, kv)
		}
	}
	bare = append(bare, "DIGESTPIN_CI_RELEASE=shop", "DIGESTPIN_CI_CHART=-my chart", "DIGESTPIN_CI_MODE=check", "DIGESTPIN_CI_LOCK_FILE=-my chart/-di gests.lock", "DIGESTPIN_CI_VALUES=-my chart/values-e2e.yaml")
	cmd := exec.Command("bash", "-u", ci)
	cmd.Dir, cmd.Env = work, bare // not cleanEnv: nothing of this process's
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("digestpin-ci.sh: %v\n%s", err, out)
	}
}
