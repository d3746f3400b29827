// Package smallfile reads the small files the resolver is given or
// keeps (CA bundles, pull secrets, cache entries) without ever blocking
// on one that is not a regular file.
package smallfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Read reads a regular file of at most limit bytes, without ever
// blocking on what is not one: a FIFO, a device (/dev/zero, a terminal)
// or a socket is refused before it is opened for reading, and opened
// non-blocking in case it was swapped in since. With follow false, a
// symbolic link is refused too (the cache's own entries are never links);
// with follow true it is followed to a regular file (a Kubernetes Secret
// or ConfigMap mounted as a volume is a chain of links).
func Read(name string, limit int64, follow bool) ([]byte, error) {
	stat := os.Stat
	if !follow {
		stat = os.Lstat
	}
	fi, err := stat(name)
	if err != nil {
		return nil, err
	}
	if err := regular(fi); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, os.O_RDONLY|openFlags(follow), 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have been replaced between the look and the open.
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := regular(fi); err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%d bytes, more than the %d it may have", fi.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("more than the %d bytes it may have", limit)
	}
	return b, nil
}

// errNotRegular is a file that is a FIFO, a device, a socket, a folder or
// a link where a regular file was expected.
var errNotRegular = errors.New("not a regular file")

func regular(fi fs.FileInfo) error {
	m := fi.Mode()
	kind := "a special file"
	switch {
	case m.IsRegular():
		return nil
	case m&fs.ModeNamedPipe != 0:
		kind = "a FIFO"
	case m&fs.ModeSymlink != 0:
		kind = "a symbolic link"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	case m.IsDir():
		kind = "a folder"
	}
	return fmt.Errorf("%w: %s", errNotRegular, kind)
}
