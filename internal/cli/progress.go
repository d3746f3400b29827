package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/digestpin/digestpin/pin"
)

// progressValue binds --progress: when a run shows how far its
// resolutions have come (progressShown).
type progressValue struct{ mode *string }

func newProgressValue(mode *string) progressValue {
	*mode = "auto"
	return progressValue{mode}
}

func (v progressValue) String() string { return *v.mode }
func (progressValue) Type() string     { return "string" }

func (v progressValue) Set(s string) error {
	switch s {
	case "auto", "always", "never":
		*v.mode = s
		return nil
	}
	return errors.New("want auto, always or never")
}

// progressShown decides --progress: whether a run shows its progress,
// and whether it redraws one line (on a terminal) or prints a line at
// a time. auto shows it only where a person is watching: stderr is a
// terminal, and not one of a CI job (the variable CI set, as every
// common CI service sets it), whose log would keep every redraw.
func progressShown(mode string, terminal bool, lookup func(string) (string, bool)) (show, redraw bool) {
	switch mode {
	case "never":
		return false, false
	case "always":
		return true, terminal
	}
	ci, _ := lookup("CI")
	show = terminal && ci == ""
	return show, show
}

// Timing of the progress line.
const (
	// progressDelay is how long a run goes before it shows anything, so
	// that a short run prints nothing.
	progressDelay = time.Second
	// progressRedraw is how often the line on a terminal is redrawn,
	// progressPlain how often a line is printed elsewhere.
	progressRedraw = 100 * time.Millisecond
	progressPlain  = time.Second
)

// progressLine shows the progress of each Pin through a Logger (see
// pin.Options.Progress): from progressDelay after its first resolution
// until its last, redrawn on one line or printed a line at a time when
// it changed. It is safe for concurrent use.
type progressLine struct {
	log    *Logger
	redraw bool
	// now and ticker are the clock, replaced in tests: ticker returns a
	// channel of ticks every d and a function that stops them.
	now    func() time.Time
	ticker func(d time.Duration) (<-chan time.Time, func())

	mu   sync.Mutex
	n    pin.Progress
	stop chan struct{} // nil when no Pin is under way
	done chan struct{} // closed when the drawing goroutine ends
}

func newProgressLine(log *Logger, redraw bool) *progressLine {
	return &progressLine{log: log, redraw: redraw, now: time.Now, ticker: func(d time.Duration) (<-chan time.Time, func()) {
		t := time.NewTicker(d)
		return t.C, t.Stop
	}}
}

// update is pin.Options.Progress: the first call of a Pin starts the
// drawing, its Finished call ends it and erases the line.
func (p *progressLine) update(n pin.Progress) {
	p.mu.Lock()
	p.n = n
	if !n.Finished {
		if p.stop == nil {
			p.start()
		}
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.end()
}

// start starts the drawing goroutine. p.mu is held.
func (p *progressLine) start() {
	every := progressPlain
	if p.redraw {
		every = progressRedraw
	}
	tick, stopTicker := p.ticker(every)
	stop, done := make(chan struct{}), make(chan struct{})
	p.stop, p.done = stop, done
	begun := p.now()
	go func() {
		defer close(done)
		defer stopTicker()
		last := ""
		for {
			select {
			case <-stop:
				p.log.clearProgress()
				return
			case t := <-tick:
				if t.Sub(begun) < progressDelay {
					continue
				}
				p.mu.Lock()
				text := progressText(p.n)
				p.mu.Unlock()
				switch {
				case p.redraw:
					p.log.drawProgress(text)
				case text != last:
					p.log.Printf("", "%s", text)
				}
				last = text
			}
		}
	}()
}

// end stops the drawing, if any, and waits until the line is erased.
func (p *progressLine) end() {
	p.mu.Lock()
	stop, done := p.stop, p.done
	p.stop, p.done = nil, nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// progressText is the progress line, without the "digestpin: " prefix.
func progressText(n pin.Progress) string {
	return fmt.Sprintf("resolving images: %d of %d done, %d in flight", n.Done, n.Images, n.InFlight)
}

// newProgress returns the progress line that --progress asks for on
// stderr, nil for none.
func newProgress(log *Logger, mode string, stderr io.Writer) *progressLine {
	f, ok := stderr.(*os.File)
	show, redraw := progressShown(mode, ok && isTerminal(f), os.LookupEnv)
	if !show {
		return nil
	}
	return newProgressLine(log, redraw)
}
