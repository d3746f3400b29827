package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Logger sends messages to stderr and, when --log-file is set, to that
// file as well. With --tty-errors the reason of a failure also goes to the
// controlling terminal, for callers that swallow stderr (Helm 4 discards a
// post-renderer plugin's stderr even when it fails). It is safe for
// concurrent use.
type Logger struct {
	mu      sync.Mutex
	stderr  io.Writer
	file    *os.File
	verbose bool
	// tty opens the terminal that fail writes to; nil means fail writes
	// to stderr and the log file only.
	tty func() (io.WriteCloser, error)
	// stop ends the run (see bound); nil: writes are never given up.
	stop <-chan struct{}
	// stuck says that a write did not return although the run was
	// stopped: the stream is blocked, and nothing more is written.
	stuck bool
	// progress is the progress line of --progress; nil for none.
	progress *progressLine
	// shown is the progress line on stderr, without its end of line;
	// "" for none. Every other message erases it first.
	shown string
}

// eraseLine returns the cursor to the start of the line and erases the
// line from there.
const eraseLine = "\r\x1b[K"

// logGrace is how long a message may take once the run is stopped: plenty
// for a stream that is read, and the run ends soon after it all the same.
const logGrace = 200 * time.Millisecond

// bound makes every write honour ctx: a stderr, log file or terminal that
// nobody reads (a pipe or FIFO whose reader is stuck) blocks a write in
// the kernel, where no context reaches it, and would keep the run from
// ending at --timeout or at a signal. Once ctx ends, a write that does not
// return within logGrace is left behind on its goroutine, and the logger
// writes nothing more.
func (r *Logger) bound(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stop = ctx.Done()
}

// bounded runs f, a write, under the rule of bound. r.mu is held.
func (r *Logger) bounded(f func()) {
	if r.stuck {
		return
	}
	if r.stop == nil {
		f()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return
	case <-r.stop:
	}
	t := time.NewTimer(logGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		r.stuck = true
	}
}

func newLogger(stderr io.Writer, o *Options) *Logger {
	r := &Logger{stderr: stderr, verbose: o.verbose}
	r.progress = newProgress(r, o.progress, stderr)
	if o.logFile != "" {
		// O_NONBLOCK: a FIFO with no reader fails the open instead of
		// blocking the run before it starts.
		f, err := os.OpenFile(o.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY|syscall.O_NONBLOCK, 0o600)
		if err != nil {
			fmt.Fprintf(stderr, "digestpin: warning: opening log file: %v\n", err)
		} else {
			r.file = f
		}
	}
	// A stderr that is a terminal (or /dev/null, which someone chose) is
	// seen or dismissed already: writing to the terminal as well would show
	// the message twice. Helm 3 prints a post-renderer's stderr in its own
	// error, which is why only the Helm 4 plugin asks for --tty-errors.
	if o.ttyErrors && !isCharDevice(stderr) {
		r.tty = openTTY
	}
	return r
}

// openTTY opens the controlling terminal. It fails when the process has
// none (CI, Argo CD, a detached session) or on systems without /dev/tty.
func openTTY() (io.WriteCloser, error) {
	return os.OpenFile("/dev/tty", os.O_WRONLY, 0)
}

// isTerminal reports whether r is a character device other than
// /dev/null: in practice, a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok || !isCharDevice(f) {
		return false
	}
	fi, err := f.Stat()
	null, nerr := os.Stat(os.DevNull)
	return err == nil && (nerr != nil || !os.SameFile(fi, null))
}

// isCharDevice reports whether w is a terminal or another character device
// such as /dev/null.
func isCharDevice(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// line formats one message: "digestpin: <prefix><message>\n". A message
// of several lines (every image that failed, say) gets the prefix on each,
// so that each line stands alone in a log.
func line(prefix, format string, args ...any) string {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	var b strings.Builder
	for l := range strings.SplitSeq(msg, "\n") {
		b.WriteString("digestpin: " + prefix + l + "\n")
	}
	return b.String()
}

// Printf logs a line, prefix and message, to stderr and the log file.
func (r *Logger) Printf(prefix, format string, args ...any) {
	r.write(line(prefix, format, args...))
}

// write sends msg to stderr and the log file.
func (r *Logger) write(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	stderr, file := r.stderr, r.file
	out := msg
	if r.shown != "" {
		out, r.shown = eraseLine+msg, ""
	}
	r.bounded(func() {
		// A message that cannot be written has nowhere else to go.
		_, _ = io.WriteString(stderr, out)
		if file != nil {
			_, _ = io.WriteString(file, msg)
		}
	})
}

// drawProgress shows text, the progress line, on stderr alone, in place
// of the one there: redrawn on a terminal, without an end of line.
func (r *Logger) drawProgress(text string) {
	text = "digestpin: " + text
	r.mu.Lock()
	defer r.mu.Unlock()
	if text == r.shown {
		return
	}
	r.shown = text
	stderr := r.stderr
	r.bounded(func() { _, _ = io.WriteString(stderr, "\r"+text+"\x1b[K") })
}

// clearProgress erases the progress line, if one is shown.
func (r *Logger) clearProgress() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shown == "" {
		return
	}
	r.shown = ""
	stderr := r.stderr
	r.bounded(func() { _, _ = io.WriteString(stderr, eraseLine) })
}

// Debugf logs only with -v.
func (r *Logger) Debugf(format string, args ...any) {
	if r.verbose {
		r.Printf("", format, args...)
	}
}

// Warnf logs a warning.
func (r *Logger) Warnf(format string, args ...any) { r.Printf("warning: ", format, args...) }

// Fail reports the error that ends the run: to stderr, the log file and,
// with --tty-errors, the controlling terminal when there is one.
func (r *Logger) Fail(err error) {
	msg := line("error: ", "%v", err)
	r.write(msg)
	if r.tty == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	tty := r.tty
	r.bounded(func() {
		// No terminal is not an error: the message is on stderr and in
		// the log file already, which is all there is to do.
		t, terr := tty()
		if terr != nil {
			return
		}
		defer t.Close()
		// A terminal in raw mode does not turn \n into \r\n.
		_, _ = io.WriteString(t, strings.ReplaceAll(msg, "\n", "\r\n"))
	})
}

// Close closes the log file, if there is one.
func (r *Logger) Close() {
	if r.progress != nil {
		r.progress.end() // a Pin that never finished
	}
	if r.file != nil {
		_ = r.file.Close() // appends only; nothing to lose on close
	}
}
