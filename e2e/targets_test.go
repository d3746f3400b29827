//go:build unix

package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// offlineRun is a folder with a stream of the hostile image (in.yaml) and
// a lock file that pins it (digests.lock), for runs that ask no registry.
func offlineRun(t *testing.T) (dir string, args []string) {
	t.Helper()
	dir = t.TempDir()
	sum := sha256.Sum256([]byte(hostileImage))
	files := map[string]string{
		"digests.lock": fmt.Sprintf("version: 1\nimages:\n  - reference: %s\n    digest: sha256:%s\n", hostileImage, hex.EncodeToString(sum[:])),
		"in.yaml":      podWith(""),
	}
	for f, s := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, []string{"--lock", filepath.Join(dir, "digests.lock"), "--frozen"}
}

// TestBinaryRefusesTargetThatIsTheOutput runs the binary with a lock
// file, a report or a log file that is the output stream (through
// /dev/stdout, /proc/self/fd/1, a link, or its own name), the input, or
// another file the run writes or reads. Each is refused before anything
// is written, with one line naming the flag, and exit status 2; before,
// the lock file or the report replaced the manifests, and the log file
// went into them.
func TestBinaryRefusesTargetThatIsTheOutput(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	for _, tc := range []struct {
		desc  string
		pipe  bool     // stdout is a pipe; else the file out.yaml
		stdin bool     // the input comes on stdin (in.yaml); else -f in.yaml
		args  []string // DIR is the test's folder
		want  string
	}{
		{desc: "lock file /dev/stdout", args: []string{"--write-lock", "/dev/stdout"}, want: "--write-lock /dev/stdout is the output (stdout)"},
		{desc: "report /dev/stdout", args: []string{"--report", "/dev/stdout"}, want: "--report /dev/stdout is the output (stdout)"},
		{desc: "lock file /proc/self/fd/1", args: []string{"--write-lock", "/proc/self/fd/1"}, want: "--write-lock /proc/self/fd/1 is the output (stdout)"},
		{desc: "report /dev/fd/1", args: []string{"--report", "/dev/fd/1"}, want: "--report /dev/fd/1 is the output (stdout)"},
		{desc: "lock file by its name", args: []string{"--write-lock", "DIR/out.yaml"}, want: "--write-lock DIR/out.yaml is the output (stdout)"},
		{desc: "report through a link", args: []string{"--report", "DIR/link"}, want: "--report DIR/link is the output (stdout)"},
		{desc: "log file /dev/stdout", args: []string{"--log-file", "/dev/stdout"}, want: "--log-file /dev/stdout is the output (stdout)"},
		{desc: "log file through a link", args: []string{"--log-file", "DIR/link"}, want: "--log-file DIR/link is the output (stdout)"},
		{desc: "lock file /dev/stdout, a pipe", pipe: true, args: []string{"--write-lock", "/dev/stdout"}, want: "--write-lock /dev/stdout is the output (stdout)"},
		{desc: "log file /dev/stdout, a pipe", pipe: true, args: []string{"--log-file", "/dev/stdout", "-v"}, want: "--log-file /dev/stdout is the output (stdout)"},
		{desc: "lock file the -f input", args: []string{"--write-lock", "DIR/in.yaml"}, want: "--write-lock DIR/in.yaml is the input (-f DIR/in.yaml)"},
		{desc: "report the input on stdin", stdin: true, args: []string{"--report", "/dev/stdin"}, want: "--report /dev/stdin is the input (stdin)"},
		{desc: "log file the -f input", args: []string{"--log-file", "DIR/in.yaml"}, want: "--log-file DIR/in.yaml is the input (-f DIR/in.yaml)"},
		{desc: "report the lock file read", args: []string{"--report", "DIR/digests.lock"}, want: "--report DIR/digests.lock is the file of --lock"},
		{desc: "report the lock file written", args: []string{"--write-lock", "DIR/new.lock", "--report", "DIR/new.lock"}, want: "--report DIR/new.lock is the file of --write-lock"},
		{desc: "log file the report", args: []string{"--log-file", "DIR/log", "--report", "DIR/log"}, want: "--report DIR/log is the file of --log-file"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir, args := offlineRun(t)
			out := filepath.Join(dir, "out.yaml")
			if err := os.Symlink(out, filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "DIR", dir))
			}
			in := filepath.Join(dir, "in.yaml")
			before, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, args...)
			if tc.stdin {
				f, err := os.Open(in)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				cmd.Stdin = f
			} else {
				cmd.Args = append(cmd.Args, "-f", in)
			}
			cmd.Env = cleanEnv()
			var stdout bytes.Buffer
			if tc.pipe {
				cmd.Stdout = &stdout
			} else {
				f, err := os.Create(out)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				cmd.Stdout = f
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			_ = cmd.Run()
			want := strings.ReplaceAll(tc.want, "DIR", dir)
			if code := cmd.ProcessState.ExitCode(); code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "digestpin: error: "+want) {
				t.Errorf("exit status %d, stderr %q; want 2 and one line with %q", code, stderr.String(), want)
			}
			if !tc.pipe {
				b, _ := os.ReadFile(out)
				stdout.Write(b)
			}
			if stdout.Len() != 0 {
				t.Errorf("the output holds %q, want nothing", stdout.String())
			}
			if after, _ := os.ReadFile(in); !bytes.Equal(after, before) {
				t.Errorf("the input is now %q, want it unchanged", after)
			}
			if _, err := os.Lstat(filepath.Join(dir, "new.lock")); err == nil {
				t.Errorf("new.lock was written")
			}
			// A log file that is fine gets the error, and nothing else.
			if b, err := os.ReadFile(filepath.Join(dir, "log")); err == nil && string(b) != stderr.String() {
				t.Errorf("the log file holds %q, want the error alone", b)
			}
		})
	}
}

// TestBinaryTargetsThatAreFine checks what the refusals above must not
// catch: the lock file read and written in one run, and stdout and the
// targets on /dev/null.
func TestBinaryTargetsThatAreFine(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	dir, args := offlineRun(t)
	lock := filepath.Join(dir, "digests.lock")
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for _, extra := range [][]string{
		{"--write-lock", lock},
		{"--log-file", os.DevNull},
	} {
		cmd := exec.Command(bin, append(append(args, "-f", filepath.Join(dir, "in.yaml")), extra...)...)
		cmd.Env = cleanEnv()
		cmd.Stdout = devnull
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("digestpin %s = %v, %s; want success", strings.Join(extra, " "), err, stderr.String())
		}
	}
}
