package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/pin"
)

func TestProgressShown(t *testing.T) {
	for _, tc := range []struct {
		mode     string
		terminal bool
		ci       string
		show     bool
		redraw   bool
	}{
		{mode: "auto", terminal: true, show: true, redraw: true},
		{mode: "auto", terminal: false},
		{mode: "auto", terminal: true, ci: "true"},
		{mode: "auto", terminal: true, ci: "1"},
		{mode: "always", terminal: true, ci: "true", show: true, redraw: true},
		{mode: "always", terminal: false, show: true},
		{mode: "never", terminal: true},
		{mode: "never", terminal: false},
	} {
		lookup := func(k string) (string, bool) {
			if k == "CI" && tc.ci != "" {
				return tc.ci, true
			}
			return "", false
		}
		show, redraw := progressShown(tc.mode, tc.terminal, lookup)
		if show != tc.show || redraw != tc.redraw {
			t.Errorf("progressShown(%q, terminal %t, CI=%q) = %t, %t, want %t, %t", tc.mode, tc.terminal, tc.ci, show, redraw, tc.show, tc.redraw)
		}
	}
}

// TestProgressNotOnPipe checks that auto shows nothing on a pipe, and
// that always prints lines there.
func TestProgressNotOnPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if p := newProgress(&Logger{}, "auto", w); p != nil {
		t.Errorf("newProgress(auto, pipe) = %+v, want nil", p)
	}
	if p := newProgress(&Logger{}, "always", w); p == nil || p.redraw {
		t.Errorf("newProgress(always, pipe) = %+v, want lines without redraw", p)
	}
}

// fakeClock drives a progressLine: begun at t0, ticking when told.
type fakeClock struct {
	t0   time.Time
	tick chan time.Time
}

func newFakeClock(p *progressLine) *fakeClock {
	c := &fakeClock{t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), tick: make(chan time.Time)}
	p.now = func() time.Time { return c.t0 }
	p.ticker = func(time.Duration) (<-chan time.Time, func()) { return c.tick, func() {} }
	return c
}

// at ticks at d after t0 and returns once the tick is handled: it then
// sends the zero time, which the loop skips, and takes only once done
// with the tick before.
func (c *fakeClock) at(d time.Duration) {
	c.tick <- c.t0.Add(d)
	c.tick <- time.Time{}
}

func TestProgressLine(t *testing.T) {
	const (
		draw1 = "\rdigestpin: resolving images: 0 of 2 done, 2 in flight\x1b[K"
		draw2 = "\rdigestpin: resolving images: 1 of 2 done, 1 in flight\x1b[K"
	)
	for _, tc := range []struct {
		name   string
		redraw bool
		run    func(p *progressLine, c *fakeClock, log *Logger)
		want   string
	}{{
		name:   "short run",
		redraw: true,
		run: func(p *progressLine, c *fakeClock, _ *Logger) {
			p.update(pin.Progress{Images: 1, InFlight: 1})
			c.at(900 * time.Millisecond)
			p.update(pin.Progress{Images: 1, Done: 1, Finished: true})
		},
	}, {
		name:   "terminal",
		redraw: true,
		run: func(p *progressLine, c *fakeClock, log *Logger) {
			p.update(pin.Progress{Images: 1, InFlight: 1})
			c.at(500 * time.Millisecond) // too soon
			p.update(pin.Progress{Images: 2, InFlight: 2})
			c.at(1000 * time.Millisecond)
			c.at(1100 * time.Millisecond) // unchanged: not redrawn
			log.Warnf("slow registry")    // erases the line first
			c.at(1200 * time.Millisecond) // drawn again
			p.update(pin.Progress{Images: 2, Done: 1, InFlight: 1})
			c.at(1300 * time.Millisecond)
			p.update(pin.Progress{Images: 2, Done: 2, Finished: true})
			log.Warnf("after")
		},
		want: draw1 + eraseLine + "digestpin: warning: slow registry\n" + draw1 + draw2 + eraseLine + "digestpin: warning: after\n",
	}, {
		name: "lines",
		run: func(p *progressLine, c *fakeClock, log *Logger) {
			p.update(pin.Progress{Images: 2, InFlight: 2})
			c.at(time.Second)
			c.at(2 * time.Second) // unchanged: not printed
			log.Warnf("slow registry")
			p.update(pin.Progress{Images: 2, Done: 1, InFlight: 1})
			c.at(3 * time.Second)
			p.update(pin.Progress{Images: 2, Done: 2, Finished: true})
		},
		want: "digestpin: resolving images: 0 of 2 done, 2 in flight\n" +
			"digestpin: warning: slow registry\n" +
			"digestpin: resolving images: 1 of 2 done, 1 in flight\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			log := &Logger{stderr: &stderr}
			p := newProgressLine(log, tc.redraw)
			tc.run(p, newFakeClock(p), log)
			p.end() // no-op after Finished
			if diff := cmp.Diff(tc.want, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProgressAgain checks that a second Pin shows its progress anew.
func TestProgressAgain(t *testing.T) {
	var stderr bytes.Buffer
	log := &Logger{stderr: &stderr}
	p := newProgressLine(log, true)
	c := newFakeClock(p)
	for range 2 {
		p.update(pin.Progress{Images: 1, InFlight: 1})
		c.at(time.Second)
		p.update(pin.Progress{Images: 1, Done: 1, Finished: true})
	}
	want := strings.Repeat("\rdigestpin: resolving images: 0 of 1 done, 1 in flight\x1b[K"+eraseLine, 2)
	if diff := cmp.Diff(want, stderr.String()); diff != "" {
		t.Errorf("stderr (-want +got):\n%s", diff)
	}
}
