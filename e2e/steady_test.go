package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/testregistry"
)

// steadyCharts are the charts of testdata/steady, each with one source of
// randomness, and the warnings digestpin prints for two renders of each
// (release r in namespace ns; the hook Pod's name is random, so its
// warning is matched without it).
var steadyCharts = []struct {
	name     string
	warnings []string
	// inner are --set flags that each change a value that the chart
	// renders into a string beside generated text, and the text the new
	// output must hold: a real change inside a volatile field.
	inner [][2]string
}{
	{name: "webhook", warnings: []string{
		`Secret/r-tls (webhook/templates/webhook.yaml): data["tls.crt"], data["tls.key"] differ between two renders of the same input`,
		"Deployment/r (webhook/templates/deployment.yaml): pod template annotation checksum/config differs between two renders of the same input: this workload restarts on every render",
		"MutatingWebhookConfiguration/r (webhook/templates/webhook.yaml): webhooks[name=inject.steady.example].clientConfig.caBundle differs between two renders of the same input",
	}},
	{name: "password", warnings: []string{
		`Secret/r-password (password/templates/secret.yaml): data.password, stringData["config.ini"] differ between two renders of the same input`,
		"Deployment/r (password/templates/deployment.yaml): pod template annotation checksum/secret differs between two renders of the same input: this workload restarts on every render",
	}, inner: [][2]string{{"title=Web", "title = Web"}, {"settings={port = 80}", "    port = 80\n"}}},
	{name: "testhook", warnings: []string{
		"(testhook/templates/test.yaml): pod field metadata.name differs between two renders of the same input: this workload restarts on every render",
	}},
	{name: "now", warnings: []string{
		"Deployment/r (now/templates/deployment.yaml): pod template annotation deployed-at differs between two renders of the same input: this workload restarts on every render",
	}},
}

// steadyImage is the image of every workload of the steady charts.
const steadyImage = "steady/app:1"

