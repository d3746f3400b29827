package steady

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/digestpin/digestpin/internal/atomicfile"
)

// Store keeps the previous output of each application, by key. The key
// is any string (the caller builds it, e.g. from Argo CD's app namespace
// and name); a Store makes it safe for its medium. Implementations must be
// safe for concurrent use; two writers of one key leave one whole value.
type Store interface {
	// Get returns the value stored for key, and false when there is none.
	Get(ctx context.Context, key string) ([]byte, bool, error)
	// Put stores b for key, replacing any value.
	Put(ctx context.Context, key string, b []byte) error
}

// DefaultMaxSize is the largest value a DirStore reads or writes when
// NewDirStore is given no bound: 64 MiB, some fifty thousand Deployments.
const DefaultMaxSize = 64 << 20

// DirStore is a Store in a folder: one file per key, named by the SHA-256
// of the key, so that no key can name a path outside the folder. Files are
// written whole (a temporary file renamed into place) with mode 0600. It is
// safe for concurrent use, by goroutines and by processes.
type DirStore struct {
	dir     string
	maxSize int64
}

var _ Store = (*DirStore)(nil)

// NewDirStore returns a DirStore in dir, creating the folder with mode
// 0700 if it does not exist. A folder that others than its owner may
// write to is refused: they could put an output there that digestpin would
// write as this release's. maxSize bounds each value; 0 means
// DefaultMaxSize.
func NewDirStore(dir string, maxSize int64) (*DirStore, error) {
	if maxSize < 0 {
		return nil, fmt.Errorf("opening store %s: negative size bound %d", dir, maxSize)
	}
	if maxSize == 0 {
		maxSize = DefaultMaxSize
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("opening store: %w", err)
	}
	switch {
	case !fi.IsDir():
		return nil, fmt.Errorf("opening store %s: not a folder", dir)
	case fi.Mode().Perm()&0o022 != 0:
		return nil, fmt.Errorf("opening store %s: mode %s lets others write to it; want 0700", dir, fi.Mode().Perm())
	}
	return &DirStore{dir: dir, maxSize: maxSize}, nil
}

// file is the file that holds key's value.
func (s *DirStore) file(key string) (string, error) {
	if key == "" {
		return "", errors.New("empty key")
	}
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:])+".yaml"), nil
}

// Get implements Store. A file that is not a regular file (a symbolic
// link, a folder, a FIFO) or is larger than the size bound is an error,
// not a missing value.
func (s *DirStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	name, err := s.file(key)
	if err != nil {
		return nil, false, fmt.Errorf("reading previous output of %q: %w", key, err)
	}
	fail := func(err error) ([]byte, bool, error) {
		return nil, false, fmt.Errorf("reading previous output of %q from %s: %w", key, name, err)
	}
	// Lstat first, so that a link or a FIFO is refused before it is
	// opened (opening a FIFO would block); then check that the file
	// opened is the one looked at.
	before, err := os.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return fail(err)
	}
	if !before.Mode().IsRegular() {
		return fail(fmt.Errorf("not a regular file (%s)", before.Mode().Type()))
	}
	f, err := os.Open(name)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	after, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !os.SameFile(before, after) {
		return fail(errors.New("the file changed while it was opened"))
	}
	b, err := io.ReadAll(io.LimitReader(f, s.maxSize+1))
	if err != nil {
		return fail(err)
	}
	if int64(len(b)) > s.maxSize {
		return fail(fmt.Errorf("larger than %d bytes", s.maxSize))
	}
	return b, true, nil
}

// Put implements Store.
func (s *DirStore) Put(ctx context.Context, key string, b []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name, err := s.file(key)
	if err != nil {
		return fmt.Errorf("storing output of %q: %w", key, err)
	}
	if int64(len(b)) > s.maxSize {
		return fmt.Errorf("storing output of %q: %d bytes, more than %d", key, len(b), s.maxSize)
	}
	// WriteFile replaces a symbolic link rather than follow it.
	if err := atomicfile.WriteFile(name, b, 0o600); err != nil {
		return fmt.Errorf("storing output of %q: %w", key, err)
	}
	return nil
}

// OpenDirStore is NewDirStore for a render that its state must never
// fail: a full disk, a read-only or misconfigured folder cost the
// steadiness of the output, never the render. It returns the DirStore in
// dir through Lenient; when the folder cannot be opened (created, or it
// lets others write to it), a Store that holds nothing and stores
// nothing, which warns once, at the first Get, through warnf.
func OpenDirStore(dir string, maxSize int64, warnf func(format string, args ...any)) Store {
	s, err := NewDirStore(dir, maxSize)
	if err != nil {
		return &lenient{warnf: warnf, open: err}
	}
	return Lenient(s, warnf)
}

// Lenient returns s as a Store that never fails, as a Store on Redis
// does not when Redis fails: where s fails, Get finds nothing (the render
// is a first render, its output new and whole) and Put stores nothing
// (the next render is a first render), and warnf is told why. A canceled
// or expired ctx is still an error: the render stops. It is safe for
// concurrent use when s and warnf are.
func Lenient(s Store, warnf func(format string, args ...any)) Store {
	return &lenient{s: s, warnf: warnf}
}

// lenient is the Store of Lenient and OpenDirStore: s, or when it could
// not be opened, the reason in open.
type lenient struct {
	s     Store
	warnf func(format string, args ...any)
	open  error
}

var _ Store = (*lenient)(nil)

// Get implements Store.
func (l *lenient) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if l.open != nil {
		l.warn("%v: no previous output, none stored: every render is a first render", l.open)
		return nil, false, nil
	}
	b, ok, err := l.s.Get(ctx, key)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, err
		}
		l.warn("%v: rendering as a first render", err)
		return nil, false, nil
	}
	return b, ok, nil
}

// Put implements Store.
func (l *lenient) Put(ctx context.Context, key string, b []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.open != nil {
		return nil
	}
	if err := l.s.Put(ctx, key, b); err != nil {
		if ctx.Err() != nil {
			return err
		}
		l.warn("%v: the next render is a first render", err)
	}
	return nil
}

// warn calls warnf, when there is one.
func (l *lenient) warn(format string, args ...any) {
	if l.warnf != nil {
		l.warnf(format, args...)
	}
}
