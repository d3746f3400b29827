package pin

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/gen"
)

// TestProgress checks that Options.Progress sees consistent counts, one
// call at a time, ending with a Finished call whose Done is the number
// of distinct references the registry resolved, for a Pin that succeeds
// and for one that fails.
func TestProgress(t *testing.T) {
	images := gen.Images("registry.example", 30)
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 300, Images: images}); err != nil {
		t.Fatal(err)
	}
	in := buf.Bytes()
	for _, tc := range []struct {
		name    string
		pushed  int // how many of images the registry has
		wantErr bool
	}{
		{name: "all resolve", pushed: len(images)},
		{name: "some fail", pushed: len(images) - 3, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tags []string
			for _, im := range images[:tc.pushed] {
				tags = append(tags, im+":1.0")
			}
			f := newFake(tags...)
			var (
				calls  []Progress
				inside atomic.Int32
			)
			o := Options{Registry: f, Progress: func(p Progress) {
				if inside.Add(1) != 1 {
					t.Error("Progress called while another call runs")
				}
				calls = append(calls, p)
				inside.Add(-1)
			}}
			p, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Pin(context.Background(), in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Pin() = %v, want error %t", err, tc.wantErr)
			}
			asked, _ := f.counts()
			if len(calls) == 0 {
				t.Fatal("Progress never called")
			}
			// Each call moves one count by one, and the counts agree.
			var prev Progress
			for i, c := range calls {
				if c.InFlight != c.Images-c.Done || c.Done > c.Images || c.Images < prev.Images || c.Done < prev.Done {
					t.Fatalf("call %d: %+v after %+v: inconsistent", i, c, prev)
				}
				if c.Finished != (i == len(calls)-1) {
					t.Errorf("call %d of %d: Finished = %t", i, len(calls), c.Finished)
				}
				prev = c
			}
			want := Progress{Images: asked, Done: asked, Finished: true}
			if diff := cmp.Diff(want, calls[len(calls)-1]); diff != "" {
				t.Errorf("last Progress (-want +got):\n%s", diff)
			}
			if asked != len(images) {
				t.Errorf("registry asked %d times, want %d (each distinct reference once)", asked, len(images))
			}
		})
	}
}
