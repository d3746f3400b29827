// Package atomicfile writes files so that a reader, or another process
// writing the same file, never sees a partial one.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes data to a temporary file beside path, with mode perm,
// syncs it and renames it over path. Concurrent writers of one path leave
// one whole file: the last rename wins. A symbolic link at path is
// replaced, not followed. On error no temporary file is left behind.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	p, err := prepare(path, path, data, perm, true)
	if err != nil {
		return err
	}
	return p.Commit()
}

// WriteCacheFile is WriteFile without the sync, for a cache entry: a
// reader or another writer still never sees a partial file, but after a
// crash of the machine the entry may be empty or torn, which a cache's
// reader rejects as it rejects any corrupt entry. A sync costs a few
// milliseconds on a disk, each, and they queue: 40 entries took 45 ms of
// a 150 ms run.
func WriteCacheFile(path string, data []byte, perm os.FileMode) error {
	p, err := prepare(path, path, data, perm, false)
	if err != nil {
		return err
	}
	return p.Commit()
}

// Pending is a file written in full beside its destination and not yet
// in place: Commit puts it there, Discard drops it. Errors name the path
// the caller gave, never the temporary file.
type Pending struct {
	path string // as the caller gave it
	dest string // path with its symbolic links followed
	tmp  string
}

// Prepare writes data to a temporary file beside the file that path names
// and returns it, to be committed once everything else has succeeded.
// Unlike WriteFile it writes through a symbolic link at path (the link
// stays and its target changes) and keeps the mode of a file that exists
// already; perm is the mode of a new file. A destination that exists and
// is not a regular file is an error.
func Prepare(path string, data []byte, perm os.FileMode) (*Pending, error) {
	dest, err := Destination(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch fi, err := os.Stat(dest); {
	case err == nil && !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: %s is not a regular file", path, dest)
	case err == nil:
		perm = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	return prepare(path, dest, data, perm, true)
}

// maxLinks bounds the symbolic links followed from one path, as the
// kernel's ELOOP does.
const maxLinks = 40

// Destination returns the file that Prepare writes for path: path after
// following symbolic links, including a last link whose target does not
// exist yet (a new file is created there).
func Destination(path string) (string, error) {
	for range maxLinks {
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return path, nil
		}
		if err != nil {
			return "", unwrapPath(err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		target, err := os.Readlink(path)
		if err != nil {
			return "", unwrapPath(err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	return "", errors.New("too many levels of symbolic links")
}

// prepare writes data with mode perm to a temporary file in dest's
// folder, and syncs it when sync is true.
func prepare(path, dest string, data []byte, perm os.FileMode, sync bool) (_ *Pending, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPath(err))
	}
	defer func() {
		if err != nil {
			// The write failed already: clean up as well as we can.
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
			err = fmt.Errorf("%s: %w", path, unwrapPath(err))
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return nil, err
	}
	if err = tmp.Chmod(perm); err != nil {
		return nil, err
	}
	if sync {
		if err = tmp.Sync(); err != nil {
			return nil, err
		}
	}
	if err = tmp.Close(); err != nil {
		return nil, err
	}
	return &Pending{path: path, dest: dest, tmp: tmp.Name()}, nil
}

// Commit renames the file into place. On error the temporary file is
// removed and the destination is as it was.
func (p *Pending) Commit() error {
	if err := os.Rename(p.tmp, p.dest); err != nil {
		_ = os.Remove(p.tmp)
		return fmt.Errorf("%s: %w", p.path, unwrapPath(err))
	}
	return nil
}

// Discard removes the temporary file; the destination is untouched.
func (p *Pending) Discard() { _ = os.Remove(p.tmp) }

// unwrapPath drops the file name of an *fs.PathError or *os.LinkError,
// which may be the temporary file's, for the caller to name the file.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
