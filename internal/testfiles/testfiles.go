// Package testfiles holds the file helpers that tests of several packages
// share: reading an input file, writing a lock file and listing a folder.
package testfiles

import (
	"os"
	"sort"

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
