package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// outputChunk is how much of the output one write carries. A write of at
// most PIPE_BUF bytes (4096 on Linux) to a pipe or FIFO goes in whole or
// waits with nothing written, so that the bytes counted are the bytes the
// reader gets, to the byte, when a run stops in the middle of its output.
const outputChunk = 4096

// output is what writeOutput writes: a *pin.Result (or, in tests, a
// *bytes.Reader), which writes itself from its pieces.
type output interface {
	io.WriterTo
	// Len is the number of bytes WriteTo writes.
	Len() int
}

// errStopped stops a WriteTo that a signal or --timeout ended.
var errStopped = errors.New("stopped")

// writeOutput writes out to w, honouring ctx. A write to a pipe whose
// reader does not read blocks in the kernel, where no context reaches it:
// the writes run on their own goroutine, and writeOutput returns when ctx
// ends, leaving that goroutine blocked, which is fine for a process about
// to exit. The error says how much of out was written.
func writeOutput(ctx context.Context, w io.Writer, out output) error {
	cw := &chunkWriter{w: w}
	total := out.Len()
	done := make(chan error, 1)
	go func() {
		_, err := out.WriteTo(cw)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return &writeError{cause: err, written: cw.written.Load(), total: total}
		}
		return nil
	case <-ctx.Done():
	}
	// A write that is not blocked finishes its chunk, so that the count is
	// final; one that is blocked wrote nothing of it.
	cw.stop.Store(true)
	select {
	case err := <-done:
		if err == nil && cw.written.Load() == int64(total) {
			return nil // the whole output got out just then
		}
	case <-time.After(100 * time.Millisecond):
	}
	return &writeError{cause: context.Cause(ctx), stopped: true, written: cw.written.Load(), total: total}
}

// chunkWriter writes to w in chunks of at most outputChunk bytes, counts
// what w took, and once stop is set fails the next chunk with errStopped.
// It is written by one goroutine and read by another.
type chunkWriter struct {
	w       io.Writer
	written atomic.Int64
	stop    atomic.Bool
}

func (c *chunkWriter) Write(b []byte) (int, error) {
	off := 0
	for off < len(b) {
		if c.stop.Load() {
			return off, errStopped
		}
		n, err := c.w.Write(b[off:min(off+outputChunk, len(b))])
		off += n
		c.written.Add(int64(n))
		if err != nil {
			return off, err
		}
	}
	return off, nil
}

// writeError is a run that did not write its whole output: a write failed
// (cause is its error), or a signal or --timeout stopped the run while it
// was writing (stopped; cause is a *SignalError or a *timeoutError). It
// says how much was written: the reader of a cut output must know.
type writeError struct {
	cause   error
	stopped bool
	written int64
	total   int
}

func (e *writeError) Error() string {
	what := "nothing written"
	if e.written > 0 {
		what = fmt.Sprintf("%d of %d bytes written, the output is cut short", e.written, e.total)
	}
	if !e.stopped {
		return fmt.Sprintf("writing output: %v; %s", e.cause, what)
	}
	var se *SignalError
	if errors.As(e.cause, &se) {
		return fmt.Sprintf("stopped by %s while writing the output: %s", se.Sig, what)
	}
	return fmt.Sprintf("%v while writing the output: %s", e.cause, what)
}

func (e *writeError) Unwrap() error { return e.cause }
