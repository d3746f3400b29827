package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTTY records what fail writes to the terminal.
type fakeTTY struct{ bytes.Buffer }

func (*fakeTTY) Close() error { return nil }

func TestReporterFailTTY(t *testing.T) {
	t.Parallel()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	regular, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()

	const want = "digestpin: error: resolving 127.0.0.1:5000/missing:1.0: not found\n"
	for _, tc := range []struct {
		desc      string
		ttyErrors bool
		stderr    io.Writer
		noTTY     bool // the process has no controlling terminal
		wantTTY   string
	}{
		{desc: "off", stderr: &bytes.Buffer{}},
		{desc: "pipe-like stderr", ttyErrors: true, stderr: &bytes.Buffer{}, wantTTY: strings.ReplaceAll(want, "\n", "\r\n")},
		{desc: "file stderr", ttyErrors: true, stderr: regular, wantTTY: strings.ReplaceAll(want, "\n", "\r\n")},
		{desc: "stderr is a character device", ttyErrors: true, stderr: devNull},
		{desc: "no controlling terminal", ttyErrors: true, stderr: &bytes.Buffer{}, noTTY: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "log")
			r := newLogger(tc.stderr, &Options{ttyErrors: tc.ttyErrors, logFile: logFile})
			tty := &fakeTTY{}
			if r.tty != nil {
				r.tty = func() (io.WriteCloser, error) {
					if tc.noTTY {
						return nil, errors.New("no such device or address")
					}
					return tty, nil
				}
			}
			r.Fail(errors.New("resolving 127.0.0.1:5000/missing:1.0: not found"))
			r.Close()

			if got := tty.String(); got != tc.wantTTY {
				t.Errorf("terminal got %q, want %q", got, tc.wantTTY)
			}
			if b, ok := tc.stderr.(*bytes.Buffer); ok && b.String() != want {
				t.Errorf("stderr got %q, want %q", b.String(), want)
			}
			if got, err := os.ReadFile(logFile); err != nil || string(got) != want {
				t.Errorf("log file got %q (%v), want %q", got, err, want)
			}
		})
	}
}

func TestReporterWarnNeverOnTTY(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	r := newLogger(&stderr, &Options{ttyErrors: true})
	tty := &fakeTTY{}
	r.tty = func() (io.WriteCloser, error) { return tty, nil }
	r.Warnf("keeping %s unpinned", "app:1.0")
	if got, want := stderr.String(), "digestpin: warning: keeping app:1.0 unpinned\n"; got != want {
		t.Errorf("stderr got %q, want %q", got, want)
	}
	if tty.Len() != 0 {
		t.Errorf("a warning reached the terminal: %q", tty.String())
	}
}
