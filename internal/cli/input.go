package cli

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/digestpin/digestpin/internal/readfile"
	"github.com/digestpin/digestpin/pin"
)

// minMapped is the size from which the input is read into memory outside
// the Go heap (inputMemory). The garbage collector lets the heap grow to
// about twice what is live when it runs, and the input is live for the
// whole run: on the heap, 10 MB of manifests cost some 20 MB of peak
// memory, the largest part of what a run holds once its output is
// written from pieces. Outside the heap they cost their size. Below
// minMapped that is too little to matter.
const minMapped = 1 << 20

// mappedInput counts the bytes of input mapped now, for the tests.
var mappedInput atomic.Int64

// inputMemory is the memory one input is read into: anonymous mappings
// from mapAnon, where the system has them (Unix), else the heap. free
// unmaps them: only once nothing refers to the input any more, and no
// goroutine left behind by a signal or --timeout can read or write it,
// since memory unmapped under a goroutine faults. It is safe for
// concurrent use.
type inputMemory struct {
	mu     sync.Mutex
	mapped [][]byte // as mapped, whatever part of them is returned
}

// memory returns the readfile.Memory that reads into m.
func (m *inputMemory) memory() readfile.Memory {
	return readfile.Memory{Make: m.make, Drop: m.drop}
}

// make returns n bytes, mapped when n is at least minMapped and the
// system maps them, else from the heap.
func (m *inputMemory) make(n int) []byte {
	if n >= minMapped {
		if b, err := mapAnon(n); err == nil {
			m.mu.Lock()
			m.mapped = append(m.mapped, b)
			m.mu.Unlock()
			mappedInput.Add(int64(n))
			return b
		}
	}
	return make([]byte, n)
}

// drop unmaps b when it is (the start of) a mapping of m's.
func (m *inputMemory) drop(b []byte) {
	if cap(b) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, mb := range m.mapped {
		if &b[:1][0] == &mb[0] {
			m.unmapLocked(i)
			return
		}
	}
}

// free unmaps every mapping of m.
func (m *inputMemory) free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.mapped) > 0 {
		m.unmapLocked(len(m.mapped) - 1)
	}
}

// unmapLocked unmaps m.mapped[i] and removes it; m.mu is held.
func (m *inputMemory) unmapLocked(i int) {
	mb := m.mapped[i]
	unmap(mb)
	mappedInput.Add(-int64(len(mb)))
	m.mapped = append(m.mapped[:i], m.mapped[i+1:]...)
}

// pinInput reads the input (read), pins it and writes it (pinStream),
// and then frees the input's memory, unless a goroutine left behind may
// still read it: the write to a stdout that does not read, which a signal
// or --timeout stopped (its memory then goes with the process).
func (o *Options) pinInput(ctx context.Context, p *pin.Pinner, stdin io.Reader, stdout io.Writer, log *Logger) error {
	var free func()
	read := func(ctx context.Context) ([]byte, error) {
		in, f, err := o.Read(ctx, stdin, log)
		free = f
		return in, err
	}
	err := o.PinStream(ctx, p, read, stdout, log)
	var we *writeError
	if free != nil && (!errors.As(err, &we) || !we.stopped) {
		free()
	}
	return err
}
