package stream

import (
	"bufio"
	"io"
)

// WriteBuffer is the size of the buffer through which WriteTo gathers
// the small pieces of an output: 16k documents make some 50k pieces, and
// one write each would be a system call each.
const WriteBuffer = 64 << 10

var _ io.WriterTo = Output{}

// Output is a stream put together from pieces (Piece) of the stream it
// was read from, in order, without a copy of it: spans of the input left
// as they were, and the text of the edits between them. The input must
// stay as it is while the Output is in use. The zero Output is empty. An
// Output is safe for concurrent use by readers.
type Output struct {
	in     []byte
	pieces []Piece // nil when same
	size   int
	// same says that the output is in itself: each piece is the next
	// bytes of in, unedited (digestpin's own output rendered again, or
	// manifests without images).
	same bool
}

// NewOutput returns the output made of pieces, cut from in.
func NewOutput(in []byte, pieces []Piece) Output {
	o := Output{in: in, pieces: pieces}
	at := 0
	for _, p := range pieces {
		o.size += p.size()
		if at >= 0 && len(p.edits) == 0 && len(p.b) <= len(in)-at && len(p.b) > 0 && &p.b[0] == &in[at] {
			at += len(p.b)
		} else if len(p.b) > 0 || len(p.edits) > 0 {
			at = -1
		}
	}
	if at == len(in) {
		// The pieces say nothing that in does not.
		o.pieces, o.same, o.size = nil, true, len(in)
	}
	return o
}

// Len returns the length of the output in bytes.
func (o Output) Len() int { return o.size }

// Bytes returns the output as one slice. When the pieces are the input
// as it was, it is the input slice itself (its capacity cut to its
// length), without a copy; otherwise each call puts a new slice of the
// output's exact size together. It is nil for the zero Output.
func (o Output) Bytes() []byte {
	switch {
	case o.same:
		return o.in[:len(o.in):len(o.in)]
	case o.pieces == nil:
		return nil // the zero Output
	}
	b := make([]byte, 0, o.size)
	for _, p := range o.pieces {
		b = p.appendTo(b)
	}
	return b
}

// WriteTo writes the output to w, implementing io.WriterTo, and returns
// the number of bytes w took. The small pieces go through a buffer of
// WriteBuffer bytes; a span of the input longer than what the buffer has room for is
// written straight from the input once the buffer is flushed, and an
// unchanged stream is one write of the input. WriteTo stops at the first
// error: w then holds the first n bytes of the output. A w that takes less
// than it is given without an error fails with io.ErrShortWrite.
func (o Output) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	if o.same {
		_, err := cw.Write(o.in)
		return cw.n, err
	}
	bw := bufio.NewWriterSize(cw, WriteBuffer)
	// span gathers adjacent spans of the same bytes (the unchanged
	// documents in a row, the input between two edits), to be written
	// as one.
	var span []byte
	flush := func() error {
		_, err := bw.Write(span)
		span = nil
		return err
	}
	put := func(b []byte) error {
		switch {
		case len(b) == 0:
			return nil
		case adjoins(span, b):
			span = span[:len(span)+len(b)]
			return nil
		}
		err := flush()
		span = b
		return err
	}
	text := func(s string) error {
		if err := flush(); err != nil {
			return err
		}
		_, err := bw.WriteString(s)
		return err
	}
	for _, p := range o.pieces {
		if err := p.each(put, text); err != nil {
			return cw.n, err
		}
	}
	if err := flush(); err != nil {
		return cw.n, err
	}
	err := bw.Flush()
	return cw.n, err
}

// adjoins reports whether b is the bytes that follow span in memory, so
// that span[:len(span)+len(b)] is the two in a row.
func adjoins(span, b []byte) bool {
	return len(span) > 0 && len(b) > 0 && cap(span)-len(span) >= len(b) && &span[:len(span)+1][len(span)] == &b[0]
}

// countingWriter counts what w takes, and fails a short write that w
// does not fail.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return n, err
}
