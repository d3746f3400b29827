//go:build unix

package e2e

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
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
func releaseFiles(t *testing.T) (dir, version string) {
	t.Helper()
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
			release.err = fmt.Errorf("make release: %v\n%s", err, out)
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
	want := []string{"SHA256SUMS", binArchive, h3Plugin, h4Plugin}
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
		if res := runCmd(t, tmp, nil, nil, "tar", "-xzf", filepath.Join(dir, binArchive), "digestpin"); res.err != nil {
			t.Fatalf("tar -xzf %s digestpin: %v\n%s", binArchive, res.err, res.stderr)
		}
		if res := runCmd(t, tmp, nil, nil, "./digestpin", "--version"); strings.TrimSpace(res.stdout) != "digestpin "+version {
			t.Errorf("./digestpin --version = %q, %v", res.stdout, res.err)
		}
	})

	sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
	if len(sums) != 3 {
		t.Errorf("SHA256SUMS has %d lines, want one for each of the 3 other files: %q", len(sums), sums)
	}
	for _, tc := range []struct {
		file    string
		entries []string // sorted, folders left out
		binary  string   // the entry that is digestpin
	}{
		{file: binArchive, entries: []string{"LICENSE", "README.md", "digestpin"}, binary: "digestpin"},
		{file: h3Plugin, entries: []string{"LICENSE", "bin/digestpin", "plugin.yaml", "scripts/install-binary.sh"}, binary: "bin/digestpin"},
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
			if tc.binary == "" {
				return
			}
			bin := filepath.Join(t.TempDir(), "digestpin")
			untar(t, p, filepath.Dir(bin))
			got := runCmd(t, "", nil, nil, filepath.Join(filepath.Dir(bin), tc.binary), "--version")
			if got.err != nil || strings.TrimSpace(got.stdout) != "digestpin "+version {
				t.Errorf("%s --version = %q, %v; want \"digestpin %s\"", tc.binary, got.stdout, got.err, version)
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
		if err == io.EOF {
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
