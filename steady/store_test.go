package steady

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/testfiles"
)

func newStore(t *testing.T, limit int64) (*DirStore, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "previous")
	s, err := NewDirStore(dir, limit)
	if err != nil {
		t.Fatalf("NewDirStore(%s) = %v", dir, err)
	}
	return s, dir
}

func TestDirStore(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t, 0)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("folder %s: %v, %v; want mode 0700", dir, fi.Mode(), err)
	}
	if b, ok, err := s.Get(ctx, "argocd/app"); b != nil || ok || err != nil {
		t.Errorf("Get(missing) = %q, %v, %v; want nothing", b, ok, err)
	}
	keys := []string{"argocd/app", "../../escape", "/etc/passwd", "a\x00b", strings.Repeat("k", 5000)}
	for i, k := range keys {
		if err := s.Put(ctx, k, []byte{byte('0' + i)}); err != nil {
			t.Fatalf("Put(%q) = %v", k, err)
		}
	}
	if err := s.Put(ctx, "argocd/app", []byte("second")); err != nil {
		t.Fatalf("Put again = %v", err)
	}
	for i, k := range keys {
		want := []byte{byte('0' + i)}
		if i == 0 {
			want = []byte("second")
		}
		b, ok, err := s.Get(ctx, k)
		if !ok || err != nil || !bytes.Equal(b, want) {
			t.Errorf("Get(%q) = %q, %v, %v; want %q", k, b, ok, err, want)
		}
	}
	// Every key is one file in the folder, mode 0600, whatever it holds.
	names := testfiles.Names(t, dir)
	if len(names) != len(keys) {
		t.Errorf("folder holds %v, want %d files", names, len(keys))
	}
	for _, n := range names {
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || len(n) != 64+len(".yaml") {
			t.Errorf("%s: %v, %v; want a regular file, mode 0600, named by a SHA-256", n, fi.Mode(), err)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(dir)); len(entries) != 1 {
		t.Errorf("the folder's parent holds %d entries, want only the folder", len(entries))
	}
}

func TestDirStoreRefuses(t *testing.T) {
	ctx := context.Background()
	const key = "ns/app"
	for _, tc := range []struct {
		desc    string
		prepare func(t *testing.T, file string) // makes what is at the key's file
		want    string
	}{
		{desc: "a symbolic link", prepare: func(t *testing.T, file string) {
			target := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(target, []byte("kind: Secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, file); err != nil {
				t.Fatal(err)
			}
		}, want: "not a regular file"},
		{desc: "a FIFO", prepare: func(t *testing.T, file string) {
			if err := syscall.Mkfifo(file, 0o600); err != nil {
				t.Skip(err)
			}
		}, want: "not a regular file"},
		{desc: "a folder", prepare: func(t *testing.T, file string) {
			if err := os.Mkdir(file, 0o700); err != nil {
				t.Fatal(err)
			}
		}, want: "not a regular file"},
		{desc: "a file over the size bound", prepare: func(t *testing.T, file string) {
			if err := os.WriteFile(file, make([]byte, 11), 0o600); err != nil {
				t.Fatal(err)
			}
		}, want: "larger than 10 bytes"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s, _ := newStore(t, 10)
			file, err := s.file(key)
			if err != nil {
				t.Fatal(err)
			}
			tc.prepare(t, file)
			b, ok, err := s.Get(ctx, key)
			if err == nil || !strings.Contains(err.Error(), tc.want) || b != nil || ok {
				t.Errorf("Get() = %q, %v, %v; want an error containing %q", b, ok, err, tc.want)
			}
		})
	}

	s, _ := newStore(t, 10)
	if err := s.Put(ctx, key, make([]byte, 11)); err == nil || !strings.Contains(err.Error(), "more than 10") {
		t.Errorf("Put(11 bytes) = %v, want an error about the size bound", err)
	}
	if err := s.Put(ctx, "", nil); err == nil {
		t.Error(`Put("") = nil, want an error`)
	}
	if _, _, err := s.Get(ctx, ""); err == nil {
		t.Error(`Get("") = nil, want an error`)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Put(canceled, key, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Put(canceled) = %v, want context.Canceled", err)
	}
	if _, _, err := s.Get(canceled, key); !errors.Is(err, context.Canceled) {
		t.Errorf("Get(canceled) = %v, want context.Canceled", err)
	}
}

func TestDirStorePutReplacesLink(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, 0)
	file, _ := s.file("k")
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, file); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", []byte("new")); err != nil {
		t.Fatalf("Put() = %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "untouched" {
		t.Errorf("the link's target holds %q, want it untouched", b)
	}
	if b, ok, err := s.Get(ctx, "k"); string(b) != "new" || !ok || err != nil {
		t.Errorf("Get() = %q, %v, %v; want new", b, ok, err)
	}
}

