//go:build unix

package testfiles

import (
	"path/filepath"
	"syscall"
	"testing"
)

// TestListening: a socket that is bound but not yet listening, as a
// server's is between its bind and its listen, is not ready, although its
// file exists; once it listens, it is. No file is not ready either.
func TestListening(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.sock")
	if Listening(path) {
		t.Fatalf("Listening(%s) with no socket = true", path)
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatalf("the bound socket has no file: %v", err)
	}
	if Listening(path) {
		t.Errorf("Listening(%s) of a socket bound but not listening = true", path)
	}
	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	if !Listening(path) {
		t.Errorf("Listening(%s) of a listening socket = false", path)
	}
}