// steadyChart copies testdata/steady/NAME into a new repository folder,
// at web/ (the source path the sidecar harness gives Argo CD), with
// values-e2e.yaml pointing at reg, and returns the chart folder.
func steadyChart(t *testing.T, chart string, reg *testregistry.Registry) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo", "web")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(repoRoot(t), "testdata", "steady", chart))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "values-e2e.yaml"), []byte("registry: "+reg.Host()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSteadyRenders renders each steady chart twice with the real Helm
// CLIs and pins it with --volatile-from the second render and --previous
// the output of the first run: nothing real changed gives the previous
// output byte for byte; a moved image, a value that matters, a document
// added or removed give the new output.
func TestSteadyRenders(t *testing.T) {
	for _, h := range []struct{ name, bin string }{{"helm3", helm3(t)}, {"helm4", helm4(t)}} {
		for _, c := range steadyCharts {
			t.Run(h.name+"/"+c.name, func(t *testing.T) {
				reg := testregistry.New(t)
				old := pushFixed(t, reg, steadyImage, "1")
				chart := steadyChart(t, c.name, reg)
				dir := t.TempDir()
				previous := filepath.Join(dir, "previous.yaml")
				// pin renders twice with the same flags and pins the first
				// render against the second and the previous output.
				pin := func(set ...string) result {
					t.Helper()
					args := []string{"template", "r", chart, "--namespace", "ns", "--values", filepath.Join(chart, "values-e2e.yaml")}
					for _, s := range set {
						args = append(args, "--set", s)
					}
					first := runCmd(t, dir, nil, nil, h.bin, args...)
					second := runCmd(t, dir, nil, nil, h.bin, args...)
					if first.err != nil || second.err != nil {
						t.Fatalf("helm template: %v %v\n%s%s", first.err, second.err, first.stderr, second.stderr)
					}
					if first.stdout == second.stdout {
						t.Fatalf("two renders of %s are the same: the chart has no randomness", c.name)
					}
					secondFile := filepath.Join(dir, "second.yaml")
					if err := os.WriteFile(secondFile, []byte(second.stdout), 0o644); err != nil {
						t.Fatal(err)
					}
					r := runCmd(t, dir, []byte(first.stdout), nil, digestpinBin(t), "--volatile-from", secondFile, "--previous", previous)
					if r.err != nil {
						t.Fatalf("digestpin: %v\n%s", r.err, r.stderr)
					}
					return r
				}
				keep := func(out string) {
					t.Helper()
					if err := os.WriteFile(previous, []byte(out), 0o644); err != nil {
						t.Fatal(err)
					}
				}

				// A first render: no previous output; the warnings name
				// the fields and the workloads they restart.
				first := pin()
				for _, w := range c.warnings {
					if !strings.Contains(first.stderr, w) {
						t.Errorf("stderr does not warn %q:\n%s", w, first.stderr)
					}
				}
				if want := reg.Ref(steadyImage) + "@" + old.String(); !strings.Contains(first.stdout, want) {
					t.Fatalf("output does not pin %s:\n%s", want, first.stdout)
				}
				keep(first.stdout)

				// Nothing real changed: the previous output, byte for byte.
				if again := pin(); again.stdout != first.stdout {
					t.Errorf("nothing changed, and the output is not the previous one:\n%s", cmp.Diff(first.stdout, again.stdout))
				}
				// A value that matters.
				if r := pin("replicas=2"); r.stdout == first.stdout || !strings.Contains(r.stdout, "replicas: 2") {
					t.Errorf("replicas=2: the output is the previous one or lacks replicas: 2:\n%s", r.stdout)
				}
				// A value rendered beside generated text in one string.
				for _, in := range c.inner {
					r := pin(in[0])
					if r.stdout == first.stdout || !strings.Contains(r.stdout, in[1]) {
						t.Errorf("%s: the output is the previous one or lacks %q:\n%s", in[0], in[1], r.stdout)
					}
					// And back: the previous output holds the value.
					keep(r.stdout)
					if back := pin(); back.stdout == r.stdout || strings.Contains(back.stdout, in[1]) {
						t.Errorf("%s, then without it: the output is the previous one or holds %q:\n%s", in[0], in[1], back.stdout)
					}
					keep(first.stdout)
				}
				// A document added, then removed.
				added := pin("extra=true")
				if added.stdout == first.stdout || !strings.Contains(added.stdout, "kind: ConfigMap") {
					t.Fatalf("extra=true: the output is the previous one or lacks the ConfigMap:\n%s", added.stdout)
				}
				keep(added.stdout)
				if removed := pin(); removed.stdout == added.stdout || strings.Contains(removed.stdout, "kind: ConfigMap") {
					t.Errorf("extra=false after extra=true: the output is the previous one or has the ConfigMap:\n%s", removed.stdout)
				}
				keep(first.stdout)
				if again := pin(); again.stdout != first.stdout {
					t.Errorf("back to the first output as previous: the output is not it:\n%s", cmp.Diff(first.stdout, again.stdout))
				}

				// The image moved: the new output, every workload of the
				// image pinned to the new digest.
				moved := pushFixed(t, reg, steadyImage, "2")
				r := pin()
				if r.stdout == first.stdout || strings.Contains(r.stdout, old.String()) {
					t.Fatalf("the image moved, and the output is the previous one or pins the old digest:\n%s", r.stdout)
				}
				if got, want := strings.Count(r.stdout, reg.Ref(steadyImage)+"@"+moved.String()), strings.Count(first.stdout, reg.Ref(steadyImage)+"@"+old.String()); got != want {
					t.Errorf("the new digest is pinned %d times, want %d (as many as the old one was)", got, want)
				}
			})
		}
	}
}

