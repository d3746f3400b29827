package pin

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/digestpin/digestpin/internal/gen"
)

// BenchmarkPin measures a whole Pin against a fakeRegistry (no network)
// on a stream of 5000 Deployments with 40 distinct images: without any
// file, and with a lock file to write (prepared and discarded each time),
// the default costs that anything a Pin adds must leave as they are.
func BenchmarkPin(b *testing.B) {
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 5000}); err != nil {
		b.Fatal(err)
	}
	in := buf.Bytes()
	images := gen.Images("registry.example", 40)
	for i := range images {
		images[i] += ":1.0"
	}
	for _, tc := range []struct {
		name string
		opts func(dir string) Options
	}{
		{name: "plain/5k", opts: func(string) Options { return Options{} }},
		{name: "write-lock/5k", opts: func(dir string) Options { return Options{WriteLock: filepath.Join(dir, "digests.lock")} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			o := tc.opts(b.TempDir())
			o.Registry = newFake(images...)
			p, err := New(o)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				res, err := p.Pin(context.Background(), in)
				if err != nil {
					b.Fatal(err)
				}
				res.Discard()
			}
		})
	}
}
