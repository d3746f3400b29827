//go:build !unix

package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
)

// execHelm runs the program at path as a child with this process's
// stdin, stdout and stderr, and returns its exit status as a *toolExit
// (nil for 0): there is no execve here. The console's Ctrl-C reaches the
// child too; this process waits for it rather than end first.
func execHelm(path string, args, env []string) error {
	signal.Notify(make(chan os.Signal, 1), os.Interrupt)
	cmd := exec.Command(path, args[1:]...)
	cmd.Args[0] = args[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return &toolExit{ee.ExitCode()}
	}
	return fmt.Errorf("running %s: %w", path, err)
}
