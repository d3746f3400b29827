package e2e

import (
	"archive/zip"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/testfiles"
)

// TestGoInstallVersion checks that `go install
// github.com/digestpin/digestpin@vX.Y.Z` and its cmd/digestpin-helm, built
// without the Makefile's -X flag, still report their version and work
// together. The module is served at
// that version from a file-system module proxy made here from the files
// git tracks, and its dependencies from the download cache of the module
// cache (itself a valid proxy), into a module cache of the test's own: so
// nothing is downloaded and the shared module cache is untouched.
func TestGoInstallVersion(t *testing.T) {
	testfiles.Slow(t)
	t.Parallel()
	const module, version = "github.com/digestpin/digestpin", "v0.98.7"
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	proxy := t.TempDir()
	dir := filepath.Join(proxy, filepath.FromSlash(module), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A module zip holds the module's files under module@version/, less
	// those of nested modules (examples/helmsdk and e2e/cmpserver have a
	// go.mod of their own), as the go command makes it from a repository.
	files := strings.Split(strings.TrimSpace(string(out)), "\n")
	var nested []string
	for _, f := range files {
		if d, ok := strings.CutSuffix(f, "/go.mod"); ok {
			nested = append(nested, d+"/")
		}
	}
	inNested := func(f string) bool {
		for _, d := range nested {
			if strings.HasPrefix(f, d) {
				return true
			}
		}
		return false
	}
	zf, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(zf)
	for _, f := range files {
		if inNested(f) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, f))
		if err != nil || !fi.Mode().IsRegular() {
			continue // a link (the Helm 4 plugin's script) is not in a module zip
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.Create(module + "@" + version + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2026-11-30T00:00:00Z"}`),
		version + ".mod":  gomod,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	shared := strings.TrimSpace(string(modcache))
	downloads := filepath.Join(shared, "cache", "download")
	bin := t.TempDir()
	// The two mains, as docs/install.md says to install them: both land in
	// one folder, so that digestpin finds digestpin-helm beside it.
	cmd := exec.Command("go", "install", module+"@"+version, module+"/cmd/digestpin-helm@"+version)
	// -trimpath keeps the module cache's path out of the build, so that
	// the dependencies come from the build cache `make build` (-trimpath
	// too) filled rather than being compiled again. It sets no version:
	// the binary reads its module version from the build info either way.
	cmd.Env = cleanEnv("GOBIN="+bin, "GOMODCACHE="+linkedModCache(t, shared, module), "GOFLAGS=-modcacherw -trimpath", "GOWORK=off", "GOSUMDB=off",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(downloads))
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s@%s: %v\n%s", module, version, err, out)
	}
	for _, name := range []string{"digestpin", "digestpin-helm"} {
		got, err := exec.Command(filepath.Join(bin, name), "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", name, err)
		}
		if want := "digestpin 0.98.7\n"; string(got) != want {
			t.Errorf("%s --version = %q, want %q", name, got, want)
		}
	}
	// digestpin hands template to the digestpin-helm beside it, of its own
	// version (which it checks), so the two go install builds work together.
	chart := t.TempDir()
	if err := os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: empty\nversion: 0.1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	seed, err := exec.Command(filepath.Join(bin, "digestpin"), "seed").Output()
	if err != nil {
		t.Fatalf("digestpin seed: %v", err)
	}
	seedFile := filepath.Join(chart, "seed")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	tmpl := exec.Command(filepath.Join(bin, "digestpin"), "template", "r", chart, "--seed-file", seedFile)
	tmpl.Env = cleanEnv()
	if out, err := tmpl.CombinedOutput(); err != nil {
		t.Errorf("digestpin template of an empty chart: %v\n%s", err, out)
	}
}

// linkedModCache returns a module cache of the test's own that holds the
// shared one's modules and downloads as symbolic links, save the folders
// on the path of module, which the go command writes into as its own.
// Unpacking every dependency again (600 MB in 40,000 files) took minutes;
// through the links go install reads them where they are, and writes
// nothing into the shared cache: what the proxies serve besides module is
// in it already.
func linkedModCache(t *testing.T, shared, module string) string {
	t.Helper()
	dir := t.TempDir()
	// link makes dst a folder of links to src's entries, save skip and the
	// one named first on path, which it makes a folder of and goes on into.
	var link func(src, dst string, path []string, skip string)
	link = func(src, dst string, path []string, skip string) {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(src)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() == skip || len(path) > 0 && e.Name() == path[0] {
				continue
			}
			if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		if len(path) > 0 {
			link(filepath.Join(src, path[0]), filepath.Join(dst, path[0]), path[1:], "")
		}
	}
	// The folder of a module is named path@version; its parents are
	// folders of their own here. The extracted modules sit beside cache/,
	// the downloads in cache/download/ (cache's other files, its lock, are
	// the test's own).
	parents := strings.Split(module, "/")
	parents = parents[:len(parents)-1]
	link(shared, dir, parents, "cache")
	link(filepath.Join(shared, "cache", "download"), filepath.Join(dir, "cache", "download"), parents, "")
	return dir
}
