package renderer

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOddInput renders streams that are odd but valid YAML, as Helm
// templates or hand-written manifests can produce them, each from
// testdata/oddinput/NAME.input.yaml, and compares the output with
// NAME.golden.yaml (go test -update rewrites it). The golden file must be
// a fixed point, and documents without an image must come out as they
// came in.
func TestOddInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// images are the references the output must pin, with the
		// number of workload containers that use each.
		images map[string]int
	}{
		{name: "crlf", images: map[string]int{"registry.example/app:1": 2}},
		{name: "bom", images: map[string]int{"registry.example/app:1": 1, "registry.example/app:2": 1}},
		{name: "tabs", images: map[string]int{"registry.example/app:1": 1}},
		{name: "separator-comments", images: map[string]int{"registry.example/app:1": 1, "registry.example/app:2": 1}},
		{name: "end-markers", images: map[string]int{"registry.example/app:1": 1, "registry.example/app:2": 1}},
		{name: "flow-containers", images: map[string]int{"registry.example/init:1": 1, "registry.example/app:1": 2, "registry.example/side:1": 1}},
		// An aliased container or image is pinned once, but every
		// workload that uses it counts: the pod template the List's two
		// Deployments share counts for both.
		{name: "anchors", images: map[string]int{"registry.example/app:1": 5, "registry.example/app:2": 2}},
		{name: "duplicate-source", images: map[string]int{"registry.example/app:1": 1, "registry.example/app:2": 1}},
		{name: "list-in-list", images: map[string]int{"registry.example/app:1": 1, "registry.example/app:2": 1}},
		{name: "empty-documents", images: map[string]int{"registry.example/app:1": 1}},
		{name: "comments-only", images: map[string]int{"registry.example/app:1": 1}},
		{name: "checked-documents", images: map[string]int{"registry.example/app:1": 1}},
		{name: "dash-separators", images: map[string]int{"registry.example/app:1": 1, "registry.example/app:2": 1}},
		{name: "list-aliases", images: map[string]int{"registry.example/app:1": 1}},
		{name: "quoted-image", images: map[string]int{
			"registry.example/app:1": 2, "registry.example/app:2": 2, "registry.example/app:3": 1,
			"registry.example/side:1": 1, "registry.example/init:1": 1,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := filepath.Join("testdata", "oddinput", tc.name+".input.yaml")
			golden := filepath.Join("testdata", "oddinput", tc.name+".golden.yaml")
			src, res := checkGolden(t, &Renderer{Resolver: newFixed()}, in, golden)
			got := map[string]int{}
			for _, img := range res.Images {
				got[img.Written] = len(img.Workloads)
				if pin := img.Written + "@" + dg(img.Reference); !bytes.Contains(res.Bytes(), []byte(pin)) {
					t.Errorf("output lacks %s", pin)
				}
			}
			if diff := cmp.Diff(tc.images, got); diff != "" {
				t.Errorf("Render(%s) images (-want +got):\n%s", in, diff)
			}
			checkUntouched(t, src, res.Bytes())
		})
	}
}

// checkUntouched checks that the documents of in without a pod spec image
// come out byte for byte in out.
func checkUntouched(t *testing.T, in, out []byte) {
	t.Helper()
	a, b := mustSplit(t, in), mustSplit(t, out)
	if len(a) != len(b) {
		t.Fatalf("Render() made %d documents of %d", len(b), len(a))
	}
	for i := range a {
		if !bytes.Contains(a[i].Raw, []byte("registry.example/app")) && !bytes.Equal(a[i].Raw, b[i].Raw) {
			t.Errorf("document %d has no image to pin but changed: %q → %q", i+1, a[i].Raw, b[i].Raw)
		}
	}
}

// TestOddInputLongLines renders documents with very long lines: a
// megabyte annotation, and thousands of containers on one flow-style
// line, each of which is spliced in place.
//
// Two thousand containers still make a line of about 100 KB (more than
// bufio.Scanner's 64 KiB), each spliced in place. The cost of splicing
// many on one line, which took minutes when each splice scanned its line
// from the start, is bounded by the binary's test of twenty thousand (e2e
// TestBinaryHostileInputBounded, "a very long line"); twenty thousand
// here took 37 s under -race and proved no more.
func TestOddInputLongLines(t *testing.T) {
	t.Parallel()
	const n = 2000
	var containers []string
	for i := range n {
		containers = append(containers, fmt.Sprintf("{name: c%d, image: registry.example/app:1 }", i))
	}
	long := strings.Repeat("x", 1<<20)
	in := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: long\n  annotations:\n    note: " + long + "\n" +
		"spec: {containers: [" + strings.Join(containers, ", ") + "]}\n"
	r := &Renderer{Resolver: newFixed()}
	res, err := r.Render(context.Background(), []byte(in))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	pinned := "image: registry.example/app:1@" + dg("registry.example/app:1") + " }"
	if got := strings.Count(string(res.Bytes()), pinned); got != n {
		t.Errorf("Render() pinned %d containers in place, want %d", got, n)
	}
	if !strings.Contains(string(res.Bytes()), "    note: "+long+"\n") {
		t.Errorf("Render() changed the long annotation")
	}
	again, err := r.Render(context.Background(), res.Bytes())
	if err != nil {
		t.Fatalf("Render(output) = %v", err)
	}
	if !bytes.Equal(again.Bytes(), res.Bytes()) {
		t.Errorf("Render() changed its own output")
	}
}
