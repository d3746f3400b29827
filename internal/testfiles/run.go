package testfiles

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"time"
)

// CleanEnv returns this process's environment without the developer's
// own DIGESTPIN_* settings (DIGESTPIN_TEST_* stay, they name the tools),
// so that they change no command of a test, with extra added.
func CleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DIGESTPIN_") && !strings.HasPrefix(kv, "DIGESTPIN_TEST_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// Result is what a command printed and how it ended.
type Result struct {
	Stdout, Stderr string
	Err            error
}

// Run runs name with args, stdin (none when nil) and CleanEnv(env...),
// for up to two minutes.
func Run(stdin []byte, env []string, name string, args ...string) Result {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = CleanEnv(env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return Result{Stdout: out.String(), Stderr: errb.String(), Err: err}
}
