//go:build unix

package cli

import "golang.org/x/sys/unix"

// readable reports whether this process may read path (bash's -r): a
// question to the kernel, which opens nothing, so that a FIFO does not
// block.
func readable(path string) bool { return unix.Access(path, unix.R_OK) == nil }
