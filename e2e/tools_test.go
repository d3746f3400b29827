package e2e

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/renderer"
)

// documents splits a manifest stream with digestpin's one splitter,
// renderer.Split: each document with its separator line.
func documents(t *testing.T, stream string) []string {
	t.Helper()
	docs, err := renderer.Split([]byte(stream))
	if err != nil {
		t.Fatalf("splitting the stream: %v\n%s", err, stream)
	}
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = string(d)
	}
	return out
}

// tool returns the path of the executable named by env (testfiles.Tool:
// skipped outside CI when missing, failed in CI).
func tool(t *testing.T, env string) string {
	t.Helper()
	return testfiles.Tool(t, env, env+" does not name an executable; run the tests with `make test`, which builds it")
}

// digestpinBin returns the digestpin binary under test.
func digestpinBin(t *testing.T) string { return tool(t, "DIGESTPIN_TEST_BIN") }

// helm3 returns the Helm v3 CLI.
func helm3(t *testing.T) string { return tool(t, "DIGESTPIN_TEST_HELM3") }

// helm4 returns the Helm v4 CLI.
func helm4(t *testing.T) string { return tool(t, "DIGESTPIN_TEST_HELM4") }

// repoRoot returns the repository's root folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// cleanEnv returns the environment without DIGESTPIN_* settings (so that a
// developer's own settings cannot change a test) and with the given
// settings added.
func cleanEnv(extra ...string) []string { return testfiles.CleanEnv(extra...) }

// result is what a command printed and how it ended.
type result struct {
	stdout, stderr string
	err            error
}

// runCmd runs name with args, stdin and env (added to cleanEnv) in dir.
func runCmd(t *testing.T, dir string, stdin []byte, env []string, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return result{stdout: out.String(), stderr: errb.String(), err: err}
}
