package readfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
)

// stream returns n bytes that say where they are.
func stream(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		b.WriteString(strings.Repeat(string(rune('a'+i%26)), 1+i%97))
		b.WriteByte('\n')
	}
	return b.Bytes()[:n]
}

// TestAllSizes reads streams of sizes around the chunk sizes, from a file,
// a pipe and a reader of one byte at a time, each without a limit, with
// the limit at the size (fits) and one under it (ErrTooLarge).
func TestAllSizes(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, firstChunk - 1, firstChunk, firstChunk + 1, 3*firstChunk + 5, maxChunk + 1, 3*maxChunk + 7} {
		want := stream(n)
		for _, src := range []struct {
			name string
			open func(t *testing.T) io.Reader
		}{
			{"file", func(t *testing.T) io.Reader { return openFile(t, want) }},
			{"pipe", func(t *testing.T) io.Reader { return openPipe(t, want) }},
			{"one byte a read", func(*testing.T) io.Reader { return iotest.OneByteReader(bytes.NewReader(want)) }},
		} {
			if src.name == "one byte a read" && n > firstChunk+1 {
				continue // slow, and nothing new
			}
			for _, limit := range []int64{-1, int64(n), int64(n) - 1} {
				got, err := All(src.open(t), limit)
				if limit >= 0 && int64(n) > limit {
					if !errors.Is(err, ErrTooLarge) || got != nil {
						t.Errorf("All(%s of %d bytes, limit %d) = %d bytes, %v; want %v", src.name, n, limit, len(got), err, ErrTooLarge)
					}
					continue
				}
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("All(%s of %d bytes, limit %d) = %d bytes, %v; want them all", src.name, n, limit, len(got), err)
				}
				if src.name != "one byte a read" && n > firstChunk && cap(got) != n {
					t.Errorf("All(%s of %d bytes) returned a slice of capacity %d, want its exact size", src.name, n, cap(got))
				}
			}
		}
	}
}

// openFile returns a file that holds b.
func openFile(t *testing.T, b []byte) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// openPipe returns the read end of a pipe that a goroutine writes b
// into, in writes of odd sizes.
func openPipe(t *testing.T, b []byte) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	go func() {
		defer w.Close()
		for len(b) > 0 {
			n := min(len(b), 1000+len(b)%7777)
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
		}
	}()
	return r
}

// TestAllFromOffset: stdin that is a file read partly already (`{ read
// line; digestpin; } < file`) is read from where it is.
func TestAllFromOffset(t *testing.T) {
	t.Parallel()
	want := stream(3 * firstChunk)
	f := openFile(t, want)
	if _, err := f.Seek(1000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	got, err := All(f, -1)
	if err != nil || !bytes.Equal(got, want[1000:]) {
		t.Errorf("All(file at 1000) = %d bytes, %v; want the %d after the offset", len(got), err, len(want)-1000)
	}
}

// growingFile is a regular file that something appends to or cuts while
// it is read: the first read it serves does it.
type growingFile struct {
	*os.File
	change func()
	done   bool
}

func (g *growingFile) Read(b []byte) (int, error) {
	if !g.done {
		g.done = true
		g.change()
	}
	return g.File.Read(b)
}

// TestAllFileChanges reads a file that grows or shrinks after its size
// was taken: what it holds at the end is read, no more, no less.
func TestAllFileChanges(t *testing.T) {
	t.Parallel()
	first, more := stream(2*firstChunk+3), []byte("---\nmore: true\n")
	for _, tc := range []struct {
		desc string
		grow bool
		want []byte
	}{
		{desc: "grows", grow: true, want: append(append([]byte{}, first...), more...)},
		{desc: "shrinks", want: first[:1000]},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			f := openFile(t, first)
			size, ok := remaining(f)
			if !ok || size != int64(len(first)) {
				t.Fatalf("remaining() = %d, %v", size, ok)
			}
			g := &growingFile{File: f, change: func() {
				w, err := os.OpenFile(f.Name(), os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				if tc.grow {
					_, err = w.WriteAt(more, int64(len(first)))
				} else {
					err = w.Truncate(1000)
				}
				if err != nil {
					t.Fatal(err)
				}
			}}
			// As All does for a file, its size taken before the change.
			got, err := readSized(g, size, -1, Memory{})
			if err != nil || !bytes.Equal(got, tc.want) {
				t.Errorf("All(file that %s) = %d bytes, %v; want %d", tc.desc, len(got), err, len(tc.want))
			}
		})
	}
	// A file that grows past the limit is over it.
	f := openFile(t, first)
	g := &growingFile{File: f, change: func() {
		if err := os.WriteFile(f.Name(), append(append([]byte{}, first...), more...), 0o600); err != nil {
			t.Fatal(err)
		}
	}}
	if got, err := readSized(g, int64(len(first)), int64(len(first)+1), Memory{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("All(file that grows past the limit) = %d bytes, %v; want %v", len(got), err, ErrTooLarge)
	}
}

// TestAllSignals reads a pipe that a writer fills slowly while signals
// keep arriving: interrupted reads (EINTR) go on.
func TestAllSignals(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	want := stream(200 << 10)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		defer w.Close()
		for b := want; len(b) > 0; {
			n := min(len(b), 10<<10)
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
			for range 3 {
				_ = syscall.Kill(os.Getpid(), syscall.SIGWINCH)
				time.Sleep(time.Millisecond)
			}
		}
	}()
	got, err := All(r, -1)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("All(pipe under signals) = %d bytes, %v; want %d", len(got), err, len(want))
	}
}

