package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// execVersionEnv is the variable in which the build without Helm's
// engine (the root package) passes its version to the digestpin-helm it runs
// for template, install and upgrade, which refuses to run for another
// version: the two files of a release belong together.
const execVersionEnv = "DIGESTPIN_EXEC_VERSION"

// handOff is what main does first, before any signal handler is set. A
// digestpin started by a digestpin of another version (execVersionEnv)
// refuses to run; otherwise the variable is removed from this process's
// environment, so that Helm, plugins, kustomize and the digestpin runs
// that this one starts never see it. Then forwardHelm may run
// digestpin-helm in this process's place. handOff reports true when the
// command has run and main has nothing left to do.
func handOff(args []string, full bool) (bool, error) {
	started, err := checkExecVersion(os.LookupEnv, os.Unsetenv)
	if err != nil {
		return true, err
	}
	if full {
		return false, nil // every command runs in this process
	}
	return forwardHelm(args, started)
}

// handedOff reports the error of a handOff that ran the command (nil,
// or a refusal, or the exit status of a digestpin-helm that has said why
// itself) and returns the exit status.
func handedOff(err error, stderr io.Writer) int {
	var te *toolExit
	switch {
	case err == nil:
		return 0
	case !errors.As(err, &te):
		_ = reported(stderr, err) // the status follows from err
	}
	return ExitCode(err)
}

// checkExecVersion reports whether execVersionEnv is set, and fails when
// it names another version than this binary's. It unsets the variable
// (unset) once it has been checked.
func checkExecVersion(lookup func(string) (string, bool), unset func(string) error) (bool, error) {
	v, ok := lookup(execVersionEnv)
	if !ok {
		return false, nil
	}
	if v != versionString() {
		self, err := os.Executable()
		if err != nil {
			self = "digestpin-helm"
		}
		return true, fmt.Errorf("%s is digestpin %s, but the digestpin that ran it is %s: install both files of one release (%s is set only by digestpin)", self, versionString(), v, execVersionEnv)
	}
	if err := unset(execVersionEnv); err != nil {
		return true, fmt.Errorf("unsetting %s: %w", execVersionEnv, err)
	}
	return true, nil
}