// TestSteadyShiftingList renders testdata/steady/shifting, whose
// container arguments are a generated number of generated ones and then
// the title from the chart's values, with both Helm CLIs: the title
// stands at another index in each render, and a new title must give the
// new output however the lengths of the renders and of the previous
// output fall (a comparison by index hid it about two times in three).
func TestSteadyShiftingList(t *testing.T) {
	for _, h := range []struct{ name, bin string }{{"helm3", helm3(t)}, {"helm4", helm4(t)}} {
		t.Run(h.name, func(t *testing.T) {
			reg := testregistry.New(t)
			pushFixed(t, reg, steadyImage, "1")
			chart := steadyChart(t, "shifting", reg)
			dir := t.TempDir()
			previous := filepath.Join(dir, "previous.yaml")
			secondFile := filepath.Join(dir, "second.yaml")
			pin := func(title string) result {
				t.Helper()
				args := []string{"template", "r", chart, "--namespace", "ns", "--values", filepath.Join(chart, "values-e2e.yaml"), "--set", "title=" + title}
				first := runCmd(t, dir, nil, nil, h.bin, args...)
				second := runCmd(t, dir, nil, nil, h.bin, args...)
				if first.err != nil || second.err != nil {
					t.Fatalf("helm template: %v %v\n%s%s", first.err, second.err, first.stderr, second.stderr)
				}
				if err := os.WriteFile(secondFile, []byte(second.stdout), 0o644); err != nil {
					t.Fatal(err)
				}
				r := runCmd(t, dir, []byte(first.stdout), nil, digestpinBin(t), "--volatile-from", secondFile, "--previous", previous)
				if r.err != nil {
					t.Fatalf("digestpin: %v\n%s", r.err, r.stderr)
				}
				return r
			}
			last := pin("Shop")
			for _, title := range []string{"Web", "Store", "Market", "Bazaar"} {
				if err := os.WriteFile(previous, []byte(last.stdout), 0o644); err != nil {
					t.Fatal(err)
				}
				r := pin(title)
				if r.stdout == last.stdout || !strings.Contains(r.stdout, "--title="+title+"\n") {
					t.Fatalf("title=%s: the output is the previous one or lacks --title=%s:\n%s", title, title, r.stderr)
				}
				last = r
			}
		})
	}
}

// TestSteadyArgoCD runs the plugin's generate twice for each steady chart,
// as Argo CD does: the same bytes both times, a state file 0600 in a 0700
// folder, the chart's randomness without DIGESTPIN_STEADY, and a moved
// image in the next output.
func TestSteadyArgoCD(t *testing.T) {
	for _, c := range steadyCharts {
		t.Run(c.name, func(t *testing.T) {
			reg := testregistry.New(t)
			pushFixed(t, reg, steadyImage, "1")
			sc := newSidecar(t)
			src := steadyChart(t, c.name, reg)
			values := "VALUES_FILES=values-e2e.yaml"
			generate := func(env ...string) result {
				t.Helper()
				r := sc.generate(t, src, append([]string{values}, env...)...)
				if r.err != nil {
					t.Fatalf("generate: %v\n%s", r.err, r.stderr)
				}
				return r
			}
			first := generate()
			if again := generate(); again.stdout != first.stdout {
				t.Errorf("the second generation differs:\n%s", cmp.Diff(first.stdout, again.stdout))
			}
			// The state: one file, 0600, in a 0700 folder under
			// $XDG_CACHE_HOME.
			state := filepath.Join(sc.home, "cache", "digestpin-state")
			fi, err := os.Stat(state)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o700 {
				t.Errorf("state folder mode %s, want 0700", fi.Mode().Perm())
			}
			files, err := filepath.Glob(filepath.Join(state, "*.yaml"))
			if err != nil || len(files) != 1 {
				t.Fatalf("state files %v (%v), want one", files, err)
			}
			if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("state file: %v, mode %v, want 0600", err, fi.Mode().Perm())
			}
			// Without steady renders, the chart's randomness shows.
			if off := generate("DIGESTPIN_STEADY=false"); off.stdout == first.stdout {
				t.Error("DIGESTPIN_STEADY=false gives the kept output: the chart has no randomness, or the switch is ignored")
			}
			// A push of the image under the same tag is real.
			moved := pushFixed(t, reg, steadyImage, "2")
			r := generate()
			if r.stdout == first.stdout || !strings.Contains(r.stdout, moved.String()) {
				t.Errorf("after a push the output is the previous one or does not pin %s", moved)
			}
			if again := generate(); again.stdout != r.stdout {
				t.Errorf("the generation after the push's differs:\n%s", cmp.Diff(r.stdout, again.stdout))
			}
		})
	}
}

