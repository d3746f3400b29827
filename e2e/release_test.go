//go:build unix

package e2e

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// The release of this checkout that `make release` builds for this
// machine's platform, once per test run (see releaseFiles).
var release struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if release.dir != "" {
		os.RemoveAll(release.dir)
	}
	os.Exit(code)
}

// releaseFiles returns the folder `make release PLATFORMS=<this machine>`
// wrote, and the version it released.
//
// Building a release takes a minute on a loaded machine, so a test that
// needs one is slow (testfiles.Slow): go test -short leaves it out.
func releaseFiles(t *testing.T) (dir, version string) {
	t.Helper()
	testfiles.Slow(t)
	h4 := helm4(t)
	release.once.Do(func() {
		release.dir, release.err = os.MkdirTemp("", "digestpin-release-")
		if release.err != nil {
			return
		}
		cmd := exec.Command("make", "--no-print-directory", "release",
			"PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH, "DIST="+release.dir, "HELM4="+h4)
		cmd.Dir = repoRoot(t)
		cmd.Env = cleanEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			release.err = fmt.Errorf("make release: %w\n%s", err, out)
		}
	})
	if release.err != nil {
		t.Fatal(release.err)
	}
	return release.dir, pluginVersion(t)
}

// pluginVersion returns the version in plugin.yaml.
func pluginVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "version:"); ok {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	t.Fatal("plugin.yaml has no version")
	return ""
}

// releaseNames returns the file names of a release of version for this
// machine's platform, as the README lists them.
func releaseNames(version string) (binArchive, h3Plugin, h4Plugin string) {
	osArch := runtime.GOOS + "_" + runtime.GOARCH
	return "digestpin_" + version + "_" + osArch + ".tar.gz",
		"digestpin-plugin-" + version + "-" + strings.ReplaceAll(osArch, "_", "-") + ".tgz",
		"digestpin-postrenderer-" + version + ".tgz"
}

// TestRelease checks the files `make release` writes: their names, what
// each archive holds, and SHA256SUMS over all of them.
func TestRelease(t *testing.T) {
	t.Parallel()
	dir, version := releaseFiles(t)
	binArchive, h3Plugin, h4Plugin := releaseNames(version)

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"SHA256SUMS", binArchive, h3Plugin, h4Plugin, fluxPluginManifest}
	sort.Strings(want)
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("make release wrote %q, want %q", names, want)
	}

	// The README's way to install the binary by hand.
	t.Run("by hand", func(t *testing.T) {
		if res := runCmd(t, dir, nil, nil, "sha256sum", "--check", "--ignore-missing", "SHA256SUMS"); res.err != nil || !strings.Contains(res.stdout, binArchive+": OK") {
			t.Errorf("sha256sum --check --ignore-missing SHA256SUMS = %v:\n%s%s", res.err, res.stdout, res.stderr)
		}
		tmp := t.TempDir()
		if res := runCmd(t, tmp, nil, nil, "tar", "-xzf", filepath.Join(dir, binArchive), "digestpin", "digestpin-helm"); res.err != nil {
			t.Fatalf("tar -xzf %s digestpin digestpin-helm: %v\n%s", binArchive, res.err, res.stderr)
		}
		if res := runCmd(t, tmp, nil, nil, "./digestpin", "--version"); strings.TrimSpace(res.stdout) != "digestpin "+version {
			t.Errorf("./digestpin --version = %q, %v", res.stdout, res.err)
		}
		// digestpin template runs the digestpin-helm beside it.
		if res := runCmd(t, tmp, nil, nil, "./digestpin", "template", "--help"); res.err != nil || !strings.Contains(res.stderr, "Helm 4's engine") {
			t.Errorf("./digestpin template --help = %v, stderr:\n%s", res.err, res.stderr)
		}
	})

	sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
	if len(sums) != 3 {
		t.Errorf("SHA256SUMS has %d lines, want one for each of the 3 other files: %q", len(sums), sums)
	}
	for _, tc := range []struct {
		file     string
		entries  []string // sorted, folders left out
		binaries []string // the entries that are digestpin and digestpin-helm
	}{
		{file: binArchive, entries: []string{
			"LICENSE", "README.md", "argocd/generate.sh", "argocd/init.sh", "argocd/plugin.yaml",
			"digestpin", "digestpin-ci.sh", "digestpin-helm", "digestpin-lock.sh",
		}, binaries: []string{"digestpin", "digestpin-helm"}},
		{file: h3Plugin, entries: []string{"LICENSE", "bin/digestpin", "bin/digestpin-helm", "plugin.yaml", "scripts/install-binary.sh"}, binaries: []string{"bin/digestpin", "bin/digestpin-helm"}},
		{file: h4Plugin, entries: []string{
			"digestpin-postrenderer/LICENSE", "digestpin-postrenderer/plugin.yaml",
			"digestpin-postrenderer/scripts/install-binary.sh",
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p := filepath.Join(dir, tc.file)
			if got, want := sums[tc.file], sha256File(t, p); got != want {
				t.Errorf("SHA256SUMS says %q, the file has %q", got, want)
			}
			files := untar(t, p, t.TempDir())
			if strings.Join(files, " ") != strings.Join(tc.entries, " ") {
				t.Errorf("archive holds %q, want %q", files, tc.entries)
			}
			if len(tc.binaries) == 0 {
				return
			}
			bin := t.TempDir()
			untar(t, p, bin)
			for _, b := range tc.binaries {
				got := runCmd(t, "", nil, nil, filepath.Join(bin, b), "--version")
				if got.err != nil || strings.TrimSpace(got.stdout) != "digestpin "+version {
					t.Errorf("%s --version = %q, %v; want \"digestpin %s\"", b, got.stdout, got.err, version)
				}
			}
		})
	}
}

