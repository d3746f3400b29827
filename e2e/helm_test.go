//go:build unix

package e2e

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// The Helm 4 post-renderer plugin's folder and name.
const (
	h4PluginDir  = "plugin/digestpin-postrenderer"
	h4PluginName = "digestpin-postrenderer"
)

// TestHelm renders testdata/chart with the real Helm 3 and Helm 4 CLIs
// through digestpin, against a loopback registry, in every way the README
// documents: Helm 3's --post-renderer binary, the Helm 3 plugin, and the
// Helm 4 post-renderer plugin installed from a checkout. Installs from a
// release URL are TestPluginInstallFromURL's.
func TestHelm(t *testing.T) {
	testfiles.Slow(t)
	t.Parallel()
	bin, h3, h4 := digestpinBin(t), helm3(t), helm4(t)
	reg := testregistry.New(t)
	for _, img := range []string{"app:1.0", "db:1.0", "tools:1.0"} {
		reg.PushImage(t, img)
	}
	src := checkout(t, bin)
	chart := filepath.Join(src, "testdata", "chart")
	path := pathDir(t, map[string]string{"digestpin": bin, "helm": h3})
	sets := func(app string) []string {
		return []string{
			"--set", "image.app=" + reg.Ref(app),
			"--set", "image.db=" + reg.Ref("db:1.0"),
			"--set", "image.tools=" + reg.Ref("tools:1.0"),
		}
	}
	template := func(app string, extra ...string) []string {
		return append(append([]string{"template", "demo", chart}, sets(app)...), extra...)
	}
	pinned := func(repoTag string) string {
		t.Helper()
		return pinnedRef(t, reg.Ref(repoTag))
	}

	// Helm 3, with the digestpin binary on PATH as the post-renderer.
	home3 := helmHome(t, path)
	out3 := mustRun(t, home3, h3, template("app:1.0", "--post-renderer", "digestpin")...)
	docs3 := parseDocs(t, out3)
	wantImages(t, "helm 3", docs3, map[string]string{
		"Deployment/demo-web": pinned("app:1.0"),
		"StatefulSet/demo-db": pinned("db:1.0"),
		// Helm 3 never post-renders hooks and test pods (helm/helm#7891).
		"Job/demo-migrate":         reg.Ref("app:1.0"),
		"Pod/demo-test-connection": reg.Ref("tools:1.0"),
	})

	t.Run("helm3 show-only", func(t *testing.T) {
		got := mustRun(t, home3, h3, template("app:1.0", "--post-renderer", "digestpin", "--show-only", "templates/deployment.yaml")...)
		docs := parseDocs(t, got)
		if len(docs) != 1 || docs["Deployment/demo-web"].raw != docs3["Deployment/demo-web"].raw {
			t.Errorf("helm template --show-only templates/deployment.yaml = \n%s\nwant the pinned Deployment only:\n%s", got, docs3["Deployment/demo-web"].raw)
		}
	})

	t.Run("helm3 post-renderer-args", func(t *testing.T) {
		got := mustRun(t, home3, h3, template("app:1.0", "--post-renderer", "digestpin", "--post-renderer-args", "--mode=digest")...)
		want := strings.Replace(pinned("app:1.0"), ":1.0@", "@", 1)
		wantImages(t, "helm 3 --mode=digest", parseDocs(t, got), map[string]string{"Deployment/demo-web": want})
	})

	t.Run("helm3 plugin", func(t *testing.T) {
		// From the checkout, built with Go as the README says.
		home := helmHome(t, path)
		if out := mustRun(t, append(home, "DIGESTPIN_PLUGIN_BUILD=true"), h3, "plugin", "install", src); !strings.Contains(out, "building digestpin") {
			t.Errorf("helm plugin install printed\n%s\nwant the hook to build digestpin from source", out)
		}
		plugins := strings.TrimSpace(mustRun(t, home, h3, "env", "HELM_PLUGINS"))
		for _, pr := range [][]string{
			{"--post-renderer", "helm", "--post-renderer-args", "digestpin"},
			{"--post-renderer", filepath.Join(plugins, filepath.Base(src), "bin", "digestpin")},
		} {
			if got := mustRun(t, home, h3, template("app:1.0", pr...)...); got != out3 {
				t.Errorf("helm template %s = \n%s\nwant the same as with the binary on PATH:\n%s", strings.Join(pr, " "), got, out3)
			}
		}
	})

	// Helm 4, with the post-renderer plugin installed from the checkout: its
	// install hook builds bin/digestpin from the checkout's source.
	home4 := helmHome(t, path)
	inst := mustRun(t, append(home4, "DIGESTPIN_PLUGIN_BUILD=true"), h4, "plugin", "install", filepath.Join(src, h4PluginDir))
	if !strings.Contains(inst, "building digestpin") {
		t.Errorf("helm plugin install %s printed\n%s\nwant the hook to build digestpin from source", h4PluginDir, inst)
	}
	// The checkout build uses make build's flags, so that the two share
	// Go's cache (CGO_ENABLED alone rebuilds every package over net).
	installed := filepath.Join(strings.TrimSpace(mustRun(t, home4, h4, "env", "HELM_PLUGINS")), h4PluginName, "bin")
	for _, name := range []string{"digestpin", "digestpin-helm"} {
		want := filepath.Join(filepath.Dir(bin), name)
		if got, want := buildFlags(t, filepath.Join(installed, name)), buildFlags(t, want); got != want {
			t.Errorf("the plugin's checkout build of %s has build settings\n%s\nwant make build's\n%s", name, got, want)
		}
	}
	out4 := mustRun(t, home4, h4, template("app:1.0", "--post-renderer", h4PluginName)...)
	docs4 := parseDocs(t, out4)
	wantImages(t, "helm 4", docs4, map[string]string{
		"Deployment/demo-web":      pinned("app:1.0"),
		"StatefulSet/demo-db":      pinned("db:1.0"),
		"Job/demo-migrate":         pinned("app:1.0"),
		"Pod/demo-test-connection": pinned("tools:1.0"),
	})

	t.Run("same checksum under helm 3 and 4", func(t *testing.T) {
		for _, k := range []string{"Deployment/demo-web", "StatefulSet/demo-db"} {
			if c3, c4 := docs3[k].checksum, docs4[k].checksum; c3 == "" || c3 != c4 {
				t.Errorf("%s checksum: helm 3 %q, helm 4 %q, want equal and set", k, c3, c4)
			}
		}
	})

	t.Run("helm4 show-only", func(t *testing.T) {
		got := mustRun(t, home4, h4, template("app:1.0", "--post-renderer", h4PluginName, "--show-only", "templates/deployment.yaml")...)
		docs := parseDocs(t, got)
		if len(docs) != 1 || docs["Deployment/demo-web"].raw != docs4["Deployment/demo-web"].raw {
			t.Errorf("helm template --show-only templates/deployment.yaml = \n%s\nwant the pinned Deployment only:\n%s", got, docs4["Deployment/demo-web"].raw)
		}
	})

	t.Run("helm4 post-renderer-args", func(t *testing.T) {
		got := mustRun(t, home4, h4, template("app:1.0", "--post-renderer", h4PluginName, "--post-renderer-args", "--mode=digest")...)
		want := strings.Replace(pinned("app:1.0"), ":1.0@", "@", 1)
		wantImages(t, "helm 4 --mode=digest", parseDocs(t, got), map[string]string{"Job/demo-migrate": want})
	})

	t.Run("helm4 renders twice byte-identical", func(t *testing.T) {
		if got := mustRun(t, home4, h4, template("app:1.0", "--post-renderer", h4PluginName)...); got != out4 {
			t.Errorf("second render differs:\n%s\nfirst:\n%s", got, out4)
		}
	})

	t.Run("missing image", func(t *testing.T) {
		missing := reg.Ref("missing:1.0")
		for _, tc := range []struct {
			desc string
			helm string
			home []string
			pr   string
		}{
			{desc: "helm3", helm: h3, home: home3, pr: "digestpin"},
			{desc: "helm4", helm: h4, home: home4, pr: h4PluginName},
		} {
			t.Run(tc.desc, func(t *testing.T) {
				logFile := filepath.Join(t.TempDir(), "digestpin.log")
				env := append(tc.home, "DIGESTPIN_LOG_FILE="+logFile)
				args := template("missing:1.0", "--post-renderer", tc.pr)

				// At a terminal, the person sees the reason exactly once:
				// Helm 3 shows a post-renderer's stderr in its error,
				// Helm 4 does not, and digestpin writes to the terminal.
				res := runTTY(t, env, tc.helm, args...)
				if res.err == nil {
					t.Fatalf("helm template with a missing image succeeded:\n%s", res.stdout)
				}
				if n := strings.Count(res.stdout, "digestpin: error:"); n != 1 || !strings.Contains(res.stdout, missing) {
					t.Errorf("terminal shows %d digestpin errors, want 1 naming %s:\n%s", n, missing, res.stdout)
				}

				// Without a terminal, the log file has it.
				res = runHelm(t, env, tc.helm, args...)
				if res.err == nil {
					t.Fatalf("helm template with a missing image succeeded:\n%s", res.stdout)
				}
				if log, err := os.ReadFile(logFile); err != nil || !strings.Contains(string(log), missing) {
					t.Errorf("log file %s = %q (%v), want it to name %s", logFile, log, err, missing)
				}
				if tc.helm == h4 && strings.Contains(res.stderr, missing) {
					t.Errorf("helm 4 now shows a post-renderer's stderr; digestpin's --tty-errors would show it twice:\n%s", res.stderr)
				}
			})
		}
	})

	// Last, as it moves a tag: a new image under app:1.0 changes exactly
	// the templates that use it, and nothing else.
	t.Run("moving a tag", func(t *testing.T) {
		reg.PushImage(t, "app:1.0")
		docs := parseDocs(t, mustRun(t, home4, h4, template("app:1.0", "--post-renderer", h4PluginName)...))
		uses := map[string]bool{"Deployment/demo-web": true, "Job/demo-migrate": true}
		if len(docs) != len(docs4) {
			t.Fatalf("%d documents after the move, want %d", len(docs), len(docs4))
		}
		for k, before := range docs4 {
			changed := docs[k].raw != before.raw
			if changed != uses[k] {
				t.Errorf("%s changed = %v, want %v:\n%s", k, changed, uses[k], docs[k].raw)
			}
			if uses[k] && docs[k].checksum == before.checksum {
				t.Errorf("%s checksum %s did not change", k, before.checksum)
			}
		}
	})
}

