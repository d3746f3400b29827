package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/digestpin/digestpin/internal/gen"
)

// The tests of this file are not parallel: they count mappedInput, which
// every run of the package changes.

// largeStream returns a stream of pinned Deployments of more than
// minMapped bytes, and the path of a file that holds it.
func largeStream(t *testing.T) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	if err := gen.Stream(&b, gen.Options{Deployments: 1500, Pinned: true}); err != nil {
		t.Fatal(err)
	}
	if b.Len() < minMapped {
		t.Fatalf("the stream is %d bytes, want at least minMapped", b.Len())
	}
	path := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), path
}

// gaugeWriter notes how much input is mapped at its first write.
type gaugeWriter struct {
	bytes.Buffer
	mapped int64
}

func (w *gaugeWriter) Write(b []byte) (int, error) {
	if w.Len() == 0 {
		w.mapped = mappedInput.Load()
	}
	return w.Buffer.Write(b)
}

// TestLargeInputMapped checks that a large input, from a file (-f, or
// stdin redirected from it) or a pipe, is mapped outside the heap while
// the output is written, the same output, and unmapped once it is.
func TestLargeInputMapped(t *testing.T) {
	in, path := largeStream(t)
	var want []byte
	for _, tc := range []struct {
		desc  string
		args  []string
		stdin func(t *testing.T) io.Reader
	}{
		{desc: "-f FILE", args: []string{"-f", path}, stdin: func(*testing.T) io.Reader { return strings.NewReader("") }},
		{desc: "stdin from a file", stdin: func(t *testing.T) io.Reader {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}},
		{desc: "stdin from a pipe", stdin: func(t *testing.T) io.Reader {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			go func() {
				defer w.Close()
				_, _ = w.Write(in)
			}()
			return r
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			before := mappedInput.Load()
			var stdout gaugeWriter
			var stderr bytes.Buffer
			if err := run(context.Background(), tc.args, tc.stdin(t), &stdout, &stderr); err != nil {
				t.Fatalf("run() = %v, stderr %s", err, stderr.String())
			}
			if stdout.mapped-before != int64(len(in)) {
				t.Errorf("while the output was written, %d bytes of input were mapped, want %d", stdout.mapped-before, len(in))
			}
			if after := mappedInput.Load(); after != before {
				t.Errorf("after run(), %d bytes of input are still mapped, want 0", after-before)
			}
			if want == nil {
				want = stdout.Bytes()
			}
			if !bytes.Equal(stdout.Bytes(), want) || bytes.Equal(stdout.Bytes(), in) {
				t.Errorf("run() wrote %d bytes, want the %d of the first run, not the input", stdout.Len(), len(want))
			}
		})
	}
}

// TestAbandonedReadUnmaps checks that the read that a --timeout left
// behind unmaps what it read once it ends, since nobody takes it.
func TestAbandonedReadUnmaps(t *testing.T) {
	in, _ := largeStream(t)
	before := mappedInput.Load()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Write all but the end of the stream: the read waits for the rest.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = w.Write(in)
	}()
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"--timeout", "200ms"}, r, &stdout, &stderr)
	if err == nil || stdout.Len() != 0 || !strings.Contains(stderr.String(), "reading manifests from stdin") {
		t.Fatalf("run() = %v, stdout %d bytes, stderr %q; want the timeout while reading", err, stdout.Len(), stderr.String())
	}
	wg.Wait()
	w.Close() // the read ends now, maps the input, and unmaps it
	for deadline := time.Now().Add(10 * time.Second); mappedInput.Load() != before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of input still mapped 10s after the abandoned read ended", mappedInput.Load()-before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// blockedWriter blocks every write until release is closed, then fails
// it (EPIPE), as a pipe whose reader stopped reading; blocked is closed at
// the first write.
type blockedWriter struct {
	blocked, release chan struct{}
	once             sync.Once
}

func (w *blockedWriter) Write([]byte) (int, error) {
	w.once.Do(func() { close(w.blocked) })
	<-w.release
	return 0, syscall.EPIPE
}

// TestStoppedWriteKeepsInput checks that the input stays mapped when a
// signal stops the write of the output to a stdout that does not read:
// the goroutine left blocked in that write reads the input when it goes
// on, and memory unmapped under it would fault. (That memory goes with
// the process.)
func TestStoppedWriteKeepsInput(t *testing.T) {
	_, path := largeStream(t)
	before := mappedInput.Load()
	w := &blockedWriter{blocked: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		<-w.blocked
		cancel(&SignalError{syscall.SIGTERM})
	}()
	var stderr bytes.Buffer
	err := run(ctx, []string{"-f", path}, strings.NewReader(""), w, &stderr)
	if err == nil || !strings.Contains(stderr.String(), "stopped by terminated while writing the output") {
		t.Fatalf("run() = %v, stderr %q; want the signal while writing", err, stderr.String())
	}
	if mappedInput.Load() == before {
		t.Error("the input was unmapped while a write of the output was still blocked")
	}
	// The write fails, and the goroutine ends without a fault.
	close(w.release)
	time.Sleep(50 * time.Millisecond)
}
