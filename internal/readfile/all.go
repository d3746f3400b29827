package readfile

import (
	"errors"
	"io"
	"os"
)

// ErrTooLarge is All's error for a reader with more bytes than its limit.
var ErrTooLarge = errors.New("more bytes than the limit")

// Chunks of a read of unknown size start at firstChunk bytes and double up
// to maxChunk.
const (
	firstChunk = 64 << 10
	maxChunk   = 4 << 20
)

// All reads r to its end, as io.ReadAll does, into a slice of the exact
// length of what it read, allocated once: io.ReadAll grows one slice as
// it reads, and ends with up to a quarter of it unused and twice the input
// allocated on the way. A regular *os.File (stdin from "< file", -f FILE)
// is read into a slice of the size it has from its offset on, and then to
// its end, in case it grew meanwhile; one that shrinks is read to its new
// end. Anything else (a pipe) is read in chunks, copied into one slice at
// the end. With limit >= 0, a reader with more than limit bytes is
// ErrTooLarge, found without reading more than limit+1 bytes of it.
func All(r io.Reader, limit int64) ([]byte, error) {
	return AllIn(r, limit, Memory{})
}

// Memory makes the slice that AllIn returns. The zero Memory is the Go
// heap (make).
type Memory struct {
	// Make returns a slice of length n; nil means make.
	Make func(n int) []byte
	// Drop gives back a slice from Make that AllIn does not return; nil
	// leaves it to the garbage collector.
	Drop func(b []byte)
}

func (m Memory) make(n int64) []byte {
	if m.Make == nil {
		return make([]byte, n)
	}
	return m.Make(int(n))
}

func (m Memory) drop(b []byte) {
	if m.Drop != nil {
		m.Drop(b)
	}
}

// AllIn is All, with the slice it returns, and the chunks of a pipe that
// it copies into that slice at the end, made by m. What AllIn made and
// does not return is dropped, on error too.
func AllIn(r io.Reader, limit int64, m Memory) ([]byte, error) {
	if f, ok := r.(*os.File); ok {
		if size, ok := remaining(f); ok {
			return readSized(f, size, limit, m)
		}
	}
	return readChunks(r, limit, nil, m)
}

// remaining returns the bytes of f after its offset, when f is a regular
// file that can tell.
func remaining(f *os.File) (int64, bool) {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	at, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, false
	}
	return max(fi.Size()-at, 0), true
}

// readSized reads r, a file whose size says that it has size bytes, as
// All does.
func readSized(r io.Reader, size, limit int64, m Memory) ([]byte, error) {
	if limit >= 0 && size > limit {
		return nil, ErrTooLarge
	}
	b := m.make(size)
	n, err := io.ReadFull(r, b)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return b[:n:n], nil // it shrank while read
	case err != nil:
		m.drop(b)
		return nil, err
	}
	// It may have grown since: what comes after, in the usual case
	// nothing (one read that says EOF), goes after b.
	if limit >= 0 {
		limit -= size
	}
	return readChunks(r, limit, b, m)
}

// readChunks reads r to its end in chunks of growing size, and copies
// them, after first, into one slice of their length. first, when not
// empty, came from m, and so do the chunks, which are dropped once
// copied: m may give memory back to the system at once, where the heap's
// garbage would wait for the collector, and stay with the process.
func readChunks(r io.Reader, limit int64, first []byte, m Memory) ([]byte, error) {
	var chunks [][]byte
	drop := func() {
		for _, c := range chunks {
			m.drop(c)
		}
	}
	total, size := int64(0), firstChunk
	for {
		n := int64(size)
		if limit >= 0 {
			n = min(n, limit-total+1) // one byte past the limit says it is over
		}
		c := m.make(n)
		got, err := io.ReadFull(r, c)
		total += int64(got)
		chunks = append(chunks, c[:got])
		if limit >= 0 && total > limit {
			err = ErrTooLarge
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			drop()
			m.drop(first)
			return nil, err
		}
		size = min(2*size, maxChunk)
	}
	switch {
	case total == 0 && first != nil:
		drop()
		return first, nil
	case len(chunks) == 1 && first == nil:
		return chunks[0], nil
	}
	b := m.make(int64(len(first)) + total)[:0]
	b = append(b, first...)
	for _, c := range chunks {
		b = append(b, c...)
	}
	drop()
	m.drop(first)
	return b, nil
}