// TestHelmPluginVersions checks that the two plugins carry the one version
// number the Makefile stamps into the binary.
func TestHelmPluginVersions(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	var versions []string
	for _, f := range []string{"plugin.yaml", filepath.Join(h4PluginDir, "plugin.yaml")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ Version string }
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatalf("parsing %s: %v", f, err)
		}
		versions = append(versions, m.Version)
	}
	if versions[0] == "" || versions[0] != versions[1] {
		t.Errorf("plugin versions %q, want one version in both plugin.yaml files", versions)
	}
}

// doc is one object of a rendered stream.
type doc struct {
	raw      string // without surrounding blank lines
	image    string // of the first container
	checksum string // the pod template's checksum/images
}

// parseDocs splits out into its objects by "Kind/name".
func parseDocs(t *testing.T, out string) map[string]doc {
	t.Helper()
	type container struct{ Image string }
	type podSpec struct{ Containers []container }
	type meta struct {
		Name        string
		Annotations map[string]string
	}
	docs := map[string]doc{}
	for _, raw := range documents(t, out) {
		var o struct {
			Kind     string
			Metadata meta
			Spec     struct {
				podSpec  `yaml:",inline"`
				Template struct {
					Metadata meta
					Spec     podSpec
				}
			}
		}
		if err := yaml.Unmarshal([]byte(raw), &o); err != nil {
			t.Fatalf("parsing %q: %v", raw, err)
		}
		if o.Kind == "" {
			continue
		}
		// Trailing blank lines vary with --show-only.
		d := doc{raw: strings.TrimSpace(raw)}
		spec, ann := o.Spec.Template.Spec, o.Spec.Template.Metadata.Annotations
		if o.Kind == "Pod" {
			spec, ann = o.Spec.podSpec, o.Metadata.Annotations
		}
		if len(spec.Containers) > 0 {
			d.image = spec.Containers[0].Image
		}
		d.checksum = ann["checksum/images"]
		docs[o.Kind+"/"+o.Metadata.Name] = d
	}
	return docs
}

