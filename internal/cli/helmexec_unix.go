//go:build unix

package cli

import (
	"fmt"
	"syscall"
)

// execHelm runs the program at path in this process's place (execve):
// stdin, stdout, stderr, the process id, and so the exit status and the
// signals it gets, are digestpin-helm's. It returns only when it failed.
func execHelm(path string, args, env []string) error {
	if err := syscall.Exec(path, args, env); err != nil { //nolint:gosec // digestpin-helm beside this binary or on PATH, with the user's own arguments
		return fmt.Errorf("running %s: %w", path, err)
	}
	return nil
}
