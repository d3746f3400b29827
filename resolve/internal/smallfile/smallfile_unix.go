//go:build unix

package smallfile

import "syscall"

// openFlags makes opening a FIFO or a device return at once, and, unless
// follow, refuses a symbolic link at the last step of the name.
func openFlags(follow bool) int {
	if follow {
		return syscall.O_NONBLOCK
	}
	return syscall.O_NONBLOCK | syscall.O_NOFOLLOW
}
