package readfile

import (
	"errors"
	"io"
	"os"
	"slices"
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
	if f, ok := r.(*os.File); ok {
		if size, ok := remaining(f); ok {
			return readSized(f, size, limit)
		}
	}
	return readChunks(r, limit)
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
func readSized(r io.Reader, size, limit int64) ([]byte, error) {
	if limit >= 0 && size > limit {
		return nil, ErrTooLarge
	}
	b := make([]byte, size)
	n, err := io.ReadFull(r, b)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return b[:n:n], nil // it shrank while read
	case err != nil:
		return nil, err
	}
	// It may have grown since: what comes after, in the usual case
	// nothing (one read that says EOF).
	if limit >= 0 {
		limit -= size
	}
	rest, err := readChunks(r, limit)
	if err != nil || len(rest) == 0 {
		return b, err
	}
	return slices.Concat(b, rest), nil
}

// readChunks reads r to its end in chunks of growing size, and copies
// them into one slice of their length.
func readChunks(r io.Reader, limit int64) ([]byte, error) {
	var chunks [][]byte
	total, size := int64(0), firstChunk
	for {
		n := int64(size)
		if limit >= 0 {
			n = min(n, limit-total+1) // one byte past the limit says it is over
		}
		c := make([]byte, n)
		got, err := io.ReadFull(r, c)
		total += int64(got)
		if got > 0 {
			chunks = append(chunks, c[:got])
		}
		if limit >= 0 && total > limit {
			return nil, ErrTooLarge
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		size = min(2*size, maxChunk)
	}
	switch len(chunks) {
	case 0:
		return []byte{}, nil
	case 1:
		return chunks[0], nil
	}
	b := make([]byte, 0, total)
	for _, c := range chunks {
		b = append(b, c...)
	}
	return b, nil
}