// errReader fails after its bytes, as a read of a broken pipe or device.
type errReader struct {
	b   []byte
	err error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, r.err
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// TestAllError: a read that fails is All's error, whatever came before.
func TestAllError(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 10, 3 * firstChunk} {
		got, err := All(&errReader{b: stream(n), err: syscall.EIO}, -1)
		if !errors.Is(err, syscall.EIO) || got != nil {
			t.Errorf("All(%d bytes, then EIO) = %d bytes, %v; want %v", n, len(got), err, syscall.EIO)
		}
	}
}

// TestRegularLimit: Regular's files are read up to their limit exactly,
// and one byte more is the error that names the file.
func TestRegularLimit(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	path := filepath.Join(t.TempDir(), "f")
	for _, n := range []int{limit - 1, limit, limit + 1} {
		want := stream(n)
		if err := os.WriteFile(path, want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := Regular(path, limit)
		if n > limit {
			if want := path + ": larger than 1 MiB"; err == nil || err.Error() != want {
				t.Errorf("Regular(%d bytes, limit %d) = %v, want %q", n, limit, err, want)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Regular(%d bytes, limit %d) = %d bytes, %v", n, limit, len(got), err)
		}
	}
}

// countingMemory is a Memory that keeps what it made and not dropped.
type countingMemory struct{ live map[*byte]int }

func (c *countingMemory) memory() Memory {
	c.live = map[*byte]int{}
	return Memory{
		Make: func(n int) []byte {
			b := make([]byte, n+1)[:n] // never empty, so that it has an address
			c.live[&b[:1][0]] = n
			return b
		},
		Drop: func(b []byte) {
			if cap(b) > 0 {
				delete(c.live, &b[:1][0])
			}
		},
	}
}

// TestAllIn checks that AllIn returns a slice its Memory made, from a
// file, a pipe and a file that grows, and that every other slice it made
// is dropped, on success and on error.
func TestAllIn(t *testing.T) {
	t.Parallel()
	want := stream(3*firstChunk + 11)
	for _, tc := range []struct {
		desc  string
		open  func(t *testing.T) io.Reader
		limit int64
		err   error
	}{
		{desc: "file", open: func(t *testing.T) io.Reader { return openFile(t, want) }, limit: -1},
		{desc: "pipe", open: func(t *testing.T) io.Reader { return openPipe(t, want) }, limit: -1},
		{desc: "file over the limit", open: func(t *testing.T) io.Reader { return openFile(t, want) }, limit: 10, err: ErrTooLarge},
		{desc: "pipe over the limit", open: func(t *testing.T) io.Reader { return openPipe(t, want) }, limit: firstChunk, err: ErrTooLarge},
		{desc: "read fails", open: func(*testing.T) io.Reader { return &errReader{b: want, err: syscall.EIO} }, limit: -1, err: syscall.EIO},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var c countingMemory
			got, err := AllIn(tc.open(t), tc.limit, c.memory())
			if tc.err != nil {
				if !errors.Is(err, tc.err) || len(c.live) != 0 {
					t.Errorf("AllIn() = %v with %d slices not dropped, want %v and none", err, len(c.live), tc.err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("AllIn() = %d bytes, %v", len(got), err)
			}
			if n, ok := c.live[&got[0]]; len(c.live) != 1 || !ok || n != len(want) {
				t.Errorf("AllIn() left %d slices not dropped (%v), want only the one it returned", len(c.live), c.live)
			}
		})
	}
	// A file that grows: the slice of its first size is dropped.
	var c countingMemory
	f := openFile(t, want[:1000])
	g := &growingFile{File: f, change: func() {
		if err := os.WriteFile(f.Name(), want, 0o600); err != nil {
			t.Fatal(err)
		}
	}}
	got, err := readSized(g, 1000, -1, c.memory())
	if err != nil || !bytes.Equal(got, want) || len(c.live) != 1 {
		t.Errorf("AllIn(file that grows) = %d bytes, %v, %d slices not dropped; want %d, 1", len(got), err, len(c.live), len(want))
	}
}
