package pin

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/digestpin/digestpin/internal/gen"
)

// BenchmarkPin measures a whole Pin against a fakeRegistry (no network)
// on a stream of 5000 Deployments with 40 distinct images: without any
// file, and with a lock file to write (prepared and discarded each time),
// the default costs that anything a Pin adds must leave as they are; and
// against an earlier output (the same stream pinned), which renders that
// output and compares the pod templates and Secrets of both.
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
		{name: "diff-against/5k", opts: func(dir string) Options {
			return Options{DiffAgainst: filepath.Join(dir, "earlier.yaml"), Changes: true}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			o := tc.opts(b.TempDir())
			o.Registry = newFake(images...)
			if o.DiffAgainst != "" {
				earlier := o
				earlier.DiffAgainst, earlier.Changes = "", false
				p, err := New(earlier)
				if err != nil {
					b.Fatal(err)
				}
				res, err := p.Pin(context.Background(), in)
				if err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(o.DiffAgainst, res.Bytes(), 0o644); err != nil {
					b.Fatal(err)
				}
				res.Discard()
			}
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
