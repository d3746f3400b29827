//go:build unix

package cli

import "golang.org/x/sys/unix"

// mapAnon returns n bytes of private anonymous memory, outside the Go
// heap.
func mapAnon(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

// unmap gives back memory from mapAnon.
func unmap(b []byte) { _ = unix.Munmap(b) }
