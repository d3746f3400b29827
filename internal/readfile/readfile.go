// Package readfile reads the files a person names (a lock file, a
// configuration file, a Redis password or CA file) without ever blocking
// on something that is not a file.
package readfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Regular reads the regular file at path, of at most limit bytes. It opens
// with O_NONBLOCK, so that a FIFO does not block the open, and checks the
// type on the open file, so that nothing can be swapped in between; a
// FIFO, device, socket or folder is an error, and so is a file over limit.
func Regular(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, path, limit)
}

// RegularIn is Regular for the file name of root: nothing outside root
// is read, through ".." or a symbolic link.
func RegularIn(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, name, limit)
}

// read reads f, opened for path, as Regular says.
func read(f *os.File, path string, limit int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := All(f, limit)
	if errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("%s: larger than %d MiB", path, limit>>20)
	}
	return b, err
}