// wantImages checks the image of each named workload.
func wantImages(t *testing.T, desc string, docs map[string]doc, want map[string]string) {
	t.Helper()
	for k, w := range want {
		d, ok := docs[k]
		if !ok {
			t.Errorf("%s: no %s in the output", desc, k)
			continue
		}
		if d.image != w {
			t.Errorf("%s: %s image = %q, want %q", desc, k, d.image, w)
		}
		pinned := strings.Contains(w, "@sha256:")
		if pinned != (d.checksum != "") {
			t.Errorf("%s: %s checksum/images = %q, want it set only when pinned", desc, k, d.checksum)
		}
	}
}

// pinnedRef returns ref pinned to the digest the registry serves, as
// digestpin writes it by default.
func pinnedRef(t *testing.T, ref string) string {
	t.Helper()
	res := runHelm(t, nil, digestpinBin(t), "--mode=pin", "-f", writeManifest(t, ref))
	if res.err != nil {
		t.Fatalf("digestpin: %v\n%s", res.err, res.stderr)
	}
	m := regexp.MustCompile(`image: ["']?([^"'\n]+)`).FindStringSubmatch(res.stdout)
	if m == nil || !strings.Contains(m[1], "@sha256:") {
		t.Fatalf("digestpin did not pin %s:\n%s", ref, res.stdout)
	}
	return m[1]
}