func TestNewDirStore(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o770); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc string
		dir  string
		max  int64
		want string
	}{
		{desc: "a folder others may write to", dir: open, want: "lets others write to it"},
		{desc: "a file", dir: file, want: "not a directory"},
		{desc: "under a file", dir: filepath.Join(file, "sub"), want: "opening store"},
		{desc: "a negative bound", dir: dir, max: -1, want: "negative size bound"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := NewDirStore(tc.dir, tc.max); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewDirStore(%s) = %v, want an error containing %q", tc.dir, err, tc.want)
			}
		})
	}
}

// TestDirStoreConcurrent: writers of one key leave one whole value.
func TestDirStoreConcurrent(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t, 0)
	values := [][]byte{bytes.Repeat([]byte("a"), 1<<16), bytes.Repeat([]byte("b"), 1<<16)}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := s.Put(ctx, "k", values[i%2]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b, _, err := s.Get(ctx, "k")
	if err != nil || !(bytes.Equal(b, values[0]) || bytes.Equal(b, values[1])) {
		t.Errorf("Get() = %d bytes, %v; want one whole value", len(b), err)
	}
	if diff := cmp.Diff(1, len(testfiles.Names(t, dir))); diff != "" {
		t.Errorf("files in the folder (-want +got):\n%s", diff)
	}
}

// TestOpenDirStore: a state folder that cannot be used, or a file that
// cannot be read or written, costs a warning and the previous output,
// never an error.
func TestOpenDirStore(t *testing.T) {
	ctx := context.Background()
	const key = "ns/app"
	for _, tc := range []struct {
		desc string
		// prepare returns the state folder, and may break the key's
		// file in it after the folder is opened.
		prepare func(t *testing.T) (dir string, after func(t *testing.T, s Store))
		// get and put are the warnings of Get and Put; "" for none.
		get, put string
	}{
		{
			desc: "under a file",
			prepare: func(t *testing.T) (string, func(*testing.T, Store)) {
				file := filepath.Join(t.TempDir(), "file")
				if err := os.WriteFile(file, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(file, "state"), nil
			},
			get: "opening store: mkdir ",
		},
		{
			desc: "a folder others may write to",
			prepare: func(t *testing.T) (string, func(*testing.T, Store)) {
				dir := filepath.Join(t.TempDir(), "state")
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, 0o777); err != nil {
					t.Fatal(err)
				}
				return dir, nil
			},
			get: "lets others write to it; want 0700: no previous output, none stored",
		},
		{
			desc: "the key's file is a folder",
			prepare: func(t *testing.T) (string, func(*testing.T, Store)) {
				dir := filepath.Join(t.TempDir(), "state")
				return dir, func(t *testing.T, s Store) {
					ds := s.(*lenient).s.(*DirStore)
					file, _ := ds.file(key)
					if err := os.MkdirAll(filepath.Join(file, "x"), 0o700); err != nil {
						t.Fatal(err)
					}
				}
			},
			get: "not a regular file (d---------): rendering as a first render",
			put: `storing output of "ns/app": `,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var warnings []string
			warnf := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
			dir, after := tc.prepare(t)
			s := OpenDirStore(dir, 0, warnf)
			if after != nil {
				after(t, s)
			}
			if b, ok, err := s.Get(ctx, key); b != nil || ok || err != nil {
				t.Errorf("Get() = %q, %v, %v; want nothing, no error", b, ok, err)
			}
			if err := s.Put(ctx, key, []byte("out")); err != nil {
				t.Errorf("Put() = %v, want nil", err)
			}
			want := []string{tc.get}
			if tc.put != "" {
				want = append(want, tc.put)
			}
			if len(warnings) != len(want) {
				t.Fatalf("warnings %q, want %d containing %q", warnings, len(want), want)
			}
			for i, w := range want {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %q does not contain %q", warnings[i], w)
				}
			}
		})
	}

	// A usable folder works as a DirStore, without a warning; a canceled
	// context is still an error.
	var warned bool
	s := OpenDirStore(filepath.Join(t.TempDir(), "state"), 0, func(string, ...any) { warned = true })
	if err := s.Put(ctx, key, []byte("out")); err != nil {
		t.Fatalf("Put() = %v", err)
	}
	if b, ok, err := s.Get(ctx, key); string(b) != "out" || !ok || err != nil {
		t.Errorf("Get() = %q, %v, %v; want out", b, ok, err)
	}
	if warned {
		t.Error("a usable folder warned")
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Get(canceled, key); !errors.Is(err, context.Canceled) {
		t.Errorf("Get(canceled) = %v, want context.Canceled", err)
	}
	if err := s.Put(canceled, key, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Put(canceled) = %v, want context.Canceled", err)
	}
}
