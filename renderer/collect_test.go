package renderer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/renderer/stream"
)

// webStream makes n Deployments web-0 … web-(n-1), each of 12 lines with
// the "# Source:" comment of one template, whose image is image(i).
func webStream(n int, image func(i int) string) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\n# Source: chart/templates/web.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web-%d\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: %s\n", i, image(i))
	}
	return []byte(b.String())
}

func TestRenderNamesFirstUseAcrossBatches(t *testing.T) {
	t.Parallel()
	// Hundreds of documents make many batches of collect, merged in
	// stream order whichever core finishes first: the message names the
	// image's first field (document 101), from what collect kept of it
	// once the documents around it were done.
	pinned := "registry.example/app:1@" + dg("registry.example/app:1")
	in := webStream(300, func(i int) string {
		if i == 100 || i == 200 || i == 299 {
			return "gone:1"
		}
		return pinned
	})
	f := newFixed()
	f.failed["index.docker.io/library/gone:1"] = errors.New("unauthorized")
	_, err := (&Renderer{Resolver: f}).Render(context.Background(), in)
	// Document 101 starts at line 1201; its image is its 12th line. The
	// documents in a row of one template are that template's output,
	// which begins at line 2.
	want := `document 101 (chart/templates/web.yaml), line 1212 (rendered line 1210 of the template): Deployment/web-100 container "app": resolving gone:1: unauthorized`
	if err == nil || err.Error() != want {
		t.Errorf("Render() = %v, want %s", err, want)
	}
}

func TestRenderWorkloadsInStreamOrderAcrossBatches(t *testing.T) {
	t.Parallel()
	in := webStream(300, func(i int) string { return fmt.Sprintf("registry.example/app:%d", i%3) })
	var warnings []string
	r := &Renderer{Resolver: newFixed(), KeepUnresolved: true, Warnf: func(format string, args ...any) {
		warnings = append(warnings, fmt.Sprintf(format, args...))
	}}
	res, err := r.Render(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Images) != 3 {
		t.Fatalf("Render() found %d images, want 3", len(res.Images))
	}
	for k, img := range res.Images {
		var want []Workload
		for i := k; i < 300; i += 3 {
			want = append(want, Workload{Kind: "Deployment", Name: fmt.Sprintf("web-%d", i), Container: "app"})
		}
		if diff := cmp.Diff(want, img.Workloads); diff != "" {
			t.Errorf("Images[%d].Workloads (-want +got):\n%s", k, diff)
		}
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q, want none", warnings)
	}
}

func TestRenderWarnsOfFinalDocumentsAcrossBatches(t *testing.T) {
	t.Parallel()
	// A blank image kept as written, in a document that is final after
	// collect (its other images carry digests): the warning still names
	// its document, template and line once the rest of it was dropped.
	pinned := "registry.example/app:1@" + dg("registry.example/app:1")
	in := webStream(300, func(i int) string {
		if i == 250 {
			return `" "`
		}
		return pinned
	})
	var warnings []string
	r := &Renderer{KeepUnresolved: true, Warnf: func(format string, args ...any) {
		warnings = append(warnings, fmt.Sprintf(format, args...))
	}}
	if _, err := r.Render(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	want := []string{`keeping image " " unpinned: document 251 (chart/templates/web.yaml), line 3012 (rendered line 3010 of the template): Deployment/web-250 container "app": image is empty, want a reference such as registry/name:tag`}
	if diff := cmp.Diff(want, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestMergerMergesInStreamOrder(t *testing.T) {
	t.Parallel()
	// Batches done out of order are merged in order: the first use of a
	// reference is the stream's first, and documents wait in order.
	docs, err := documents(webStream(6, func(int) string { return "app:1" }))
	if err != nil {
		t.Fatal(err)
	}
	c := &collection{docs: docs, out: make([]stream.Piece, len(docs)), pending: map[string]*refUses{}}
	m := &merger{c: c, done: map[int]*batchFound{}, names: map[string]string{}}
	r := &Renderer{}
	batch := func(start, end int) *batchFound {
		b := &batchFound{start: start, end: end}
		for i := start; i < end; i++ {
			ref, err := r.parseReference("image", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "app:1"})
			if err != nil {
				t.Fatal(err)
			}
			b.uses = append(b.uses, use{image: "app:1", ref: ref, workload: Workload{Kind: "Deployment", Name: fmt.Sprint(i)}, doc: docs[i], line: 10})
			b.errs = append(b.errs, fmt.Errorf("error %d", i))
		}
		return b
	}
	m.add(batch(4, 6))
	m.add(batch(2, 4))
	if len(c.order) != 0 || len(m.errs) != 0 {
		t.Fatalf("merged %d references and %d errors before the first batch was done", len(c.order), len(m.errs))
	}
	m.add(batch(0, 2))
	ru := c.pending["index.docker.io/library/app:1"]
	if ru == nil || ru.first.doc != docs[0] {
		t.Fatalf("pending = %v, want app:1 first used in document 1", c.pending)
	}
	var names []string
	for _, w := range ru.workloads {
		names = append(names, w.Name)
	}
	if diff := cmp.Diff([]string{"0", "1", "2", "3", "4", "5"}, names); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{0, 1, 2, 3, 4, 5}, c.waiting); diff != "" {
		t.Errorf("waiting (-want +got):\n%s", diff)
	}
	if got, want := errors.Join(m.errs...).Error(), "error 0\nerror 1\nerror 2\nerror 3\nerror 4\nerror 5"; got != want {
		t.Errorf("errors = %q, want %q", got, want)
	}
}

func TestRenderUnpinnedInStreamOrderOfFinalAndWaitingDocuments(t *testing.T) {
	t.Parallel()
	// Documents final after collect (their image pinned) are dropped once
	// merged and their notes kept apart; those that wait for the
	// resolver are finished later: the warnings of both come in stream
	// order.
	var b strings.Builder
	for i := range 100 {
		image := "registry.example/c:1"
		if i%3 != 0 {
			image += "@" + dg("registry.example/c:1")
		}
		fmt.Fprintf(&b, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d%d\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: %s\n        env:\n        - name: SIDECAR_IMAGE\n          value: registry.example/side:%d\n", i, image, i)
	}
	var warnings int
	r := &Renderer{Resolver: newFixed(), Warnf: func(string, ...any) { warnings++ }}
	res, err := r.Render(context.Background(), []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for i := range 100 {
		want = append(want, fmt.Sprintf("Deployment/d%d container \"c\" field env[name=SIDECAR_IMAGE].value \"registry.example/side:%d\"", i, i))
	}
	for _, u := range res.Unpinned {
		got = append(got, u.String())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Unpinned (-want +got):\n%s", diff)
	}
	if warnings != 1 {
		t.Errorf("%d warnings, want one listing the unpinned values", warnings)
	}
}
