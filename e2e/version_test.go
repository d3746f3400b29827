package e2e

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoInstallVersion checks that `go install
// github.com/digestpin/digestpin@vX.Y.Z`, which builds without the
// Makefile's -X flag, still reports its version. The module is served at
// that version from a file-system module proxy made here from the files
// git tracks, and its dependencies from the download cache of the module
// cache (itself a valid proxy), into a module cache of the test's own: so
// nothing is downloaded and the shared module cache is untouched.
func TestGoInstallVersion(t *testing.T) {
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
	downloads := filepath.Join(strings.TrimSpace(string(modcache)), "cache", "download")
	bin := t.TempDir()
	cmd := exec.Command("go", "install", module+"@"+version)
	cmd.Env = cleanEnv("GOBIN="+bin, "GOMODCACHE="+t.TempDir(), "GOFLAGS=-modcacherw", "GOWORK=off", "GOSUMDB=off",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(downloads))
	cmd.Dir = t.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s@%s: %v\n%s", module, version, err, out)
	}
	got, err := exec.Command(filepath.Join(bin, "digestpin"), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "digestpin 0.98.7\n"; string(got) != want {
		t.Errorf("digestpin --version = %q, want %q", got, want)
	}
}
