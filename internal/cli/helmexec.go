package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// fullCommand returns the command of args (argv) that this build leaves
// out, "" for the others: template, install, upgrade and flux pin, which
// need Helm's engine, and argocd refresh, which needs Kubernetes' client.
// The slim build (the root package) runs digestpin-helm, the full build, for
// them, as git runs git-* from its exec path.
//
// The completion of those commands' arguments (cobra's hidden __complete
// command, which the completion scripts run) is theirs too: only the
// full build knows their flags.
func fullCommand(args []string) string {
	if len(args) > 2 && completing(args) {
		args = args[1:]
	}
	switch {
	case len(args) < 2:
		return ""
	case slices.Contains([]string{"template", "install", "upgrade"}, args[1]):
		return args[1]
	case args[1] == "argocd" && len(args) > 2 && args[2] == "refresh":
		return "argocd refresh"
	case args[1] == "flux" && len(args) > 2 && args[2] == "pin":
		return "flux pin"
	}
	return ""
}

// completing says that args (argv) asks for completions: cobra's hidden
// __complete command, or __completeNoDesc.
func completing(args []string) bool {
	return len(args) > 1 && (args[1] == cobra.ShellCompRequestCmd || args[1] == cobra.ShellCompNoDescRequestCmd)
}

// helmBinary is the full build's file name.
func helmBinary() string {
	if runtime.GOOS == "windows" {
		return "digestpin-helm.exe"
	}
	return "digestpin-helm"
}

// forwardHelm runs digestpin-helm with args[1:] when args names one of
// the commands of the full build only (fullCommand), with args[0] (what
// the user typed) as its argv[0] and this binary's version in
// execVersionEnv: on Unix in this process's place (execHelm does not
// return when it succeeds), elsewhere as a child whose exit status it
// returns (as a *toolExit). started says that a digestpin started this
// one as digestpin-helm, which it is not: forwarding again would run
// itself for ever.
func forwardHelm(args []string, started bool) (bool, error) {
	command := fullCommand(args)
	if command == "" {
		return false, nil
	}
	self, err := executable()
	if err != nil {
		return true, err
	}
	if started {
		return true, fmt.Errorf("%s was run as %s, but it is digestpin without Helm's engine (%s is set only by digestpin): put the %s of the release beside it", self, helmBinary(), execVersionEnv, helmBinary())
	}
	path, err := findHelm(command, filepath.Dir(self))
	if err != nil {
		// Without digestpin-helm, complete what this build knows (the
		// commands, not their flags) rather than fail at every tab.
		return !completing(args), err
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, execVersionEnv+"=")
	})
	env = append(env, execVersionEnv+"="+versionString())
	return true, execHelm(path, args, env)
}

// executable returns the running binary with symbolic links resolved:
// digestpin-helm is looked for first in its folder.
func executable() (string, error) {
	self, err := os.Executable()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return "", fmt.Errorf("finding digestpin's own folder, where %s is looked for: %w", helmBinary(), err)
	}
	return self, nil
}

// findHelm returns the digestpin-helm that runs command: the one in dir
// (this binary's folder) when there is one, else the first on PATH. One
// in dir that cannot be run (a dangling or looping link, a folder) is an
// error rather than a reason to take one from PATH instead, and so is
// one found on PATH only through a relative folder.
func findHelm(command, dir string) (string, error) {
	name := helmBinary()
	sibling := filepath.Join(dir, name)
	fi, err := os.Stat(sibling)
	switch {
	case err == nil && fi.Mode().IsRegular():
		return sibling, nil
	case err == nil:
		return "", fmt.Errorf("running digestpin %s: %s is not a file", command, sibling)
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("running digestpin %s: %w", command, err)
	}
	if _, err := os.Lstat(sibling); err == nil {
		return "", fmt.Errorf("running digestpin %s: %s is a link to nothing", command, sibling)
	}
	path, err := exec.LookPath(name)
	switch {
	case err == nil:
		return path, nil
	case errors.Is(err, exec.ErrDot):
		return "", fmt.Errorf("running digestpin %s: %s is on PATH only in a relative folder (%s), which digestpin does not run from: put it beside digestpin in %s", command, name, path, dir)
	}
	return "", fmt.Errorf("digestpin %s needs %s, the full build, which is neither in %s (beside digestpin) nor on PATH: install both files of the release archive, or go install github.com/digestpin/digestpin/cmd/digestpin-helm@%s beside it", command, name, dir, goInstallVersion())
}

// goInstallVersion is the version to go install: this one, or latest
// for a build of no release.
func goInstallVersion() string {
	if v := versionString(); v != "dev" {
		return "v" + v
	}
	return "latest"
}
