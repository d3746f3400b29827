//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// blockedPipe returns a pipe whose reader never reads, as an *os.File for
// the writing end and the raw reading end. With full, the pipe is full
// already: not one more byte goes in.
func blockedPipe(t *testing.T, full bool) (w *os.File, r int) {
	t.Helper()
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fds[0]) })
	if full {
		// Fill it without blocking, then hand it on blocking, as a
		// shell's pipe is.
		if err := syscall.SetNonblock(fds[1], true); err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 4096)
		for {
			if _, err := syscall.Write(fds[1], chunk); err != nil {
				if err != syscall.EAGAIN {
					t.Fatal(err)
				}
				break
			}
		}
		if err := syscall.SetNonblock(fds[1], false); err != nil {
			t.Fatal(err)
		}
	}
	return os.NewFile(uintptr(fds[1]), "pipe"), fds[0]
}

// blockedFIFO returns a FIFO whose reader never reads: the writing end for
// the child and the raw reading end, opened first so that the writer's
// open does not wait.
func blockedFIFO(t *testing.T) (w *os.File, r int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(r) })
	w, err = os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return w, r
}

// inPipe returns how many bytes wait in the pipe or FIFO r.
func inPipe(t *testing.T, r int) int {
	t.Helper()
	var n int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(r), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Fatal(errno)
	}
	return int(n)
}

// pipeSize returns the capacity of the pipe or FIFO r.
func pipeSize(t *testing.T, r int) int {
	t.Helper()
	n, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(r), syscall.F_GETPIPE_SZ, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	return int(n)
}

// TestBinaryBlockedStdout runs the binary with a stdout that nobody reads:
// a pipe and a FIFO, from a child process, as a stuck consumer leaves
// them. --timeout and the first SIGTERM still end the run at once (it ran
// on, stuck in the write, before), with the status of what stopped it,
// and the error says whether the output was cut and where. No lock file
// is written.
func TestBinaryBlockedStdout(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	dir, args := offlineRun(t)
	// A stream whose output is several times a pipe's 64 KiB.
	var big strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&big, "---\n%s", strings.Replace(podWith(""), "name: p\n", fmt.Sprintf("name: p%d\n", i), 1))
	}
	small := podWith("")
	newLock := filepath.Join(dir, "new.lock")
	args = append(args, "--write-lock", newLock)
	cut := regexp.MustCompile(`while writing the output: (\d+) of (\d+) bytes written, the output is cut short`)

	for _, tc := range []struct {
		desc   string
		fifo   bool
		full   bool // nothing fits in the pipe
		in     string
		signal bool
		want   string // in the error; for a cut output, cut is checked too
		code   int
	}{
		{desc: "timeout, a full pipe", full: true, in: small, want: "--timeout 2s ran out while writing the output: nothing written", code: 1},
		{desc: "timeout, a pipe", in: big.String(), want: "--timeout 2s ran out while writing the output: ", code: 1},
		{desc: "timeout, a FIFO", fifo: true, in: big.String(), want: "--timeout 2s ran out while writing the output: ", code: 1},
		{desc: "SIGTERM, a pipe", signal: true, in: big.String(), want: "stopped by terminated while writing the output: ", code: 128 + int(syscall.SIGTERM)},
		{desc: "SIGTERM, a FIFO", fifo: true, signal: true, in: big.String(), want: "stopped by terminated while writing the output: ", code: 128 + int(syscall.SIGTERM)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var w *os.File
			var r int
			if tc.fifo {
				w, r = blockedFIFO(t)
			} else {
				w, r = blockedPipe(t, tc.full)
			}
			before := inPipe(t, r)
			runArgs := append(append([]string{}, args...), "--timeout", "2s")
			if tc.signal {
				runArgs[len(runArgs)-1] = "10m"
			}
			cmd := exec.Command(bin, runArgs...)
			cmd.Env = cleanEnv()
			cmd.Stdin = strings.NewReader(tc.in)
			cmd.Stdout = w
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			if tc.signal {
				// Once the pipe is full, the run is stuck in the write.
				for inPipe(t, r) < pipeSize(t, r) {
					select {
					case <-done:
						t.Fatalf("digestpin ended before its output filled the pipe: %s", stderr.String())
					case <-time.After(10 * time.Millisecond):
					}
				}
				time.Sleep(100 * time.Millisecond)
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				start = time.Now()
			}
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("digestpin still running after 20s, stuck in the write; stderr %q", stderr.String())
			}
			took := time.Since(start)
			// The bound is generous, for a loaded machine: stuck, the
			// run never ends.
			if limit := 10 * time.Second; took > limit {
				t.Errorf("digestpin took %s to stop, want well under %s", took.Round(time.Millisecond), limit)
			}
			msg := stderr.String()
			if code := cmd.ProcessState.ExitCode(); code != tc.code || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) {
				t.Errorf("exit status %d, stderr %q; want %d and one line with %q", code, msg, tc.code, tc.want)
			}
			if m := cut.FindStringSubmatch(msg); m != nil {
				// What the error says went out is what the pipe holds.
				got := inPipe(t, r) - before
				if n, _ := strconv.Atoi(m[1]); n != got {
					t.Errorf("the error says %s bytes written, the pipe holds %d", m[1], got)
				}
				if total, _ := strconv.Atoi(m[2]); total <= got {
					t.Errorf("the error says %s bytes in all, want more than the %d written", m[2], got)
				}
			} else if !tc.full {
				t.Errorf("stderr %q does not say how much of the output was written", msg)
			}
			if _, err := os.Stat(newLock); err == nil {
				t.Errorf("the lock file was written")
			}
		})
	}
}

// TestBinaryBlockedStderr runs the binary with a stderr that nobody reads
// (a full pipe) and an input that never comes: the run still ends at
// --timeout, although its error cannot be written.
func TestBinaryBlockedStderr(t *testing.T) {
	t.Parallel()
	bin := digestpinBin(t)
	w, _ := blockedPipe(t, true)
	fifo := filepath.Join(t.TempDir(), "in")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--timeout", "1s", "-f", fifo)
	cmd.Env = cleanEnv()
	cmd.Stderr = w
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("digestpin still running after 20s, stuck writing its error")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("digestpin took %s to stop, want well under 10s", took.Round(time.Millisecond))
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
}
