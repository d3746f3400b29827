//go:build unix

package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// inBackground reports whether f is a terminal whose foreground process
// group is not this process's: reading it would stop the process with
// SIGTTIN, and a stopped process waits for a `fg` that a script never
// sends. `timeout N digestpin` does this: timeout moves itself and its
// child into a process group of their own unless given --foreground.
func inBackground(f *os.File) bool {
	fg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && fg != unix.Getpgrp()
}
