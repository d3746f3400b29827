// Package testfiles holds the file helpers that tests of several packages
// share: reading an input file, writing a lock file, listing a folder and
// laying out a Kubernetes Secret volume, finding the tools the Makefile
// built for the tests, and telling when a server's unix socket listens.
package testfiles

import (
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/lockfile"
)

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	Fatal(args ...any)
}

// WriteLock writes a lock file of reference → digest entries to path.
func WriteLock(t TB, path string, entries map[string]v1.Hash) {
	t.Helper()
	var es []lockfile.Entry
	for ref, h := range entries {
		es = append(es, lockfile.Entry{Reference: ref, Digest: h.String()})
	}
	l, err := lockfile.New(es)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// Names lists the names in folder dir, sorted.
func Names(t TB, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, d := range des {
		names = append(names, d.Name())
	}
	sort.Strings(names)
	return names
}

// Read returns the bytes of the file at path.
func Read(t TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SecretVolume writes files (name → content) into dir as the kubelet
// writes a Kubernetes Secret volume (its atomic writer,
// pkg/volume/util/atomic_writer.go): the files in a new hidden folder named
// after the time (mode 0755), ..data a link to it, each name a link to
// ..data/NAME. mode is the files' mode once the kubelet set it: the
// volume's defaultMode, with the group's read bit added when the pod has an
// fsGroup (0400 becomes 0440). When dir holds a volume already, it is
// updated as the kubelet does when the Secret changes: ..data is switched
// to the new folder with a rename, then the old folder is removed.
func SecretVolume(t TB, dir string, files map[string]string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // the kubelet's layout
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ts, 0o755); err != nil { //nolint:gosec // the kubelet's layout
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(ts, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		// WriteFile's mode goes through the umask.
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(dir, name)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}
