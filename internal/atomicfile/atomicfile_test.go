package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
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
