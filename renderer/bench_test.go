package renderer

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/digestpin/digestpin/internal/gen"
)

// genStream generates a benchmark stream once per configuration.
func genStream(b *testing.B, o gen.Options) []byte {
	b.Helper()
	var buf bytes.Buffer
	if err := gen.Stream(&buf, o); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkRender measures the YAML work alone (a map-backed resolver, no
// network) on streams of n Deployments plus n/3 Services and n/3
// ConfigMaps.
func BenchmarkRender(b *testing.B) {
	for _, tc := range []struct {
		name string
		o    gen.Options
		// fixedPoint renders digestpin's own output: nothing to change.
		fixedPoint bool
	}{
		{name: "pinned/1k", o: gen.Options{Deployments: 1000, Pinned: true}},
		{name: "pinned/5k", o: gen.Options{Deployments: 5000, Pinned: true}},
		{name: "pinned/10k", o: gen.Options{Deployments: 10000, Pinned: true}},
		{name: "pinned/20k", o: gen.Options{Deployments: 20000, Pinned: true}},
		{name: "tags/10k", o: gen.Options{Deployments: 10000}},
		{name: "fixed-point/10k", o: gen.Options{Deployments: 10000}, fixedPoint: true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			in := genStream(b, tc.o)
			r := &Renderer{Resolver: newFixed()}
			if tc.fixedPoint {
				res, err := r.Render(context.Background(), in)
				if err != nil {
					b.Fatal(err)
				}
				in = res.Bytes()
			}
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Render(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPassThrough compares documents without images with copying
// their bytes: the renderer should cost little more than the copy.
func BenchmarkPassThrough(b *testing.B) {
	full := genStream(b, gen.Options{Deployments: 30000})
	// Keep only the Services and ConfigMaps.
	var in bytes.Buffer
	for _, d := range mustSplit(b, full) {
		if !bytes.Contains(d.Raw, imageKey) {
			in.Write(d.Raw)
		}
	}
	b.Run("render", func(b *testing.B) {
		r := &Renderer{Resolver: newFixed()}
		b.SetBytes(int64(in.Len()))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Render(context.Background(), in.Bytes()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(in.Len()))
		b.ReportAllocs()
		for b.Loop() {
			var out bytes.Buffer
			out.Write(in.Bytes())
			if out.Len() != in.Len() {
				b.Fatal(fmt.Sprint(out.Len()))
			}
		}
	})
}

// BenchmarkSnapshot measures what --diff-against adds to a run: Snapshot
// of a stream of n Deployments (plus n/3 Services and n/3 ConfigMaps),
// pinned as digestpin writes them, and Compare with a Snapshot of the
// same stream. Its time and memory per Deployment stay the same as n
// grows.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{1000, 10000, 20000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			in := genStream(b, gen.Options{Deployments: n, Pinned: true})
			r := &Renderer{}
			before, err := r.Snapshot(in)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				now, err := r.Snapshot(in)
				if err != nil {
					b.Fatal(err)
				}
				if t, s := Compare(before, now); len(t)+len(s) != 0 {
					b.Fatalf("Compare() of a stream with itself = %v, %v", t, s)
				}
			}
		})
	}
}

// BenchmarkShapes measures the YAML work alone on 10,000 pinned
// Deployments (and their Services and ConfigMaps) in each shape that
// internal/gen writes, and on the charts' corpus repeated to as many:
// the speed of each shape of input is set by the reader that reads it.
func BenchmarkShapes(b *testing.B) {
	for _, sh := range gen.Shapes() {
		b.Run(string(sh), func(b *testing.B) {
			in := genStream(b, gen.Options{Deployments: 10000, Pinned: true, Shape: sh})
			r := &Renderer{Resolver: newFixed()}
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Render(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
