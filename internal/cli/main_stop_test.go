package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/internal/testregistry"
)

// failingWriter is a stdout that cannot be written, as /dev/full or a
// closed pipe is.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestNothingHalfWritten checks that a run that fails at any point, the
// write of its output included, leaves the lock file and the report as
// they were, and names the files the person gave.
func TestNothingHalfWritten(t *testing.T) {
	t.Parallel()
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	in := gen.Deployments("prod", reg.Ref("app:1"))
	for _, tc := range []struct {
		desc   string
		stdout io.Writer
		report string // relative to the test's folder
		want   string // in the error, DIR for the folder
	}{
		{desc: "stdout full", stdout: failingWriter{}, report: "report.json", want: "writing output: no space left on device"},
		{desc: "report folder missing", stdout: io.Discard, report: "none/report.json", want: "writing report DIR/none/report.json: no such file or directory"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			lock := filepath.Join(dir, "digests.lock")
			report := filepath.Join(dir, tc.report)
			var stderr strings.Builder
			err := run(context.Background(), []string{"--write-lock", lock, "--report", report}, strings.NewReader(string(in)), tc.stdout, &stderr)
			want := strings.ReplaceAll(tc.want, "DIR", dir)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("run() = %v, want an error with %q", err, want)
			}
			if names := testfiles.Names(t, dir); len(names) != 0 {
				t.Errorf("folder holds %v, want nothing written", names)
			}
		})
	}
}

// TestStoppedWhileReading checks that a signal and --timeout end a run
// that waits for its input, on stdin or a FIFO, with nothing written.
func TestStoppedWhileReading(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "in.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc   string
		args   []string
		signal bool
		want   string
		code   int
	}{
		{desc: "timeout on stdin", args: []string{"--timeout", "100ms"}, want: "--timeout 100ms ran out: reading manifests from stdin", code: 1},
		{desc: "timeout on a FIFO", args: []string{"--timeout", "100ms", "-f", fifo}, want: "--timeout 100ms ran out: reading manifests from " + fifo, code: 1},
		{desc: "SIGTERM on stdin", args: []string{}, signal: true, want: "stopped by terminated: nothing written", code: 128 + int(syscall.SIGTERM)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tc.signal {
				time.AfterFunc(50*time.Millisecond, func() { cancel(&SignalError{syscall.SIGTERM}) })
			}
			// A pipe nobody writes to: the read blocks until the run ends.
			pr, pw := io.Pipe()
			defer pw.Close()
			var stdout, stderr strings.Builder
			done := make(chan error, 1)
			go func() { done <- run(ctx, tc.args, pr, &stdout, &stderr) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("run() still reading after 10s")
			}
			if err == nil || !strings.Contains(stderr.String(), tc.want) || ExitCode(err) != tc.code {
				t.Errorf("run() = %v (exit %d), stderr %q; want exit %d and %q", err, ExitCode(err), stderr.String(), tc.code, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

// TestTimeoutNamesTheFlag checks that a run the registry keeps past
// --timeout says so, naming the flag, and the image it was resolving.
func TestTimeoutNamesTheFlag(t *testing.T) {
	reg := testregistry.New(t)
	reg.PushImage(t, "app:1")
	reg.SetLatency(5 * time.Second)
	t.Setenv("DIGESTPIN_TIMEOUT", "200ms")
	_, stderr, err := runIn(t, string(gen.Deployments("prod", reg.Ref("app:1"))))
	for _, want := range []string{"DIGESTPIN_TIMEOUT 200ms ran out", reg.Ref("app:1")} {
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("run() = %v, stderr %q; want it to say %q", err, stderr, want)
		}
	}
}

// TestUsageErrorsReachTheLog checks that a bad flag or variable is
// reported like every other error: to the --log-file too (and so, with
// --tty-errors, to the terminal that Helm 4 leaves the person).
func TestUsageErrorsReachTheLog(t *testing.T) {
	for _, tc := range []struct {
		desc string
		args []string
		env  map[string]string
		want string
	}{
		{desc: "unknown flag", args: []string{"--no-such-flag"}, want: "unknown flag: --no-such-flag (see digestpin --help)"},
		{desc: "bad variable", env: map[string]string{"DIGESTPIN_CONCURRENCY": "many"}, want: `invalid DIGESTPIN_CONCURRENCY "many": want a whole number`},
		{desc: "bad value", args: []string{"--on-error", "ignore"}, want: `invalid --on-error "ignore": want fail or keep`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "digestpin.log")
			t.Setenv("DIGESTPIN_LOG_FILE", logFile)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, _, err := runIn(t, "", tc.args...)
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("run() = %v, want a usage error", err)
			}
			b, _ := os.ReadFile(logFile)
			if !strings.Contains(string(b), "digestpin: error: "+tc.want) {
				t.Errorf("log file = %q, want the error %q", b, tc.want)
			}
		})
	}
}

// TestLogFileFIFONeverBlocks checks that a --log-file that is a FIFO
// nobody reads costs a warning, not a run that never starts.
func TestLogFileFIFONeverBlocks(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		_, stderr, _ := runIn(t, "", "--log-file", fifo, "--version")
		done <- stderr
	}()
	select {
	case stderr := <-done:
		if !strings.Contains(stderr, "warning: opening log file") {
			t.Errorf("stderr = %q, want a warning about the log file", stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run() blocked on a FIFO log file")
	}
}

// stuckWriter takes n bytes, then blocks every write until release is
// closed, as a pipe whose reader stopped reading does.
type stuckWriter struct {
	n       int
	got     []byte
	release chan struct{}
}

func (w *stuckWriter) Write(b []byte) (int, error) {
	if len(w.got)+len(b) > w.n {
		<-w.release
		return 0, syscall.EPIPE
	}
	w.got = append(w.got, b...)
	return len(b), nil
}

// TestWriteOutputStops checks that a write that blocks ends at the
// deadline, and that the error says how much of the output got out.
func TestWriteOutputStops(t *testing.T) {
	t.Parallel()
	out := make([]byte, 5*outputChunk+10)
	for _, tc := range []struct {
		desc  string
		takes int
		want  string
	}{
		{desc: "nothing taken", takes: 0, want: "--timeout 1ms ran out while writing the output: nothing written"},
		{desc: "two chunks taken", takes: 2*outputChunk + 100, want: fmt.Sprintf("--timeout 1ms ran out while writing the output: %d of %d bytes written, the output is cut short", 2*outputChunk, len(out))},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			w := &stuckWriter{n: tc.takes, release: make(chan struct{})}
			defer close(w.release)
			ctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, &timeoutError{flag: "--timeout", d: time.Millisecond})
			defer cancel()
			start := time.Now()
			err := writeOutput(ctx, w, bytes.NewReader(out))
			if err == nil || err.Error() != tc.want {
				t.Errorf("writeOutput() = %v, want %q", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("writeOutput() took %s, want it to end at the deadline", d)
			}
		})
	}
	// A write that fails says so, and how much went out before.
	err := writeOutput(context.Background(), failingWriter{}, bytes.NewReader(out))
	if want := "writing output: no space left on device; nothing written"; err == nil || err.Error() != want {
		t.Errorf("writeOutput(full disk) = %v, want %q", err, want)
	}
}
