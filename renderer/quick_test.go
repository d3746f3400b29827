package renderer

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/internal/gen"
)

// renderBoth renders in with quickParse and without it, and fails the
// test unless output, images, warnings and error are the same.
func renderBoth(t *testing.T, r Renderer, in []byte) {
	t.Helper()
	var warnQuick, warnFull []string
	quick, full := r, r
	full.noQuick = true
	quick.Warnf = func(f string, args ...any) { warnQuick = append(warnQuick, fmt.Sprintf(f, args...)) }
	full.Warnf = func(f string, args ...any) { warnFull = append(warnFull, fmt.Sprintf(f, args...)) }
	got, gotErr := quick.Render(context.Background(), in)
	want, wantErr := full.Render(context.Background(), in)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("Render(%q) with quickParse: error %v, without: %v", in, gotErr, wantErr)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("Render(%q) with quickParse:\n%s\nwithout:\n%s", in, got.Bytes(), want.Bytes())
	}
	if d := cmp.Diff(fmt.Sprint(want.Images, want.Unpinned, warnFull), fmt.Sprint(got.Images, got.Unpinned, warnQuick)); d != "" {
		t.Fatalf("Render(%q): images, unpinned values or warnings with quickParse differ (-without +with):\n%s", in, d)
	}
}

// TestQuickRender renders every test stream with quickParse and without
// it, in each mode: the same output, images, warnings and errors.
func TestQuickRender(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/*.input.yaml")
	odd, _ := filepath.Glob("testdata/oddinput/*.input.yaml")
	for _, p := range append(files, odd...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []Renderer{
			{Resolver: newFixed()},
			{Resolver: newFixed(), Mode: ModeDigest},
			{Resolver: newFixed(), Mode: ModeAnnotate, KeepUnresolved: true},
		} {
			renderBoth(t, r, b)
		}
	}
	// The hostile inputs (some large) in the default mode.
	hostile, _ := filepath.Glob("testdata/hostile/*.input.yaml")
	for _, p := range hostile {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		renderBoth(t, Renderer{Resolver: newFixed()}, b)
	}
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 30}); err != nil {
		t.Fatal(err)
	}
	renderBoth(t, Renderer{Resolver: newFixed()}, buf.Bytes())
	for _, s := range []string{
		// A template whose metadata only the encoder can change.
		"apiVersion: v1\nkind: Pod\nmetadata: {}\nspec:\n  containers:\n  - name: a\n    image: a:1\n",
		"apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    metadata: {}\n    spec:\n      containers:\n      - name: a\n        image: a:1\n",
		"apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    metadata:\n    spec:\n      containers:\n      - name: a\n        image: a:1 # c\n",
		"apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - name: a\n        image: a:1\n      - name: a\n        image: b:1\n",
	} {
		renderBoth(t, Renderer{Resolver: newFixed()}, []byte(s))
	}
}

// FuzzQuickRender renders arbitrary streams with quickParse and without
// it: the same output, images, warnings and errors.
func FuzzQuickRender(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		if strings.Count(string(in), "\n") > 2000 {
			return
		}
		renderBoth(t, Renderer{Resolver: newFixed()}, in)
	})
}

// TestQuickRenderRandom renders Helm's Deployment with one line changed
// at random, with quickParse and without it: the same output, images,
// warnings and errors, in documents near the subset and just outside it.
func TestQuickRenderRandom(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(28, 2))
	pick := func(s ...string) string { return s[rnd.IntN(len(s))] }
	var buf bytes.Buffer
	if err := gen.Stream(&buf, gen.Options{Deployments: 1}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	for range 600 {
		ls := slices.Clone(lines)
		i := 1 + rnd.IntN(len(ls)-2)
		key, _, _ := strings.Cut(ls[i], ":")
		switch rnd.IntN(3) {
		case 0: // another value
			ls[i] = key + ": " + pick("", "a", "1", "true", "null", "<<", "\"x\"", "'x'", "[a, b]", "{}", "[]", "&a x", "*a", "!!str x", "a: b", "x #c", "registry.example/a:1", "'registry.example/a:1'", "registry.example/a:1@sha256:"+strings.Repeat("a", 64), "é", "|")
		case 1: // another line
			ls = slices.Insert(ls, i, ls[i][:len(ls[i])-len(strings.TrimLeft(ls[i], " "))]+pick("image: b:1", "name: x", "metadata: {}", "annotations:", "checksum/images: x", "- name: c", "# c", "", "- image: d:1"))
		case 2: // another indentation
			ls[i] = pick("", " ", "  ") + ls[i]
		}
		renderBoth(t, Renderer{Resolver: newFixed()}, []byte(strings.Join(ls, "\n")))
	}
}

// TestQuickBlocksReused renders large generated streams, whose trees
// reuse the nodes of trees done with (quickBlocks), with quickParse and
// without it: with tags (the parses of the first megabyte kept for the
// last phase, the rest parsed again, both given back after) and pinned
// already (every tree given back in the first phase). A tree whose nodes
// were reused while still in use would pin or annotate the wrong thing.
func TestQuickBlocksReused(t *testing.T) {
	t.Parallel()
	for _, pinned := range []bool{false, true} {
		var in bytes.Buffer
		if err := gen.Stream(&in, gen.Options{Deployments: 3000, Pinned: pinned}); err != nil {
			t.Fatal(err)
		}
		if in.Len() < 2*maxKeptBytes {
			t.Fatalf("the stream is %d bytes, want more than twice maxKeptBytes", in.Len())
		}
		renderBoth(t, Renderer{Resolver: newFixed()}, in.Bytes())
	}
}
