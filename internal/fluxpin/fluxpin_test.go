package fluxpin

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// images are the images every case's render runs, written → digest.
var images = map[string]string{
	"nginx:1.27":         "sha256:" + strings.Repeat("a", 64),
	"ghcr.io/acme/api:2": "sha256:" + strings.Repeat("b", 64),
	"redis":              "sha256:" + strings.Repeat("c", 64),
	"quay.io/x/y@sha256:" + strings.Repeat("d", 64): "sha256:" + strings.Repeat("d", 64),
}

func TestPin(t *testing.T) {
	t.Parallel()
	want, err := Entries(images)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file string
		kept []string
	}{
		{file: "hr-new.yaml"},
		{file: "hr-patches.yaml"},
		{file: "hr-owned.yaml", kept: []string{"busybox:1.36@sha256:" + strings.Repeat("1", 64)}},
		{file: "ks-new.yaml"},
		{file: "ks-hand.yaml", kept: []string{"busybox:1.36"}},
		{file: "ks-empty.yaml"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			in := read(t, tc.file)
			res := pin(t, tc.file, in, want)
			if !res.Changed {
				t.Errorf("unchanged")
			}
			var kept []string
			for _, k := range res.Kept {
				kept = append(kept, k.String())
			}
			if strings.Join(kept, " ") != strings.Join(tc.kept, " ") {
				t.Errorf("kept %q, want %q", kept, tc.kept)
			}
			golden := filepath.Join("testdata", strings.TrimSuffix(tc.file, ".yaml")+".golden")
			if *update {
				if err := os.WriteFile(golden, res.Out, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			g, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Out) != string(g) {
				t.Errorf("output differs from %s:\n%s", golden, res.Out)
			}
			// Every line not digestpin's stays, in order.
			outside(t, in, res.Out)
			// Idempotent: its own output changes nothing.
			again := pin(t, tc.file, res.Out, want)
			if again.Changed || string(again.Out) != string(res.Out) {
				t.Errorf("a second run changed the file:\n%s", again.Out)
			}
			// No image left: digestpin's entries go, nothing else.
			gone := pin(t, tc.file, res.Out, nil)
			outside(t, res.Out, gone.Out)
			if strings.Contains(string(gone.Out), Mark) {
				t.Errorf("with no image, an entry of digestpin's stays:\n%s", gone.Out)
			}
		})
	}
}

func TestPinRefuses(t *testing.T) {
	t.Parallel()
	want, err := Entries(images)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, err string }{
		{"bad-hand-same.yaml", `bad-hand-same.yaml:8: the images entry for nginx is written by hand (no "# digestpin" on its name): digestpin never overwrites it; remove it, or mark its name "# digestpin" to hand it over`},
		{"bad-two.yaml", "bad-two.yaml: 2 objects to pin, HelmRelease web (line 1), HelmRelease api (line 7): digestpin flux pin takes one HelmRelease or Kustomization per file; put each in a file of its own"},
		{"bad-flow.yaml", "bad-flow.yaml:7: spec.images is a flow list ([...]): write it as a block list (- name: ...) for digestpin to add to it"},
		{"bad-none.yaml", "bad-none.yaml: no HelmRelease (helm.toolkit.fluxcd.io) or Kustomization (kustomize.toolkit.fluxcd.io) in it"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			f, err := Parse(tc.file, read(t, tc.file))
			if err == nil {
				if err = f.SetTarget(); err == nil {
					_, err = f.Pin(want)
				}
			}
			if err == nil || err.Error() != tc.err {
				t.Errorf("error %v\nwant   %s", err, tc.err)
			}
		})
	}
}

func TestEntries(t *testing.T) {
	t.Parallel()
	_, err := Entries(map[string]string{"nginx:1.27": "sha256:a", "nginx:1.26": "sha256:b"})
	want := "nginx:1.26 and nginx:1.27: two tags of one repository, which one kustomize images entry (matched by name) cannot pin both; pin one in the chart's values or give each its own repository"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	for _, tc := range []struct{ in, name, tag string }{
		{"nginx", "nginx", ""},
		{"nginx:1.27", "nginx", "1.27"},
		{"reg:5000/a/b", "reg:5000/a/b", ""},
		{"reg:5000/a/b:v1@sha256:x", "reg:5000/a/b", "v1"},
	} {
		if n, tag := Split(tc.in); n != tc.name || tag != tc.tag {
			t.Errorf("Split(%q) = %q, %q, want %q, %q", tc.in, n, tag, tc.name, tc.tag)
		}
	}
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pin(t *testing.T, name string, in []byte, want []Image) *Result {
	t.Helper()
	f, err := Parse(name, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetTarget(); err != nil {
		t.Fatal(err)
	}
	res, err := f.Pin(want)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// outside checks that the lines of in that are not digestpin's entries
// are lines of out, in the same order.
func outside(t *testing.T, in, out []byte) {
	t.Helper()
	ol := strings.SplitAfter(string(out), "\n")
	j := 0
	owned := false
	for _, l := range strings.SplitAfter(string(in), "\n") {
		trim := strings.TrimSpace(l)
		switch {
		case strings.HasSuffix(trim, Mark):
			owned = true
			continue
		case trim == "images:" || trim == "images: []":
			continue // the key of the list digestpin writes
		case owned && (strings.HasPrefix(trim, "newTag:") || strings.HasPrefix(trim, "digest:")):
			continue
		}
		owned = false
		for j < len(ol) && ol[j] != l {
			j++
		}
		if j == len(ol) {
			t.Errorf("line %q of the input is not in the output (in order):\n%s", l, out)
			return
		}
		j++
	}
}

// TestPinNothing: a HelmRelease with no post-renderer and no image to
// pin (every one pinned in the chart already) stays as it is.
func TestPinNothing(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"hr-new.yaml", "ks-new.yaml"} {
		in := read(t, file)
		if res := pin(t, file, in, nil); res.Changed || string(res.Out) != string(in) || len(res.Owned) != 0 {
			t.Errorf("%s: changed:\n%s", file, res.Out)
		}
	}
}

// TestPinLineEnds: a file in CRLF gets its entries in CRLF, and a file
// without a last line break gets one before them; both stay idempotent.
func TestPinLineEnds(t *testing.T) {
	t.Parallel()
	want, err := Entries(map[string]string{"nginx:1.27": "sha256:" + strings.Repeat("a", 64)})
	if err != nil {
		t.Fatal(err)
	}
	ks := string(read(t, "ks-new.yaml"))
	for _, tc := range []struct{ name, in, out string }{
		{"crlf", strings.ReplaceAll(ks, "\n", "\r\n"), strings.ReplaceAll(ks+"  images:\n    - name: nginx # digestpin\n      newTag: \"1.27\"\n      digest: sha256:"+strings.Repeat("a", 64)+"\n", "\n", "\r\n")},
		{"no last line break", strings.TrimSuffix(ks, "\n"), ks + "  images:\n    - name: nginx # digestpin\n      newTag: \"1.27\"\n      digest: sha256:" + strings.Repeat("a", 64) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := pin(t, tc.name, []byte(tc.in), want)
			if string(res.Out) != tc.out {
				t.Errorf("got\n%q\nwant\n%q", res.Out, tc.out)
			}
			if again := pin(t, tc.name, res.Out, want); again.Changed {
				t.Errorf("a second run changed it:\n%q", again.Out)
			}
		})
	}
}
