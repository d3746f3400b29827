//go:build unix

package e2e

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// decodeStrict decodes the YAML file p into v, refusing any key v has no
// field for: a key the tests do not model (a step's if:, an action's
// outputs:) fails them instead of being ignored.
func decodeStrict(t *testing.T, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("parsing %s: %v", p, err)
	}
}

// ciRepo is a CI job's checkout: a git repository holding the shop chart
// (web/, with its dependency built) and values pointing at a loopback
// registry, with a bare repository as its origin.
type ciRepo struct {
	dir    string // the checkout, the job's working folder
	origin string // the bare repository it was cloned from
}

// newCIRepo makes a ciRepo whose chart uses the images of reg, with main
// checked out and pushed to origin.
func newCIRepo(t *testing.T, reg *testregistry.Registry) *ciRepo {
	t.Helper()
	chart := ciChart(t, newSidecar(t), reg)
	r := &ciRepo{dir: filepath.Dir(chart), origin: filepath.Join(t.TempDir(), "origin.git")}
	if err := os.Mkdir(r.origin, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, r.origin, "init", "-q", "--bare", "-b", "main")
	gitRepo(t, r.dir, "")
	git(t, r.dir, "remote", "add", "origin", r.origin)
	git(t, r.dir, "push", "-q", "-u", "origin", "main")
	return r
}

// gitOut runs git in dir, as git does in a CI job (no user or system
// configuration, only dir's own repository), and returns its stdout.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	res := runCmd(t, dir, nil, ciGitEnv(dir), "git", args...)
	if res.err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), res.err, res.stderr)
	}
	return strings.TrimSpace(res.stdout)
}

// ciGitEnv keeps git to the repository dir: no user or system
// configuration, no repository above dir.
func ciGitEnv(dir string) []string {
	return []string{
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir),
	}
}

// state is what a CI run may have changed in the repository.
type ciState struct {
	head, origin string    // commits of HEAD and of origin's main
	lock         []byte    // web/digests.lock, nil when missing
	lockTime     time.Time // its modification time
	status       string    // git status --porcelain
}

func (r *ciRepo) state(t *testing.T) ciState {
	t.Helper()
	s := ciState{
		head:   gitOut(t, r.dir, "rev-parse", "HEAD"),
		origin: gitOut(t, r.origin, "rev-parse", "main"),
		status: gitOut(t, r.dir, "status", "--porcelain"),
	}
	p := filepath.Join(r.dir, "web", "digests.lock")
	if fi, err := os.Stat(p); err == nil {
		s.lockTime = fi.ModTime()
		if s.lock, err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// ciPath returns a PATH with the system's tools (bash, git, curl, tar,
// sha256sum); never Go, nor helm, nor a digestpin: the CI steps must
// install theirs, and need no Helm CLI.
func ciPath(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"bash", "git", "curl", "tar", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (make test installs it): %v", tool, err)
		}
	}
	for _, dir := range []string{"/usr/bin", "/bin"} {
		if _, err := os.Stat(filepath.Join(dir, "helm")); err == nil {
			t.Fatalf("%s/helm exists: the test would not show that the CI steps need no Helm CLI", dir)
		}
	}
	return "/usr/bin:/bin"
}

// ciCase is one run of a CI job, and what must come of it.
type ciCase struct {
	desc   string
	vars   map[string]string // the job's inputs or variables
	push   string            // push a new image under this repository:tag first
	broken bool              // add a template that helm cannot render
	fail   bool              // the job must fail
	output []string          // what its output must contain
	absent []string          // what its output must not contain
	commit bool              // the job must commit the lock file, and push it
	// summary is what the job's summary file (digestpin-summary.md, the
	// GitLab template's artifact) must hold after it: each line, in
	// Markdown; nil: no check.
	summary []string
}

