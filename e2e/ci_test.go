package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// ciEnv is a CI job's environment: the sidecar's, without Argo CD's
// variables, and with a seed file of its own (a CI secret written to a
// file of mode 0600) in DIGESTPIN_SEED_FILE.
func ciEnv(t *testing.T, sc *sidecar) []string {
	t.Helper()
	var env []string
	for _, kv := range sc.env() {
		if !strings.HasPrefix(kv, "ARGOCD_") && !strings.HasPrefix(kv, "KUBE_") && !strings.HasPrefix(kv, "DIGESTPIN_SEED_FILE=") {
			env = append(env, kv)
		}
	}
	return append(env, "DIGESTPIN_SEED_FILE="+newSeed(t))
}

func TestCIStep(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	digests := pushShop(t, reg)
	first := digests["shop/web:1.4"]
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	work := filepath.Dir(chart)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	lock := filepath.Join(chart, "digests.lock")
	jobSummary := filepath.Join(t.TempDir(), "step-summary.md")
	env := append(ciEnv(t, sc), "RELEASE=shop", "GITHUB_STEP_SUMMARY="+jobSummary)
	values := []string{"--values", filepath.Join("web", "values-e2e.yaml"), "--namespace", "prod"}
	moved := reg.Ref("shop/web:1.4") + " " + first.Hex[:12] + " → " // digestpin's summary

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
		{desc: "summary onto the lock file", args: []string{"--summary", "./web/digests.lock", "web"}, status: 2, stderr: []string{"--summary ./web/digests.lock is the file of --lock or --output"}, noLock: true},
		{desc: "check before anything is recorded", args: []string{"--check", "web"}, status: 1, stderr: []string{"lock file web/digests.lock not found"}, noLock: true},
		{desc: "record", args: []string{"--output", "manifests.yaml", "web"}, stderr: []string{"web/digests.lock updated: commit it"}},
		{desc: "record again", args: []string{"web"}, stderr: []string{"web/digests.lock unchanged", "digestpin-lock: no image moved"}},
		{desc: "check", args: []string{"--check", "web"}, stderr: []string{"web/digests.lock matches the registry", "digestpin-lock: no image moved"}},
		{
			desc: "check after a push", args: []string{"--check", "--output", "manifests.yaml", "web"}, push: "shop/web:1.4", status: 3,
			stderr: []string{
				reg.Ref("shop/web:1.4") + ": moved from " + digests["shop/web:1.4"].String(), "run this step without --check and commit the lock file",
				"digestpin-lock: 1 image moved", "digestpin-lock: " + moved,
			},
		},
		{desc: "record the push", args: []string{"web"}, stderr: []string{"web/digests.lock updated", "digestpin-lock: 1 image moved", "digestpin-lock: " + moved}},
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
	// Each step that rendered appended its Markdown summary to the job
	// summary: the failed check and the record that followed name the
	// moved image.
	b, err := os.ReadFile(jobSummary)
	if err != nil {
		t.Fatal(err)
	}
	if row := "| `" + reg.Ref("shop/web:1.4") + "` | `" + first.Hex[:12] + "` | `"; strings.Count(string(b), row) != 2 {
		t.Errorf("GITHUB_STEP_SUMMARY holds %q %d times, want 2 (the failed check, the record):\n%s", row, strings.Count(string(b), row), b)
	}
	// A failed check leaves --output as it was: what "record" wrote, with
	// the digest the push replaced.
	b, err = os.ReadFile(filepath.Join(work, "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), reg.Ref("shop/web:1.4")+"@"+first.String()) {
		t.Errorf("manifests.yaml after a failed check does not pin shop/web:1.4 to %s as recorded:\n%s", first, b)
	}
}

func TestCIStepOutput(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	digests := pushShop(t, reg)
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	out := filepath.Join(t.TempDir(), "manifests.yaml")
	r := runCmd(t, chart, nil, ciEnv(t, sc), step, "--output", out, "--lock", "pinned.lock", ".", "--values", "values-e2e.yaml")
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
	t.Parallel()
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	out := filepath.Join(chart, "manifests.yaml")
	env := ciEnv(t, sc)
	run := func(want string) (os.FileInfo, string) {
		t.Helper()
		r := runCmd(t, chart, nil, env, step, "--output", "manifests.yaml", ".", "--values", "values-e2e.yaml")
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

// TestCIStepRenderFailure checks that a chart that does not render is
// reported as a render failure, naming digestpin template and the error,
// and neither taken for a registry difference (--check) nor recorded as a
// lock file without images.
func TestCIStepRenderFailure(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	lock := filepath.Join(chart, "digests.lock")
	if r := runCmd(t, chart, nil, ciEnv(t, sc), step, ".", "--values", "values-e2e.yaml"); r.err != nil {
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
		r := runCmd(t, chart, nil, ciEnv(t, sc), step, args...)
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
	t.Parallel()
	reg := testregistry.New(t)
	pushShop(t, reg)
	sc := newSidecar(t)
	chart := ciChart(t, sc, reg)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	if r := runCmd(t, chart, nil, ciEnv(t, sc), step, ".", "--values", "values-e2e.yaml"); r.err != nil {
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
			env := append(ciEnv(t, sc), tc.env...)
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
	t.Parallel()
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
	env := append(ciEnv(t, sc), "RELEASE=shop")
	values := []string{"--values", "-my chart/values-e2e.yaml"}
	run := func(args ...string) result {
		t.Helper()
		return runCmd(t, work, nil, env, step, append(args, values...)...)
	}

	lock := filepath.Join(odd, "-di gests.lock")
	if r := run("--lock", "-my chart/-di gests.lock", "--output", "-out put.yaml", "--summary", "-sum mary.md", "--", "-my chart"); r.err != nil {
		t.Fatalf("recording: %v\n%s", r.err, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(work, "-sum mary.md")); err != nil || !strings.HasPrefix(string(b), "### digestpin: ") {
		t.Errorf("the summary: %q, %v; want it written", b, err)
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
		{desc: "summary file", args: []string{"--summary", "link.md"}, link: "link.md", want: "digestpin-lock: summary file link.md: a symbolic link to " + outside + ", outside the working folder"},
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
	for _, kv := range ciEnv(t, sc) {
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

// generatedChart copies testdata/generated (a certificate, passwords and
// their hash in the pod template) into a CI job's working folder and
// returns the folder; the chart is generated/ in it.
func generatedChart(t *testing.T) string {
	t.Helper()
	work := t.TempDir()
	if err := os.CopyFS(filepath.Join(work, "generated"), os.DirFS(filepath.Join(repoRoot(t), "testdata", "generated"))); err != nil {
		t.Fatal(err)
	}
	return work
}

// TestCIStepSeed runs the CI step on a chart that generates a certificate
// and passwords: with the seed, --output holds the same bytes on every
// run (nothing to commit) and a values change reaches the certificate;
// without one, the lock file is recorded with a throwaway seed that no
// file outlives, and --output is refused; a bad seed fails the step.
func TestCIStepSeed(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	sc := newSidecar(t)
	work := generatedChart(t)
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	tmp := t.TempDir() // TMPDIR: what the step leaves there
	var env []string
	for _, kv := range ciEnv(t, sc) {
		if !strings.HasPrefix(kv, "DIGESTPIN_SEED_FILE=") {
			env = append(env, kv)
		}
	}
	env = append(env, "TMPDIR="+tmp, "RELEASE=shop")
	seed := newSeed(t)
	image := "--set=image=" + reg.Ref("app:1.0")
	lock := filepath.Join(work, "generated", "digests.lock")
	tlsCrt := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(work, "manifests.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return field(t, objects(t, string(b)), "Secret/shop-tls", "data", "tls.crt")
	}
	leftovers := func(desc string) {
		t.Helper()
		if names, _ := os.ReadDir(tmp); len(names) != 0 {
			t.Errorf("%s: the step left %d files in TMPDIR (%s...)", desc, len(names), names[0].Name())
		}
	}

	for _, s := range []struct {
		desc   string
		args   []string
		status int
		stderr []string
		absent []string
		check  func(desc string)
	}{
		{
			desc:   "no seed, --output",
			args:   []string{"--output", "manifests.yaml", "generated", image},
			status: 2,
			stderr: []string{"digestpin-lock: --output keeps the manifests, whose generated passwords, keys and certificates derive from the seed: give --seed-file FILE or DIGESTPIN_SEED_FILE"},
			check: func(desc string) {
				if _, err := os.Stat(lock); !os.IsNotExist(err) {
					t.Errorf("%s: lock file %v, want none", desc, err)
				}
			},
		},
		{
			desc:   "no seed, the lock file only",
			args:   []string{"generated", image},
			stderr: []string{"no seed given (--seed-file, DIGESTPIN_SEED_FILE): generated values come from a throwaway seed", "generated/digests.lock updated"},
		},
		{
			desc:   "a seed that others may read",
			args:   []string{"--seed-file", worldReadable(t, seed), "--output", "manifests.yaml", "generated", image},
			status: 1,
			stderr: []string{"may be read by group or others (mode 0644): chmod 600", "digestpin failed (its error is above)"},
			absent: []string{"render failed"},
		},
		{
			desc:   "the seed",
			args:   []string{"--seed-file", seed, "--output", "manifests.yaml", "generated", image},
			stderr: []string{"manifests.yaml updated: commit it"},
			absent: []string{"throwaway"},
		},
		{
			desc:   "the seed again: the same manifests",
			args:   []string{"--seed-file", seed, "--output", "manifests.yaml", "generated", image},
			stderr: []string{"manifests.yaml unchanged", "digests.lock unchanged"},
		},
		{
			desc:   "the seed from DIGESTPIN_SEED_FILE",
			args:   []string{"--output", "manifests.yaml", "generated", image},
			stderr: []string{"manifests.yaml unchanged"},
		},
	} {
		runEnv := env
		if s.desc == "the seed from DIGESTPIN_SEED_FILE" {
			runEnv = append(slices.Clone(env), "DIGESTPIN_SEED_FILE="+seed)
		}
		r := runCmd(t, work, nil, runEnv, step, s.args...)
		if got := exitStatus(r.err); got != s.status {
			t.Errorf("%s: exit status %d, want %d\n%s", s.desc, got, s.status, r.stderr)
		}
		for _, w := range s.stderr {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr does not contain %q:\n%s", s.desc, w, r.stderr)
			}
		}
		for _, a := range s.absent {
			if strings.Contains(r.stderr, a) {
				t.Errorf("%s: stderr contains %q:\n%s", s.desc, a, r.stderr)
			}
		}
		if s.check != nil {
			s.check(s.desc)
		}
		leftovers(s.desc)
	}

	// A values change reaches the certificate.
	before := tlsCrt()
	r := runCmd(t, work, nil, env, step, "--seed-file", seed, "--output", "manifests.yaml", "generated", image, "--set=clusterDomain=example.internal")
	if r.err != nil || !strings.Contains(r.stderr, "manifests.yaml updated") {
		t.Fatalf("a values change: %v\n%s", r.err, r.stderr)
	}
	if after := tlsCrt(); after == before || !slices.Contains(certNames(t, after), "shop-webhook.default.svc.example.internal") {
		t.Errorf("a new clusterDomain: the certificate is the old one, or lacks the new names %v", certNames(t, after))
	}
}

// worldReadable copies the seed file to a new file of mode 0644.
func worldReadable(t *testing.T, seed string) string {
	t.Helper()
	b, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "seed")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCIScriptSeed runs digestpin-ci.sh, which the GitHub Action and the
// GitLab template run, with the seed's value in DIGESTPIN_CI_SEED, as a
// CI secret gives it: the manifests are those of the seed's file, the
// same on every run; the value is in no message, no command line and no
// environment of a program the step runs, and its file is gone after the
// step, which succeeded or failed.
func TestCIScriptSeed(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1.0")
	sc := newSidecar(t)
	work := generatedChart(t)
	ci := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-ci.sh")
	lockStep := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	seedFile := newSeed(t)
	b, err := os.ReadFile(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	seed := strings.TrimSpace(string(b))

	// DIGESTPIN: digestpin, after it wrote its command line and
	// environment where the test reads them.
	seen := filepath.Join(t.TempDir(), "seen")
	wrapper := filepath.Join(t.TempDir(), "digestpin")
	script := "#!/bin/sh\n{ echo \"$@\"; env; } >>" + seen + "\nexec " + digestpinBin(t) + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	runnerTemp := t.TempDir()
	var base []string
	for _, kv := range ciEnv(t, sc) {
		if !strings.HasPrefix(kv, "DIGESTPIN_SEED_FILE=") {
			base = append(base, kv)
		}
	}
	base = append(base, "DIGESTPIN="+wrapper, "RUNNER_TEMP="+runnerTemp,
		"DIGESTPIN_CI_CHART=generated", "DIGESTPIN_CI_RELEASE=shop", "DIGESTPIN_CI_COMMIT=false",
		"DIGESTPIN_CI_OUTPUT=manifests.yaml", "DIGESTPIN_CI_HELM_ARGS=--set=image="+reg.Ref("app:1.0"))

	// What digestpin-lock.sh writes with the seed's file.
	want := filepath.Join(t.TempDir(), "want.yaml")
	if r := runCmd(t, work, nil, append(slices.Clone(base), "RELEASE=shop"), lockStep, "--seed-file", seedFile, "--output", want, "--lock", filepath.Join(t.TempDir(), "l"), "generated", "--set=image="+reg.Ref("app:1.0")); r.err != nil {
		t.Fatalf("digestpin-lock.sh: %v\n%s", r.err, r.stderr)
	}
	wantBytes, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		desc   string
		env    []string
		status int
		stderr string
	}{
		{desc: "the seed", env: []string{"DIGESTPIN_CI_SEED=" + seed}, stderr: "manifests.yaml updated"},
		{desc: "the seed again", env: []string{"DIGESTPIN_CI_SEED=" + seed}, stderr: "manifests.yaml unchanged"},
		{desc: "with a line end, as a secret pasted from a file", env: []string{"DIGESTPIN_CI_SEED=" + seed + "\r\n"}, stderr: "manifests.yaml unchanged"},
		{desc: "its file", env: []string{"DIGESTPIN_CI_SEED_FILE=" + seedFile}, stderr: "manifests.yaml unchanged"},
		{desc: "both", env: []string{"DIGESTPIN_CI_SEED=" + seed, "DIGESTPIN_CI_SEED_FILE=" + seedFile}, status: 2, stderr: "digestpin-ci: DIGESTPIN_CI_SEED and DIGESTPIN_CI_SEED_FILE are both set"},
		{desc: "not a seed", env: []string{"DIGESTPIN_CI_SEED=" + strings.ToUpper(seed)}, status: 1, stderr: "not a digestpin seed"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := runCmd(t, work, nil, append(slices.Clone(base), tc.env...), ci)
			if got := exitStatus(r.err); got != tc.status || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("digestpin-ci.sh: exit status %d, stderr:\n%s\nwant %d and %q", got, r.stderr, tc.status, tc.stderr)
			}
			for _, v := range []string{seed, strings.ToUpper(seed)} {
				if strings.Contains(r.stdout+r.stderr, v) {
					t.Errorf("the step printed the seed:\n%s%s", r.stdout, r.stderr)
				}
			}
			if tc.status != 0 {
				return
			}
			if got, err := os.ReadFile(filepath.Join(work, "manifests.yaml")); err != nil || string(got) != string(wantBytes) {
				t.Errorf("manifests.yaml (%v) is not what the seed's file gives", err)
			}
		})
	}
	if names, _ := os.ReadDir(runnerTemp); len(names) != 0 {
		t.Errorf("RUNNER_TEMP holds %d files after the steps (%s...), want none", len(names), names[0].Name())
	}
	got, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "template") {
		t.Fatalf("the wrapper did not see digestpin template run:\n%s", got)
	}
	for _, v := range []string{seed, strings.ToUpper(seed)} {
		if strings.Contains(string(got), v) {
			t.Error("digestpin got the seed's value on its command line or in its environment")
		}
	}
}
