package steady

import (
	"bytes"
	"path/filepath"
	"testing"
)

// FuzzDiffKeep: on any two streams, Diff and Keep return or fail without
// panicking; a stream has nothing volatile with itself; Keep never mixes
// the two outputs; a stream that parses is kept against itself. Run it
// with -fuzzminimizetime 50x: minimizing a stream of this size takes the
// default minute for every new input.
func FuzzDiffKeep(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i+1 < len(files); i += 2 {
		a, b := read(f, filepath.Base(files[i])), read(f, filepath.Base(files[i+1]))
		f.Add(a, b)
	}
	f.Add([]byte("a: &x {b: 1}\nc: *x\n"), []byte("- [x, {name: a}, {name: a}]\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if v, err := Diff(a, a, Options{}); err == nil && len(v.Volatile) != 0 {
			t.Errorf("Diff(a, a) = %v, want nothing volatile", v.Warnings())
		}
		v, err := Diff(a, b, Options{})
		if err != nil {
			v = nil
		}
		_ = v.Warnings()
		d, err := Keep(a, b, v, Options{})
		if err != nil {
			return
		}
		if want := b; d.Kept {
			want = a
			if !bytes.Equal(d.Output, want) {
				t.Errorf("Keep() kept, but its output is not the previous one")
			}
		} else if !bytes.Equal(d.Output, want) {
			t.Errorf("Keep() did not keep, but its output is not the new one")
		}
		if len(a) > 0 {
			if d, err := Keep(a, a, nil, Options{}); err == nil && !d.Kept {
				t.Errorf("Keep(a, a) = not kept (%s)", d.Reason)
			}
		}
	})
}
