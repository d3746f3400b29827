package renderer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/gen"
	"github.com/digestpin/digestpin/renderer/stream"
)

// recordingWriter keeps every slice it is given, as given.
type recordingWriter struct{ writes [][]byte }

func (w *recordingWriter) Write(b []byte) (int, error) {
	w.writes = append(w.writes, b)
	return len(b), nil
}

// limitedWriter takes n bytes, then takes part of one write and fails it
// with err: a full disk, or a reader gone (EPIPE). With err nil it takes
// part of a write without saying so, as no io.Writer may.
type limitedWriter struct {
	n   int
	got []byte
	err error
}

func (w *limitedWriter) Write(b []byte) (int, error) {
	if len(b) <= w.n-len(w.got) {
		w.got = append(w.got, b...)
		return len(b), nil
	}
	k := w.n - len(w.got)
	w.got = append(w.got, b[:k]...)
	return k, w.err
}

// trickleWriter takes at most max bytes of each write, and fails the
// rest with io.ErrShortWrite, as a writer may that writes in pieces.
type trickleWriter struct {
	max int
	got []byte
}

func (w *trickleWriter) Write(b []byte) (int, error) {
	if len(b) > w.max {
		w.got = append(w.got, b[:w.max]...)
		return w.max, io.ErrShortWrite
	}
	w.got = append(w.got, b...)
	return len(b), nil
}

// checkWriteTo checks that res.WriteTo writes out, what res.Bytes()
// returned, and that Len says its length.
func checkWriteTo(t *testing.T, res Result, out []byte) {
	t.Helper()
	var buf bytes.Buffer
	n, err := res.WriteTo(&buf)
	if err != nil || n != int64(len(out)) || res.Len() != len(out) {
		t.Fatalf("WriteTo() = %d, %v; Len() = %d; want %d, nil", n, err, res.Len(), len(out))
	}
	if !bytes.Equal(buf.Bytes(), out) {
		t.Fatalf("WriteTo() wrote:\n%q\nBytes() returned:\n%q", buf.Bytes(), out)
	}
}

// renderGen renders a generated stream of n Deployments (and n/3
// Services and ConfigMaps), with tags when tags, else pinned already.
func renderGen(t *testing.T, n int, tags bool) ([]byte, Result) {
	t.Helper()
	var in bytes.Buffer
	if err := gen.Stream(&in, gen.Options{Deployments: n, Pinned: !tags}); err != nil {
		t.Fatal(err)
	}
	res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), in.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return in.Bytes(), res
}

// TestWriteTo checks that WriteTo writes what Bytes returns, in writes
// of at least the buffer's size but for the last (not one a piece), and
// that unchanged documents in a row are written straight from the input.
func TestWriteTo(t *testing.T) {
	t.Parallel()
	in, res := renderGen(t, 600, false)
	out := res.Bytes()
	if bytes.Equal(in, out) {
		t.Fatal("Render() changed nothing")
	}
	checkWriteTo(t, res, out)
	w := &recordingWriter{}
	if _, err := res.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	if most := len(out)/stream.WriteBuffer + 1; len(w.writes) > most {
		t.Errorf("WriteTo() made %d writes of %d bytes, want at most %d", len(w.writes), len(out), most)
	}
	for i, b := range w.writes[:len(w.writes)-1] {
		if len(b) < stream.WriteBuffer {
			t.Errorf("write %d of %d carries %d bytes, want at least %d", i+1, len(w.writes), len(b), stream.WriteBuffer)
		}
	}

	// A long run of documents without images (Services and ConfigMaps)
	// between two that change goes out in one write of the input.
	var long strings.Builder
	for long.Len() < 4*stream.WriteBuffer {
		long.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n")
	}
	dep := strings.Replace(deployment, "IMAGE", "app:1", 1)
	longIn := []byte(dep + long.String() + "---\n" + dep)
	res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), longIn)
	if err != nil {
		t.Fatal(err)
	}
	w = &recordingWriter{}
	if _, err := res.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	direct := false
	for _, b := range w.writes {
		if len(b) >= long.Len()-stream.WriteBuffer && aliases(longIn, b) {
			direct = true
		}
	}
	if !direct {
		t.Errorf("WriteTo() copied the %d bytes without images into its buffer, want them written from the input", long.Len())
	}
	checkWriteTo(t, res, res.Bytes())
}

// aliases reports whether b is a part of s, not a copy.
func aliases(s, b []byte) bool {
	for i := range s {
		if &s[i] == &b[0] {
			return len(s)-i >= len(b)
		}
	}
	return false
}

// TestWriteToFails checks that WriteTo stops at a writer's error and
// returns it, with the count of what the writer took: a prefix of the
// output, whether the stream changed or not.
func TestWriteToFails(t *testing.T) {
	t.Parallel()
	_, changed := renderGen(t, 300, false)
	unchanged, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), changed.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc  string
		res   Result
		takes int
		err   error
		want  error
	}{
		{desc: "full disk at once", res: changed, takes: 0, err: syscall.ENOSPC, want: syscall.ENOSPC},
		{desc: "reader gone midway", res: changed, takes: 3*stream.WriteBuffer + 17, err: syscall.EPIPE, want: syscall.EPIPE},
		{desc: "short write without an error", res: changed, takes: stream.WriteBuffer + 1, want: io.ErrShortWrite},
		{desc: "unchanged, reader gone", res: unchanged, takes: 1000, err: syscall.EPIPE, want: syscall.EPIPE},
		{desc: "unchanged, short write", res: unchanged, takes: 1000, want: io.ErrShortWrite},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			out := tc.res.Bytes()
			w := &limitedWriter{n: tc.takes, err: tc.err}
			n, err := tc.res.WriteTo(w)
			if !errors.Is(err, tc.want) || n != int64(tc.takes) {
				t.Errorf("WriteTo() = %d, %v; want %d, %v", n, err, tc.takes, tc.want)
			}
			if !bytes.Equal(w.got, out[:tc.takes]) {
				t.Errorf("WriteTo() wrote %d bytes that are not the first of the output", len(w.got))
			}
		})
	}
}

// TestWriteToTrickle checks WriteTo against a writer that takes part of
// each write and says so: it stops there, with what it took counted.
func TestWriteToTrickle(t *testing.T) {
	t.Parallel()
	_, res := renderGen(t, 100, false)
	w := &trickleWriter{max: 1000}
	n, err := res.WriteTo(w)
	if !errors.Is(err, io.ErrShortWrite) || n != 1000 || string(w.got) != string(res.Bytes()[:1000]) {
		t.Errorf("WriteTo() = %d, %v; want 1000, %v", n, err, io.ErrShortWrite)
	}
}

// TestZeroResult: a failed Render's Result has no output at all.
func TestZeroResult(t *testing.T) {
	t.Parallel()
	res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte("a: 1\n--- x\n"))
	if err == nil {
		t.Fatal("Render() of malformed YAML succeeded")
	}
	w := &recordingWriter{}
	n, werr := res.WriteTo(w)
	if diff := cmp.Diff([]any{[]byte(nil), 0, int64(0), error(nil), 0}, []any{res.Bytes(), res.Len(), n, werr, len(w.writes)}); diff != "" {
		t.Errorf("failed Render(): Bytes, Len, WriteTo, writes (-want +got):\n%s", diff)
	}
}