// writeManifest writes a Pod with image ref and returns its path.
func writeManifest(t *testing.T, ref string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pod.yaml")
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n    - name: c\n      image: " + ref + "\n"
	if err := os.WriteFile(p, []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// helmHome returns the environment of a throw-away Helm home, with path
// first on PATH, and the plugins' release URL on a closed loopback port, so
// that no install hook reaches the internet. HELM_PLUGINS is the data home's plugins folder because
// Helm 4.3.1 installs a plugin from a local folder or archive into
// $HELM_DATA_HOME/plugins whatever HELM_PLUGINS says (helm/helm#32646).
// buildFlags are the build settings of the Go binary file that decide how
// its packages are compiled and linked, one per line.
func buildFlags(t *testing.T, file string) string {
	t.Helper()
	info, err := buildinfo.ReadFile(file)
	if err != nil {
		t.Fatalf("reading the build information of %s: %v", file, err)
	}
	var b strings.Builder
	for _, s := range info.Settings {
		switch s.Key {
		case "-ldflags", "-tags", "-trimpath", "CGO_ENABLED", "GOOS", "GOARCH", "-gcflags", "-asmflags":
			fmt.Fprintf(&b, "%s=%s\n", s.Key, s.Value)
		}
	}
	return b.String()
}

func helmHome(t *testing.T, path string) []string {
	t.Helper()
	dir := t.TempDir()
	return []string{
		"HELM_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"HELM_DATA_HOME=" + filepath.Join(dir, "data"),
		"HELM_PLUGINS=" + filepath.Join(dir, "data", "plugins"),
		"PATH=" + path + string(os.PathListSeparator) + os.Getenv("PATH"),
		"DIGESTPIN_PLUGIN_URL=http://127.0.0.1:1/no-release",
	}
}

// pathDir returns a folder of symlinks name → target, for PATH.
func pathDir(t *testing.T, links map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkout copies the working tree, as a user's checkout of the project,
// into a folder named digestpin: source, plugins and scripts, without
// .git, the tool cache and built binaries. The root plugin gets bin and
// the digestpin-helm beside it as its binaries.
func checkout(t *testing.T, bin string) string {
	t.Helper()
	root, dst := repoRoot(t), filepath.Join(t.TempDir(), "digestpin")
	skip := map[string]bool{".git": true, ".cache": true, "bin": true, "dist": true}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if skip[d.Name()] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a worktree's .git is a file
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, to)
		default:
			return copyFile(p, to)
		}
	})
	if err != nil {
		t.Fatalf("copying the working tree: %v", err)
	}
	// make build's two files: digestpin and the digestpin-helm it runs.
	for _, name := range []string{"digestpin", "digestpin-helm"} {
		if err := copyFile(filepath.Join(filepath.Dir(bin), name), filepath.Join(dst, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// copyFile copies src to dst with src's mode, dereferencing symlinks.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// runHelm runs name in a session of its own: without a controlling
// terminal, as in CI, even when the tests run at one.
func runHelm(t *testing.T, env []string, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = cleanEnv(env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return result{stdout: out.String(), stderr: errb.String(), err: err}
}

// mustRun runs name and returns its stdout; it fails the test when name
// fails.
func mustRun(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	res := runHelm(t, env, name, args...)
	if res.err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), res.err, res.stdout, res.stderr)
	}
	return res.stdout
}

// runTTY runs name at a pseudo-terminal with script(1) and returns what
// the terminal showed as stdout.
func runTTY(t *testing.T, env []string, name string, args ...string) result {
	t.Helper()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatalf("script(1) is missing (Debian: apt-get install bsdutils): %v", err)
	}
	q := []string{shellQuote(name)}
	for _, a := range args {
		q = append(q, shellQuote(a))
	}
	return runHelm(t, append(env, "SHELL=/bin/sh"), script, "-qec", strings.Join(q, " "), "/dev/null")
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestInstallBinaryScript runs the plugins' install hook on its own, with
// a release served on loopback, in the cases that need no Go build (Helm's
// plugin install tests cover the build): keep, copy or download a binary,
// refuse a download whose checksum is wrong or missing, and on failure say
// why in one line and, run by Helm, remove the plugin Helm installed.
func TestInstallBinaryScript(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	root := repoRoot(t)
	dir, version := releaseFiles(t)
	base := releaseServer(t, dir, version)
	releaseURL := base + "/v" + version
	// A PATH with the hook's own tools, and no go.
	tools := map[string]string{}
	for _, name := range []string{"sed", "head", "grep", "dirname", "mkdir", "chmod", "mv", "cp", "rm",
		"uname", "tr", "mktemp", "awk", "cut", "curl", "sha256sum", "tar", "gzip"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatal(err)
		}
		tools[name] = p
	}
	noGo := pathDir(t, tools)
	for _, tc := range []struct {
		desc    string
		source  bool   // the plugin folder is a module checkout
		binary  bool   // bin/digestpin and bin/digestpin-helm are there already
		alone   bool   // bin/digestpin is there already, without digestpin-helm
		helm    string // run as Helm does: "" no, "dir" on a plugin folder, "link" on a symlink to one
		env     []string
		wantErr string // on stderr, or "" for success
		wantOut string // on stdout
	}{
		{desc: "binary there", binary: true, wantOut: "installed digestpin "},
		// Its template command cannot run: not current, downloaded.
		{desc: "binary there without digestpin-helm", alone: true, wantOut: "downloading " + releaseURL + "/digestpin_" + version},
		{desc: "binary given", env: []string{"DIGESTPIN_PLUGIN_BINARY=" + bin}, wantOut: "installed digestpin "},
		{desc: "download", wantOut: "downloading " + releaseURL + "/digestpin_" + version},
		{desc: "download with a slash", env: []string{"DIGESTPIN_PLUGIN_URL=" + releaseURL + "/"}, wantOut: "installed digestpin "},
		{desc: "wrong checksum", env: []string{"DIGESTPIN_PLUGIN_URL=" + base + "/bad"}, wantErr: "but SHA256SUMS says"},
		{desc: "no checksum", env: []string{"DIGESTPIN_PLUGIN_URL=" + base + "/missing"}, wantErr: "SHA256SUMS has no line for digestpin_" + version},
		{desc: "no release", env: []string{"DIGESTPIN_PLUGIN_URL=" + base + "/v0.0.0"}, wantErr: "cannot download " + base + "/v0.0.0/SHA256SUMS"},
		{desc: "no release, source, no go", source: true, env: []string{"DIGESTPIN_PLUGIN_URL=" + base + "/v0.0.0", "PATH=" + noGo}, wantErr: "cannot download"},
		{desc: "build, no go", source: true, env: []string{"DIGESTPIN_PLUGIN_BUILD=true", "PATH=" + noGo}, wantErr: "Go is not installed"},
		{desc: "build, no source", env: []string{"DIGESTPIN_PLUGIN_BUILD=true"}, wantErr: "no source to build digestpin from"},
		{desc: "skip", env: []string{"DIGESTPIN_PLUGIN_SKIP=true"}},
		{desc: "helm, download", helm: "dir", wantOut: "installed digestpin "},
		{desc: "helm, failure removes the plugin", helm: "dir", env: []string{"DIGESTPIN_PLUGIN_URL=" + base + "/bad"}, wantErr: "refusing to install it; the plugin was removed"},
		{desc: "helm, failure removes the link only", helm: "link", env: []string{"DIGESTPIN_PLUGIN_URL=" + base + "/bad"}, wantErr: "refusing to install it; the plugin was removed"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"plugin.yaml": "plugin.yaml", "scripts/install-binary.sh": "scripts/install-binary.sh"}
			if tc.source {
				files["go.mod"] = "go.mod"
			}
			if tc.binary || tc.alone {
				files["bin/digestpin"] = bin
			}
			if tc.binary {
				files["bin/digestpin-helm"] = filepath.Join(filepath.Dir(bin), "digestpin-helm")
			}
			for to, from := range files {
				if !filepath.IsAbs(from) {
					from = filepath.Join(root, from)
				}
				if err := copyFile(from, filepath.Join(dir, to)); err != nil {
					t.Fatal(err)
				}
			}
			env := []string{"DIGESTPIN_PLUGIN_URL=" + releaseURL}
			pluginDir := dir // HELM_PLUGIN_DIR
			if tc.helm != "" {
				plugins := filepath.Join(t.TempDir(), "plugins")
				pluginDir = filepath.Join(plugins, "digestpin")
				if err := os.Mkdir(plugins, 0o755); err != nil {
					t.Fatal(err)
				}
				var err error
				if tc.helm == "link" {
					err = os.Symlink(dir, pluginDir)
				} else {
					err = os.Rename(dir, pluginDir)
				}
				if err != nil {
					t.Fatal(err)
				}
				env = append(env, "HELM_PLUGINS="+plugins, "HELM_PLUGIN_NAME=digestpin")
			}
			env = append(append(env, "HELM_PLUGIN_DIR="+pluginDir), tc.env...)
			res := runHelm(t, env, "/bin/sh", filepath.Join(pluginDir, "scripts", "install-binary.sh"), "install")
			_, binErr := os.Stat(filepath.Join(pluginDir, "bin", "digestpin"))
			_, pluginErr := os.Lstat(pluginDir)
			if tc.wantErr != "" {
				if res.err == nil || !strings.Contains(res.stderr, tc.wantErr) || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
					t.Errorf("install-binary.sh = %v, stderr %q, want one line with %q", res.err, res.stderr, tc.wantErr)
				}
				if removed := os.IsNotExist(pluginErr); removed != (tc.helm != "") {
					t.Errorf("plugin folder removed = %v, want %v (only when run by Helm on its plugins folder)", removed, tc.helm != "")
				}
				if _, err := os.Stat(filepath.Join(dir, "plugin.yaml")); tc.helm == "link" && err != nil {
					t.Errorf("the folder the removed link pointed to lost its plugin.yaml: %v", err)
				}
				if binErr == nil {
					t.Errorf("bin/digestpin is there after a failed install")
				}
				return
			}
			if res.err != nil || !strings.Contains(res.stdout, tc.wantOut) {
				t.Errorf("install-binary.sh = %v, stdout %q, stderr %q, want %q", res.err, res.stdout, res.stderr, tc.wantOut)
			}
			if installed := binErr == nil; installed != (tc.wantOut != "") {
				t.Errorf("bin/digestpin installed = %v, want %v", installed, tc.wantOut != "")
			}
			if _, err := os.Stat(filepath.Join(pluginDir, "bin", "digestpin-helm")); (err == nil) != (tc.wantOut != "") {
				t.Errorf("bin/digestpin-helm installed = %v, want %v", err == nil, tc.wantOut != "")
			}
			if tmp, _ := filepath.Glob(filepath.Join(pluginDir, "bin", "*.tmp.*")); len(tmp) != 0 {
				t.Errorf("temporary files left in bin/: %q", tmp)
			}
		})
	}
}
