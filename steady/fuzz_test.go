package steady

import (
	"bytes"
	"path/filepath"
	"testing"
)

// FuzzDiffKeep: on any two streams, Diff and Keep return or fail without
// panicking; a stream has nothing volatile with itself; Keep never mixes
// the two outputs (a kept output from Helm 4's post-renderer, which Keep
// writes anew, means the previous one field for field); a stream that
// parses is kept against itself. Run it
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
	f.Add([]byte("# Source: c/a.yaml\nkind: Secret\nmetadata: {name: s}\ndata: {k: a}\n---\n# Source: c/a.yaml\nkind: ConfigMap\nmetadata: {name: m}\n"),
		[]byte("kind: ConfigMap\nmetadata:\n  name: m\n  annotations: {"+FileAnnotation+": c/a.yaml}\n---\nkind: Secret\nmetadata:\n  name: s\n  annotations: {"+FileAnnotation+": c/a.yaml}\ndata: {k: b}\n"))
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
		if d.Kept {
			if !bytes.Equal(d.Output, a) {
				if again, err := Keep(a, d.Output, nil, Options{}); err != nil || !again.Kept {
					t.Errorf("Keep() kept, but its output is not the previous one, field for field")
				}
			}
		} else if !bytes.Equal(d.Output, b) {
			t.Errorf("Keep() did not keep, but its output is not the new one")
		}
		if len(a) > 0 {
			if d, err := Keep(a, a, nil, Options{}); err == nil && !d.Kept {
				t.Errorf("Keep(a, a) = not kept (%s)", d.Reason)
			}
		}
	})
}