// checkCIRun checks a run's outcome against c: its status and output,
// and how the repository changed from before.
func checkCIRun(t *testing.T, c ciCase, r *ciRepo, before ciState, out string, err error) {
	t.Helper()
	if (err != nil) != c.fail {
		t.Errorf("%s: job ended with %v, want failure: %v\n%s", c.desc, err, c.fail, out)
	}
	for _, w := range c.output {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output does not contain %q:\n%s", c.desc, w, out)
		}
	}
	for _, w := range c.absent {
		if strings.Contains(out, w) {
			t.Errorf("%s: output contains %q:\n%s", c.desc, w, out)
		}
	}
	after := r.state(t)
	if c.broken {
		after.status = strings.TrimSpace(strings.ReplaceAll(after.status, "?? web/templates/broken.yaml", ""))
	}
	if c.summary != nil {
		b, err := os.ReadFile(filepath.Join(r.dir, ciSummary))
		if err != nil {
			t.Errorf("%s: the job wrote no summary: %v", c.desc, err)
		}
		for _, w := range c.summary {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s: the summary %s does not contain %q:\n%s", c.desc, ciSummary, w, b)
			}
		}
	}
	// The summary is the job's artifact, never committed.
	after.status = strings.TrimSpace(strings.ReplaceAll(after.status, "?? "+ciSummary, ""))
	if after.status != "" {
		t.Errorf("%s: git status --porcelain after the job:\n%s\nwant a clean checkout", c.desc, after.status)
	}
	if !c.commit {
		if after.head != before.head || after.origin != before.origin {
			t.Errorf("%s: HEAD %s → %s, origin %s → %s; want no commit", c.desc, before.head, after.head, before.origin, after.origin)
		}
		// Untouched: the same bytes, not even rewritten.
		if !bytes.Equal(after.lock, before.lock) || !after.lockTime.Equal(before.lockTime) {
			t.Errorf("%s: web/digests.lock changed (modified %v → %v):\n%s", c.desc, before.lockTime, after.lockTime, after.lock)
		}
		return
	}
	if after.head == before.head || after.origin != after.head {
		t.Errorf("%s: HEAD %s → %s, origin's main %s; want a new commit, pushed", c.desc, before.head, after.head, after.origin)
	}
	if files := gitOut(t, r.dir, "show", "--name-only", "--format=", "HEAD"); files != "web/digests.lock" {
		t.Errorf("%s: the new commit holds %q, want web/digests.lock", c.desc, files)
	}
}

// ciSummary is the summary file the GitLab template writes in the
// project folder, its artifact.
const ciSummary = "digestpin-summary.md"

