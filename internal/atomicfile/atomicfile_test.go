package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.yaml")
	// Concurrent writers: the file is always one writer's whole content.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := WriteFile(path, bytes.Repeat([]byte{'a' + byte(i)}, 1<<16), 0o640); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1<<16 || !bytes.Equal(b, bytes.Repeat(b[:1], 1<<16)) {
		t.Errorf("file mixes writers or is partial (%d bytes)", len(b))
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, %v; want 0640", fi.Mode(), err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("folder holds %d entries (%v), want only the file: temporary files left behind", len(entries), err)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x"), nil, 0o600); err == nil {
		t.Errorf("WriteFile into a missing folder = nil, want an error")
	}
}

func TestPrepare(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		setup    func(t *testing.T, dir string) // makes what "out" is
		wantErr  string                         // "" for success
		wantMode os.FileMode
		wantFile string // the file that must hold the data, relative
	}{
		{desc: "new file", setup: func(*testing.T, string) {}, wantMode: 0o644, wantFile: "out"},
		{desc: "existing file keeps its mode", setup: func(t *testing.T, dir string) {
			mustWrite(t, filepath.Join(dir, "out"), 0o600)
		}, wantMode: 0o600, wantFile: "out"},
		{desc: "link to a file", setup: func(t *testing.T, dir string) {
			mustWrite(t, filepath.Join(dir, "target"), 0o640)
			mustLink(t, "target", filepath.Join(dir, "out"))
		}, wantMode: 0o640, wantFile: "target"},
		{desc: "chain of links into a folder", setup: func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(dir, "sub", "target"), 0o600)
			mustLink(t, "sub/target", filepath.Join(dir, "mid"))
			mustLink(t, filepath.Join(dir, "mid"), filepath.Join(dir, "out"))
		}, wantMode: 0o600, wantFile: "sub/target"},
		{desc: "dangling link makes its target", setup: func(t *testing.T, dir string) {
			mustLink(t, "new", filepath.Join(dir, "out"))
		}, wantMode: 0o644, wantFile: "new"},
		{desc: "link loop", setup: func(t *testing.T, dir string) {
			mustLink(t, "out", filepath.Join(dir, "out"))
		}, wantErr: "too many levels of symbolic links"},
		{desc: "a folder", setup: func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "out"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "is not a regular file"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			path := filepath.Join(dir, "out")
			p, err := Prepare(path, []byte("data"), 0o644)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Prepare() = %v, want an error naming %s with %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, tc.wantFile)); string(b) == "data" {
				t.Errorf("%s holds the data before Commit", tc.wantFile)
			}
			if err := p.Commit(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(filepath.Join(dir, tc.wantFile))
			if err != nil || fi.Mode().Perm() != tc.wantMode {
				t.Errorf("Stat(%s) = %v, %v; want mode %v", tc.wantFile, fi, err, tc.wantMode)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, tc.wantFile)); string(b) != "data" {
				t.Errorf("%s = %q after Commit, want the data", tc.wantFile, b)
			}
			des, _ := os.ReadDir(dir)
			for _, d := range des {
				if strings.HasSuffix(d.Name(), ".tmp") {
					t.Errorf("temporary file %s left behind", d.Name())
				}
			}
		})
	}
}

func TestPrepareDiscard(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	mustWrite(t, path, 0o644)
	p, err := Prepare(path, []byte("new"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.Discard()
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("file = %q after Discard, want it as it was", b)
	}
	if des, _ := os.ReadDir(dir); len(des) != 1 {
		t.Errorf("folder holds %d entries after Discard, want 1", len(des))
	}
}

func mustWrite(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte("old"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func mustLink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