// readSums parses a SHA256SUMS file into file name → hex SHA-256.
func readSums(t *testing.T, p string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not \"SUM  NAME\"", line)
		}
		sums[name] = sum
	}
	return sums
}

func sha256File(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// untar extracts the gzipped tar p into dir and returns the names of its
// files, sorted.
func untar(t *testing.T, p, dir string) []string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	tr := tar.NewReader(zr)
	var files []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := path.Clean(h.Name)
		files = append(files, name)
		to := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(files)
	return files
}

// releaseServer serves a release the way a release URL does, on loopback:
// /vVERSION/ has the files of dir, /bad/ the same with a wrong checksum
// for the binary archive, /missing/ the same without its SHA256SUMS line.
// Archives are served as application/gzip, which Helm 3 needs to see to
// install a plugin from an archive URL (GitHub's release downloads and
// Python's http.server send other types). It returns the server's URL.
func releaseServer(t *testing.T, dir, version string) string {
	t.Helper()
	binArchive, _, _ := releaseNames(version)
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var bad, missing []string
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		if strings.HasSuffix(line, "  "+binArchive) {
			bad = append(bad, strings.Repeat("0", 64)+"  "+binArchive)
			continue
		}
		bad, missing = append(bad, line), append(missing, line)
	}
	variant := map[string]string{"bad": strings.Join(bad, "\n") + "\n", "missing": strings.Join(missing, "\n") + "\n"}
	// x-tar is the release itself, its archives sent as application/x-tar.
	isXTar := func(prefix string) bool { return prefix == "x-tar" }
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefix, file, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		sums, isVariant := variant[prefix]
		switch {
		case prefix != "v"+version && !isVariant && !isXTar(prefix), strings.Contains(file, "/"):
			http.NotFound(w, r)
		case file == "SHA256SUMS" && isVariant:
			fmt.Fprint(w, sums)
		default:
			switch {
			case prefix == "x-tar" && strings.HasSuffix(file, ".tgz"):
				// A mirror that says the archive is a tar.
				w.Header().Set("Content-Type", "application/x-tar")
			case strings.HasSuffix(file, ".tgz"), strings.HasSuffix(file, ".tar.gz"):
				w.Header().Set("Content-Type", "application/gzip")
			}
			r.URL.Path = "/" + file
			files.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPluginInstallFromURL installs, updates and uninstalls both plugins
// from a release served on loopback, as the README says, under the real
// Helm 3 and Helm 4: the Helm 3 plugin from a git URL (file://; its hook
// downloads and checks the binary) and from its archive URL, the Helm 4
// post-renderer plugin from its package URL. A failed install leaves no plugin behind.
func TestPluginInstallFromURL(t *testing.T) {
	t.Parallel()
	dir, version := releaseFiles(t)
	_, h3Plugin, h4Plugin := releaseNames(version)
	h3, h4, bin := helm3(t), helm4(t), digestpinBin(t)
	base := releaseServer(t, dir, version)
	releaseURL := base + "/v" + version

	reg := testregistry.New(t)
	for _, img := range []string{"app:1.0", "db:1.0", "tools:1.0"} {
		reg.PushImage(t, img)
	}
	chart := filepath.Join(repoRoot(t), "testdata", "chart")
	want := pinnedRef(t, reg.Ref("app:1.0"))
	// Helm 3's plugin is a post-renderer as `helm digestpin`: helm is on
	// PATH.
	path := pathDir(t, map[string]string{"helm": h3})
	// render checks that helm renders the chart through post-renderer pr.
	render := func(t *testing.T, home []string, helm string, pr ...string) {
		t.Helper()
		args := append([]string{"template", "demo", chart, "--show-only", "templates/deployment.yaml",
			"--set", "image.app=" + reg.Ref("app:1.0"), "--set", "image.db=" + reg.Ref("db:1.0"),
			"--set", "image.tools=" + reg.Ref("tools:1.0")}, pr...)
		wantImages(t, strings.Join(pr, " "), parseDocs(t, mustRun(t, home, helm, args...)), map[string]string{"Deployment/demo-web": want})
	}
	// installed returns the plugins Helm lists and the entries of the
	// plugins folder.
	installed := func(t *testing.T, home []string, helm string) (list, folder []string) {
		t.Helper()
		for _, line := range strings.Split(mustRun(t, home, helm, "plugin", "list"), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 0 {
				list = append(list, f[0])
			}
		}
		entries, err := os.ReadDir(strings.TrimSpace(mustRun(t, home, helm, "env", "HELM_PLUGINS")))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range entries {
			folder = append(folder, e.Name())
		}
		return list, folder
	}
	wantNone := func(t *testing.T, home []string, helm, after string) {
		t.Helper()
		if list, folder := installed(t, home, helm); len(list)+len(folder) != 0 {
			t.Errorf("after %s: helm plugin list shows %q, the plugins folder holds %q; want nothing", after, list, folder)
		}
	}
	// failOneLine checks that res failed and that the hook said why in
	// one line containing want.
	failOneLine := func(t *testing.T, res result, want string) {
		t.Helper()
		var lines []string
		for _, l := range strings.Split(res.stdout+res.stderr, "\n") {
			if strings.HasPrefix(l, "digestpin plugin: error:") {
				lines = append(lines, l)
			}
		}
		if res.err == nil || len(lines) != 1 || !strings.Contains(lines[0], want) {
			t.Errorf("install = %v, hook errors %q, want one naming %q:\n%s%s", res.err, lines, want, res.stdout, res.stderr)
		}
	}

	t.Run("helm3 git URL", func(t *testing.T) {
		repo := gitRepo(t, checkout(t, bin), "v"+version)
		home := append(helmHome(t, path), "DIGESTPIN_PLUGIN_URL="+releaseURL)
		out := mustRun(t, home, h3, "plugin", "install", "file://"+repo)
		if !strings.Contains(out, "downloading "+releaseURL+"/") {
			t.Errorf("helm plugin install printed\n%s\nwant the hook to download the release binary", out)
		}
		render(t, home, h3, "--post-renderer", "helm", "--post-renderer-args", "digestpin")

		// helm plugin update pulls the new commit, and the update hook
		// puts a binary back (git clean removed it).
		if err := os.WriteFile(filepath.Join(repo, "NEWS"), []byte("news\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		git(t, repo, "add", "NEWS")
		git(t, repo, "commit", "-q", "-m", "news")
		if out := mustRun(t, home, h3, "plugin", "update", "digestpin"); !strings.Contains(out, "Updated plugin: digestpin") {
			t.Errorf("helm plugin update printed\n%s\nwant Updated plugin: digestpin", out)
		}
		plugins := strings.TrimSpace(mustRun(t, home, h3, "env", "HELM_PLUGINS"))
		if _, err := os.Stat(filepath.Join(plugins, filepath.Base(repo), "NEWS")); err != nil {
			t.Errorf("after helm plugin update: %v", err)
		}
		render(t, home, h3, "--post-renderer", "helm", "--post-renderer-args", "digestpin")

		mustRun(t, home, h3, "plugin", "uninstall", "digestpin")
		wantNone(t, home, h3, "helm plugin uninstall")
	})

	t.Run("helm3 archive URL", func(t *testing.T) {
		home := append(helmHome(t, path), "DIGESTPIN_PLUGIN_URL=http://127.0.0.1:1/unused")
		out := mustRun(t, home, h3, "plugin", "install", releaseURL+"/"+h3Plugin)
		if strings.Contains(out, "downloading") {
			t.Errorf("helm plugin install printed\n%s\nwant the binary of the archive, no download", out)
		}
		render(t, home, h3, "--post-renderer", "helm", "--post-renderer-args", "digestpin")
		mustRun(t, home, h3, "plugin", "uninstall", "digestpin")
		wantNone(t, home, h3, "helm plugin uninstall")
	})

	// The README's way round a mirror that sends application/x-tar, which
	// Helm 3 takes for a git URL: unpack the archive, install the folder.
	t.Run("helm3 archive sent as x-tar", func(t *testing.T) {
		home := append(helmHome(t, path), "DIGESTPIN_PLUGIN_URL=http://127.0.0.1:1/unused")
		url := base + "/x-tar/" + h3Plugin
		if res := runHelm(t, home, h3, "plugin", "install", url); res.err == nil || !strings.Contains(res.stderr, "Cannot detect VCS") {
			t.Errorf("helm plugin install %s = %v, %q; want Helm 3's Cannot detect VCS (if Helm learnt x-tar, say so in the README)", url, res.err, res.stderr)
		}
		wantNone(t, home, h3, "the refused install")
		work := t.TempDir()
		sh := "mkdir digestpin && curl -fsSL " + shellQuote(url) + " | tar -xzf - -C digestpin && helm plugin install ./digestpin"
		if res := runCmd(t, work, nil, home, "sh", "-c", sh); res.err != nil || strings.Contains(res.stdout, "downloading") {
			t.Fatalf("%s = %v\n%s%s\nwant the archive's own binary installed", sh, res.err, res.stdout, res.stderr)
		}
		render(t, home, h3, "--post-renderer", "helm", "--post-renderer-args", "digestpin")
	})

	// The README's Helm 3 and Helm 4 on one machine: a Helm 4 plugin in the
	// data home Helm 3 reads breaks Helm 3's plugin loading; a data home of
	// Helm 4's own does not.
	t.Run("helm3 and helm4 on one machine", func(t *testing.T) {
		home := append(helmHome(t, path), "DIGESTPIN_PLUGIN_URL="+releaseURL)
		mustRun(t, home, h3, "plugin", "install", releaseURL+"/"+h3Plugin)
		mustRun(t, home, h4, "plugin", "install", "--verify=false", releaseURL+"/"+h4Plugin)
		if res := runHelm(t, home, h3, "plugin", "list"); res.err == nil || !strings.Contains(res.stderr, `unknown field "apiVersion"`) {
			t.Errorf("helm3 plugin list with the Helm 4 plugin beside = %v, %q; want the failure the README warns of (if Helm 3 reads it now, drop the warning)", res.err, res.stderr)
		}
		mustRun(t, home, h4, "plugin", "uninstall", h4PluginName)
		// Without HELM_PLUGINS, as a user's shell has it: HELM_DATA_HOME
		// decides for both.
		var h4Home []string
		for _, kv := range home {
			if !strings.HasPrefix(kv, "HELM_PLUGINS=") && !strings.HasPrefix(kv, "HELM_DATA_HOME=") {
				h4Home = append(h4Home, kv)
			}
		}
		h4Home = append(h4Home, "HELM_DATA_HOME="+filepath.Join(t.TempDir(), "helm4"))
		mustRun(t, h4Home, h4, "plugin", "install", "--verify=false", releaseURL+"/"+h4Plugin)
		if list, folder := installed(t, home, h3); !slices.Contains(list, "digestpin") || len(folder) != 1 {
			t.Errorf("helm3 plugin list = %q, its folder %q; want digestpin alone", list, folder)
		}
		render(t, home, h3, "--post-renderer", "helm", "--post-renderer-args", "digestpin")
		render(t, h4Home, h4, "--post-renderer", h4PluginName)
	})

	t.Run("helm4 package URL", func(t *testing.T) {
		home := append(helmHome(t, path), "DIGESTPIN_PLUGIN_URL="+releaseURL)
		out := mustRun(t, home, h4, "plugin", "install", "--verify=false", releaseURL+"/"+h4Plugin)
		if !strings.Contains(out, "downloading "+releaseURL+"/") {
			t.Errorf("helm plugin install printed\n%s\nwant the hook to download the release binary", out)
		}
		render(t, home, h4, "--post-renderer", h4PluginName)
		mustRun(t, home, h4, "plugin", "uninstall", h4PluginName)
		wantNone(t, home, h4, "helm plugin uninstall")

		// Helm 4 updates a plugin from a URL by uninstall and install.
		mustRun(t, home, h4, "plugin", "install", "--verify=false", releaseURL+"/"+h4Plugin)
		render(t, home, h4, "--post-renderer", h4PluginName)
	})

	for _, tc := range []struct {
		desc string
		helm string
		url  string // DIGESTPIN_PLUGIN_URL
		want string
	}{
		{desc: "helm4 wrong checksum", helm: h4, url: base + "/bad", want: "refusing to install it"},
		{desc: "helm4 no checksum", helm: h4, url: base + "/missing", want: "has no line for"},
		{desc: "helm4 no release", helm: h4, url: base + "/v0.0.0", want: "cannot download"},
		{desc: "helm3 wrong checksum", helm: h3, url: base + "/bad", want: "refusing to install it"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			home := append(helmHome(t, path), "DIGESTPIN_PLUGIN_URL="+tc.url)
			args := []string{"plugin", "install", "--verify=false", releaseURL + "/" + h4Plugin}
			if tc.helm == h3 {
				repo := gitRepo(t, checkout(t, bin), "v"+version)
				args = []string{"plugin", "install", "file://" + repo, "--version", "v" + version}
			}
			failOneLine(t, runHelm(t, home, tc.helm, args...), tc.want)
			wantNone(t, home, tc.helm, "a failed install")

			// Once the release is right, the same install works.
			home = append(home, "DIGESTPIN_PLUGIN_URL="+releaseURL)
			mustRun(t, home, tc.helm, args...)
		})
	}
}

// gitRepo makes a git repository of folder dir, without its bin/, with
// one commit tagged tag (if not empty), and returns dir.
func gitRepo(t *testing.T, dir, tag string) string {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	// Never the project's own repository: git init must make a new one.
	if _, err := os.Lstat(filepath.Join(dir, ".git")); !os.IsNotExist(err) {
		t.Fatalf("%s has a .git already (%v): not making a repository there", dir, err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "release")
	if tag != "" {
		git(t, dir, "tag", tag)
	}
	return dir
}

// git runs git in dir, as a throw-away identity.
func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is missing (Debian: apt-get install git): %v", err)
	}
	env := []string{
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.invalid",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.invalid",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		// Only dir's own repository, never one around it.
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir),
	}
	if res := runCmd(t, dir, nil, env, "git", args...); res.err != nil {
		t.Fatalf("git %s: %v\n%s%s", strings.Join(args, " "), res.err, res.stdout, res.stderr)
	}
}