// runCICases runs the CI job run for each case in order, against the
// images of reg, and checks each outcome; digests holds the images'
// digests, and the lock file must hold them after every successful
// update, and the message of its commit say what moved since the last
// one (digestpin's text summary).
func runCICases(t *testing.T, r *ciRepo, reg *testregistry.Registry, digests map[string]v1.Hash, cases []ciCase, run func(vars map[string]string) (string, error)) {
	t.Helper()
	broken := filepath.Join(r.dir, "web", "templates", "broken.yaml")
	var committed map[string]v1.Hash // the digests of the last commit
	for _, c := range cases {
		if c.push != "" {
			digests[c.push] = pushFixed(t, reg, c.push, c.desc)
		}
		if c.broken {
			if err := os.WriteFile(broken, []byte("value: {{ .Values.missing.deeper }}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := r.state(t)
		out, err := run(c.vars)
		checkCIRun(t, c, r, before, out, err)
		if err := os.RemoveAll(broken); err != nil {
			t.Fatal(err)
		}
		if c.commit {
			lock := string(r.state(t).lock)
			for im, d := range digests {
				if want := reg.Ref(im) + "\n    digest: " + d.String(); !strings.Contains(lock, want) {
					t.Errorf("%s: lock file lacks %q:\n%s", c.desc, want, lock)
				}
			}
			checkCommitMessage(t, c.desc, gitOut(t, r.dir, "log", "-1", "--format=%B"), reg, committed, digests)
			committed = maps.Clone(digests)
		}
	}
}

// checkCommitMessage checks that the message of a commit of the lock
// file names each image that moved from before (nil: the first lock
// file) to now, "REF OLD → NEW: Deployment/…", digests short, and no
// other.
func checkCommitMessage(t *testing.T, desc, msg string, reg *testregistry.Registry, before, now map[string]v1.Hash) {
	t.Helper()
	if before == nil {
		if !strings.Contains(msg, "images pinned (nothing to compare with") {
			t.Errorf("%s: the first lock file's commit message does not say so:\n%s", desc, msg)
		}
		return
	}
	for im, d := range now {
		line := reg.Ref(im) + " " + before[im].Hex[:12] + " → " + d.Hex[:12] + ": Deployment/"
		if moved := before[im] != d; strings.Contains(msg, line) != moved {
			t.Errorf("%s: commit message holds %q: %v, want %v:\n%s", desc, line, !moved, moved, msg)
		}
	}
}

// actionFile is action.yml: every key the runner reads for a composite
// action, and no other.
type actionFile struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Author      string `yaml:"author"`
	Branding    struct {
		Icon  string `yaml:"icon"`
		Color string `yaml:"color"`
	} `yaml:"branding"`
	Inputs map[string]struct {
		Description string `yaml:"description"`
		Required    bool   `yaml:"required"`
		Default     string `yaml:"default"`
	} `yaml:"inputs"`
	Runs struct {
		Using string `yaml:"using"`
		Steps []struct {
			Name  string            `yaml:"name"`
			Shell string            `yaml:"shell"`
			Env   map[string]string `yaml:"env"`
			Run   string            `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"runs"`
}

var expression = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// runAction runs action.yml's steps as the GitHub runner runs a composite
// action used with the given inputs: each run: with its shell's command
// (bash --noprofile --norc -eo pipefail FILE), ${{ inputs.NAME }}
// replaced by the input or its default, the runner's variables
// (GITHUB_ACTION_PATH is this checkout, RUNNER_TEMP is new for each job),
// the step's env, and what earlier steps added to GITHUB_PATH; in the
// workspace, until a step fails. It returns what the steps printed.
func runAction(t *testing.T, workspace, path string, inputs map[string]string) (string, error) {
	t.Helper()
	var a actionFile
	decodeStrict(t, filepath.Join(repoRoot(t), "action.yml"), &a)
	if a.Runs.Using != "composite" {
		t.Fatalf("action.yml runs using %q, want composite", a.Runs.Using)
	}
	for name := range inputs {
		if _, ok := a.Inputs[name]; !ok {
			t.Fatalf("action.yml has no input %q", name)
		}
	}
	expand := func(s string) string {
		return expression.ReplaceAllStringFunc(s, func(m string) string {
			name, ok := strings.CutPrefix(expression.FindStringSubmatch(m)[1], "inputs.")
			in, known := a.Inputs[name]
			if !ok || !known {
				t.Fatalf("action.yml uses %s, which this test does not model", m)
			}
			if v, ok := inputs[name]; ok {
				return v
			}
			if in.Required {
				t.Fatalf("action.yml's input %s is required", name)
			}
			return in.Default
		})
	}
	temp := t.TempDir()
	files := map[string]string{}
	for _, f := range []string{"GITHUB_PATH", "GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"} {
		files[f] = filepath.Join(t.TempDir(), f)
		if err := os.WriteFile(files[f], nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	for i, s := range a.Runs.Steps {
		if s.Shell != "bash" || s.Run == "" {
			t.Fatalf("action.yml step %d (%s): shell %q, run %q; want a bash run step", i, s.Name, s.Shell, s.Run)
		}
		script := filepath.Join(t.TempDir(), "step.sh")
		if err := os.WriteFile(script, []byte(expand(s.Run)), 0o644); err != nil {
			t.Fatal(err)
		}
		env := append(ciGitEnv(workspace),
			"PATH="+path, "HOME="+t.TempDir(), "CI=true", "GITHUB_ACTIONS=true", "RUNNER_OS=Linux",
			"RUNNER_TEMP="+temp, "GITHUB_WORKSPACE="+workspace, "GITHUB_ACTION_PATH="+repoRoot(t),
			// No cluster: never the developer's own.
			"KUBECONFIG="+filepath.Join(temp, "no-kubeconfig"))
		for f, p := range files {
			env = append(env, f+"="+p)
		}
		for k, v := range s.Env {
			env = append(env, k+"="+expand(v))
		}
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", script)
		cmd.Dir = workspace
		cmd.Env = cleanEnv(env...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return out.String() + jobSummary(t, files["GITHUB_STEP_SUMMARY"]), err
		}
		// The runner puts what a step added to GITHUB_PATH first on PATH
		// for the next steps; GITHUB_ENV is not modelled here.
		b, err := os.ReadFile(files["GITHUB_PATH"])
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range strings.Fields(string(b)) {
			path = dir + ":" + path
		}
		if fi, err := os.Stat(files["GITHUB_ENV"]); err != nil || fi.Size() != 0 {
			t.Fatalf("step %s wrote GITHUB_ENV (%v), which this test does not model", s.Name, err)
		}
		if err := os.WriteFile(files["GITHUB_PATH"], nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out.String() + jobSummary(t, files["GITHUB_STEP_SUMMARY"]), nil
}

// jobSummary is what the job wrote to GITHUB_STEP_SUMMARY, under a line
// that says so, for the cases to check beside the job's output.
func jobSummary(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return "\n--- GITHUB_STEP_SUMMARY ---\n" + string(b)
}

// TestGitHubAction runs action.yml as a GitHub workflow step would, in a
// checkout with a chart, against a release served on loopback (made by
// make release for this platform) and a loopback registry.
func TestGitHubAction(t *testing.T) {
	t.Parallel()
	dir, version := releaseFiles(t)
	base := releaseServer(t, dir, version)
	reg := testregistry.New(t)
	digests := pushShop(t, reg)
	r := newCIRepo(t, reg)
	path := ciPath(t)
	seed := seedText(t)
	seedFile := newSeed(t)

	with := func(extra ...string) map[string]string {
		m := map[string]string{
			"chart": "web", "release": "shop", "namespace": "prod", "values": "web/values-e2e.yaml",
			"releases-url": base + "/v" + version,
		}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	runCICases(t, r, reg, digests, []ciCase{
		{
			desc: "first update", vars: with("seed", seed), commit: true,
			output: []string{"downloading " + base + "/v" + version + "/", "installed digestpin " + version, "web/digests.lock updated", "pushed to branch main"},
			absent: []string{strings.TrimSpace(seed), "throwaway"},
		},
		{desc: "update, nothing changed", vars: with(), output: []string{"web/digests.lock unchanged", "nothing to commit"}},
		{desc: "check", vars: with("mode", "check", "seed-file", seedFile), output: []string{"web/digests.lock matches the registry"}, absent: []string{"throwaway"}},
		{
			desc: "check without a seed", vars: with("mode", "check"),
			output: []string{"web/digests.lock matches the registry", "no seed given", "throwaway seed"},
		},
		{
			desc: "output without a seed", vars: with("output", "manifests.yaml"), fail: true,
			output: []string{"--output keeps the manifests", "give --seed-file FILE or DIGESTPIN_SEED_FILE"},
		},
		{
			desc: "check after a push", vars: with("mode", "check", "summary-file", ciSummary), push: "shop/web:1.4", fail: true,
			output: []string{
				reg.Ref("shop/web:1.4") + ": moved from", "does not match the registry",
				"digestpin-lock: 1 image moved", "--- GITHUB_STEP_SUMMARY ---\n### digestpin: 1 image moved", "| `" + reg.Ref("shop/web:1.4") + "` | `",
			},
			summary: []string{"### digestpin: 1 image moved", "| `" + reg.Ref("shop/web:1.4") + "` | `"},
		},
		{
			desc: "check of a broken chart", vars: with("mode", "check"), broken: true, fail: true,
			output: []string{"render failed", "broken.yaml", "nil pointer"}, absent: []string{"does not match the registry"},
		},
		{
			desc: "update of a broken chart", vars: with(), broken: true, fail: true,
			output: []string{"render failed", "broken.yaml"}, absent: []string{"updated"},
		},
		{
			desc: "update after the push", vars: with(), commit: true,
			output: []string{"web/digests.lock updated", "--- GITHUB_STEP_SUMMARY ---\n### digestpin: 1 image moved", "| `" + reg.Ref("shop/web:1.4") + "` | `"},
		},
		{
			desc: "check again", vars: with("mode", "check"),
			output: []string{"matches the registry", "--- GITHUB_STEP_SUMMARY ---\n### digestpin: no image moved"},
		},
		{
			desc: "version input", vars: with("mode", "check", "version", "v"+version),
			output: []string{"installed digestpin " + version, "matches the registry"},
		},
		{
			desc: "no such version", vars: with("version", "0.0.9"), fail: true,
			output: []string{"digestpin_0.0.9_", "cannot download"}, absent: []string{"digestpin-lock:"},
		},
		{
			desc: "wrong checksum", vars: with("releases-url", base+"/bad"), fail: true,
			output: []string{"refusing to install it"}, absent: []string{"digestpin-lock:"},
		},
		{
			desc: "bad mode", vars: with("mode", "verify"), fail: true,
			output: []string{"DIGESTPIN_CI_MODE=verify: want update, check, refresh, refresh-moved, flux or flux-check"},
		},
		// The refresh itself runs under a running Argo CD in e2e/argocd;
		// here: the inputs reach digestpin argocd refresh, and no chart is
		// needed.
		{
			desc: "refresh without images", vars: map[string]string{"mode": "refresh", "releases-url": base + "/v" + version}, fail: true,
			output: []string{"DIGESTPIN_CI_MODE=refresh: DIGESTPIN_CI_IMAGES (the action's images input) names no image"},
		},
		{
			desc: "refresh without a cluster", vars: map[string]string{"mode": "refresh", "images": reg.Ref("shop/web:1.4") + ", " + reg.Ref("shop/db:16"), "argocd-namespace": "argocd", "releases-url": base + "/v" + version}, fail: true,
			output: []string{"digestpin: error: reading the kubeconfig: invalid configuration: no configuration has been provided"}, absent: []string{"digestpin-lock:"},
		},
		// Mode refresh-moved: the inputs reach digestpin argocd refresh
		// --moved (its pinning settings from the job's DIGESTPIN_*
		// variables: a bad one fails before any cluster is asked).
		{
			desc: "refresh-moved without a cluster", vars: map[string]string{"mode": "refresh-moved", "argocd-namespace": "argocd", "argocd-selector": "team=shop", "releases-url": base + "/v" + version}, fail: true,
			output: []string{"digestpin: error: reading the kubeconfig: invalid configuration: no configuration has been provided"}, absent: []string{"digestpin-lock:", "name no IMAGE"},
		},
		{
			desc: "refresh-moved with images", vars: map[string]string{"mode": "refresh-moved", "images": reg.Ref("shop/web:1.4"), "releases-url": base + "/v" + version}, fail: true,
			output: []string{"digestpin-ci: DIGESTPIN_CI_MODE=refresh-moved finds what moved itself: DIGESTPIN_CI_IMAGES (the action's images input) is for mode refresh"},
		},
		// Mode flux: the input reaches digestpin-lock.sh --flux (TestCIStepFlux
		// runs it on a GitOps repository).
		{
			desc: "flux without files", vars: map[string]string{"mode": "flux", "releases-url": base + "/v" + version}, fail: true,
			output: []string{"DIGESTPIN_CI_MODE=flux: DIGESTPIN_CI_FLUX_FILES (the action's flux-files input) names no file"},
		},
		{
			desc: "flux of a missing file", vars: map[string]string{"mode": "flux", "flux-files": "clusters/gone.yaml", "releases-url": base + "/v" + version}, fail: true,
			output: []string{"digestpin-lock: Flux file clusters/gone.yaml not found"},
		},
		{
			desc: "refresh of a bad image", vars: map[string]string{"mode": "refresh", "images": "-bad", "releases-url": base + "/v" + version}, fail: true,
			output: []string{`digestpin: error: image "-bad": invalid reference format`},
		},
	}, func(vars map[string]string) (string, error) {
		return runAction(t, r.dir, path, vars)
	})
}
