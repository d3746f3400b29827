package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
)

// logger sends messages to stderr and, when --log-file is set, to that
// file as well. With --tty-errors the reason of a failure also goes to the
// controlling terminal, for callers that swallow stderr (Helm 4 discards a
// post-renderer plugin's stderr even when it fails). It is safe for
// concurrent use.
type logger struct {
	mu      sync.Mutex
	stderr  io.Writer
	file    *os.File
	verbose bool
	// tty opens the terminal that fail writes to; nil means fail writes
	// to stderr and the log file only.
	tty func() (io.WriteCloser, error)
}

func newLogger(stderr io.Writer, o *options) *logger {
	r := &logger{stderr: stderr, verbose: o.verbose}
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

func (r *logger) printf(prefix, format string, args ...any) {
	r.write(line(prefix, format, args...))
}

// write sends msg to stderr and the log file.
func (r *logger) write(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A message that cannot be written has nowhere else to go.
	_, _ = io.WriteString(r.stderr, msg)
	if r.file != nil {
		_, _ = io.WriteString(r.file, msg)
	}
}

// debugf logs only with -v.
func (r *logger) debugf(format string, args ...any) {
	if r.verbose {
		r.printf("", format, args...)
	}
}

// warnf logs a warning.
func (r *logger) warnf(format string, args ...any) { r.printf("warning: ", format, args...) }

// fail reports the error that ends the run: to stderr, the log file and,
// with --tty-errors, the controlling terminal when there is one.
func (r *logger) fail(err error) {
	msg := line("error: ", "%v", err)
	r.write(msg)
	if r.tty == nil {
		return
	}
	// No terminal is not an error: the message is on stderr and in the log
	// file already, which is all there is to do.
	t, terr := r.tty()
	if terr != nil {
		return
	}
	defer t.Close()
	// A terminal in raw mode does not turn \n into \r\n.
	_, _ = io.WriteString(t, strings.ReplaceAll(msg, "\n", "\r\n"))
}

func (r *logger) close() {
	if r.file != nil {
		_ = r.file.Close() // appends only; nothing to lose on close
	}
}
