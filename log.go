package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// reporter sends messages to stderr and, when --log-file is set, to that
// file as well. It is safe for concurrent use.
type reporter struct {
	mu      sync.Mutex
	stderr  io.Writer
	file    *os.File
	verbose bool
}

func newReporter(stderr io.Writer, o *options) *reporter {
	r := &reporter{stderr: stderr, verbose: o.verbose}
	if o.logFile != "" {
		f, err := os.OpenFile(o.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			fmt.Fprintf(stderr, "digestpin: warning: opening log file: %v\n", err)
		} else {
			r.file = f
		}
	}
	return r
}

func (r *reporter) printf(prefix, format string, args ...any) {
	msg := "digestpin: " + prefix + fmt.Sprintf(format, args...)
	msg = strings.TrimRight(msg, "\n") + "\n"
	r.mu.Lock()
	defer r.mu.Unlock()
	io.WriteString(r.stderr, msg)
	if r.file != nil {
		io.WriteString(r.file, msg)
	}
}

// debugf logs only with -v.
func (r *reporter) debugf(format string, args ...any) {
	if r.verbose {
		r.printf("", format, args...)
	}
}

// warnf logs a warning.
func (r *reporter) warnf(format string, args ...any) { r.printf("warning: ", format, args...) }

// fail reports the error that ends the run.
func (r *reporter) fail(err error) { r.printf("error: ", "%v", err) }

func (r *reporter) close() {
	if r.file != nil {
		r.file.Close()
	}
}