// TestSteadyCIStep runs the CI step twice with --output for each steady
// chart: the second run leaves the file untouched.
func TestSteadyCIStep(t *testing.T) {
	step := filepath.Join(repoRoot(t), "scripts", "ci", "digestpin-lock.sh")
	for _, c := range steadyCharts {
		t.Run(c.name, func(t *testing.T) {
			reg := testregistry.New(t)
			pushFixed(t, reg, steadyImage, "1")
			sc := newSidecar(t)
			chart := steadyChart(t, c.name, reg)
			work := filepath.Dir(chart)
			env := []string{"PATH=" + sc.path, "HOME=" + sc.home, "RELEASE=r"}
			out := filepath.Join(work, "manifests.yaml")
			run := func(want string) os.FileInfo {
				t.Helper()
				r := runCmd(t, work, nil, env, step, "--output", "manifests.yaml", "web", "--namespace", "ns", "--values", "web/values-e2e.yaml")
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
				return fi
			}
			first := run("manifests.yaml updated")
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			second := run("manifests.yaml unchanged")
			if !os.SameFile(first, second) || !first.ModTime().Equal(second.ModTime()) {
				t.Error("the second run replaced manifests.yaml")
			}
			if b2, err := os.ReadFile(out); err != nil || string(b2) != string(b) {
				t.Errorf("manifests.yaml changed (%v):\n%s", err, cmp.Diff(string(b), string(b2)))
			}
			if left, _ := filepath.Glob(filepath.Join(work, ".digestpin-lock.*")); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// TestSteadyHelmPostRenderer runs digestpin as Helm's own post-renderer,
// with --volatile-from and --previous through --post-renderer-args: the
// second render is helm template with the same flags, the previous output
// what the first run printed. Helm 3 runs the digestpin binary; it does
// not post-render hooks (it prints them as the chart made them), so the
// test hook chart never comes out the same twice there and is left out.
// Helm 4 runs the post-renderer plugin, and hands it every document,
// hooks included, without "# Source:" comments but with its file
// annotation, in another order than helm template prints them.
func TestSteadyHelmPostRenderer(t *testing.T) {
	bin := digestpinBin(t)
	src := checkout(t, bin)
	for _, h := range []struct {
		name, helm string
		// postRenderer installs digestpin as the post-renderer in home
		// and returns what --post-renderer takes.
		postRenderer func(t *testing.T, home []string) string
	}{
		{"helm3", helm3(t), func(*testing.T, []string) string { return bin }},
		{"helm4", helm4(t), func(t *testing.T, home []string) string {
			// The install hook keeps the checkout's binary, which has
			// the plugin's version.
			mustRun(t, home, helm4(t), "plugin", "install", filepath.Join(src, h4PluginDir))
			return h4PluginName
		}},
	} {
		for _, c := range steadyCharts {
			if c.name == "testhook" && h.name == "helm3" {
				continue
			}
			t.Run(h.name+"/"+c.name, func(t *testing.T) {
				reg := testregistry.New(t)
				pushFixed(t, reg, steadyImage, "1")
				chart := steadyChart(t, c.name, reg)
				home := helmHome(t, t.TempDir())
				pr := h.postRenderer(t, home)
				dir := t.TempDir()
				second, previous := filepath.Join(dir, "second.yaml"), filepath.Join(dir, "previous.yaml")
				render := func(extra ...string) string {
					t.Helper()
					flags := append([]string{"template", "r", chart, "--namespace", "ns", "--values", filepath.Join(chart, "values-e2e.yaml")}, extra...)
					if err := os.WriteFile(second, []byte(mustRun(t, home, h.helm, flags...)), 0o644); err != nil {
						t.Fatal(err)
					}
					return mustRun(t, home, h.helm, append(flags, "--post-renderer", pr,
						"--post-renderer-args", "--volatile-from="+second, "--post-renderer-args", "--previous="+previous)...)
				}
				first := render()
				if !strings.Contains(first, "@sha256:") {
					t.Fatalf("the output is not pinned:\n%s", first)
				}
				if err := os.WriteFile(previous, []byte(first), 0o644); err != nil {
					t.Fatal(err)
				}
				if again := render(); again != first {
					t.Errorf("the second render is not the first:\n%s", cmp.Diff(first, again))
				}
				if changed := render("--set", "replicas=2"); changed == first || !strings.Contains(changed, "replicas: 2") {
					t.Errorf("replicas=2: the output is the previous one or lacks replicas: 2:\n%s", changed)
				}
				moved := pushFixed(t, reg, steadyImage, "2")
				if got := render(); got == first || !strings.Contains(got, "@"+moved.String()) {
					t.Errorf("a moved image: the output is the previous one, or lacks the new digest %s:\n%s", moved, got)
				}
			})
		}
	}
}

// TestSteadyArgoCDStateUnusable: a state folder the sidecar cannot use (a
// read-only or full disk, a folder others may write to, a broken file)
// costs the steadiness of the output, with a warning, never the
// generation: the output is the new render, whole, and exit 0.
func TestSteadyArgoCDStateUnusable(t *testing.T) {
	reg := testregistry.New(t)
	digest := pushFixed(t, reg, steadyImage, "1")
	for _, tc := range []struct {
		desc string
		// prepare returns DIGESTPIN_CMP_STATE_DIR, after a first
		// generation into the folder first (empty: none).
		prepare func(t *testing.T, first string) string
		want    string
	}{
		{
			desc: "a folder that cannot be made",
			prepare: func(t *testing.T, _ string) string {
				file := filepath.Join(t.TempDir(), "file")
				if err := os.WriteFile(file, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(file, "state")
			},
			want: "digestpin: warning: opening store: mkdir ",
		},
		{
			desc: "a folder others may write to",
			prepare: func(t *testing.T, first string) string {
				if err := os.Chmod(first, 0o777); err != nil {
					t.Fatal(err)
				}
				return first
			},
			want: "lets others write to it; want 0700: no previous output, none stored",
		},
		{
			desc: "a state file that cannot be replaced",
			prepare: func(t *testing.T, first string) string {
				// The state file becomes a folder: neither read nor
				// replaced.
				files, err := filepath.Glob(filepath.Join(first, "*.yaml"))
				if err != nil || len(files) != 1 {
					t.Fatalf("state files %v (%v), want one", files, err)
				}
				if err := os.Remove(files[0]); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Join(files[0], "x"), 0o700); err != nil {
					t.Fatal(err)
				}
				return first
			},
			want: "the next render is a first render",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			sc := newSidecar(t)
			src := steadyChart(t, "password", reg)
			state := filepath.Join(t.TempDir(), "state")
			values := "VALUES_FILES=values-e2e.yaml"
			if r := sc.generateWith(t, src, []string{"DIGESTPIN_CMP_STATE_DIR=" + state}, values); r.err != nil {
				t.Fatalf("first generate: %v\n%s", r.err, r.stderr)
			}
			dir := tc.prepare(t, state)
			r := sc.generateWith(t, src, []string{"DIGESTPIN_CMP_STATE_DIR=" + dir}, values)
			if r.err != nil {
				t.Fatalf("generate: %v\n%s", r.err, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not contain %q:\n%s", tc.want, r.stderr)
			}
			// The new render, whole: every document, the image pinned.
			if !strings.Contains(r.stdout, "@"+digest.String()) || !strings.Contains(r.stdout, "kind: Secret") || !strings.Contains(r.stdout, "kind: Deployment") {
				t.Errorf("output is not the whole render:\n%s", r.stdout)
			}
		})
	}
}
