package fluxpin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/renderer"
)

// TestSummaries: the summaries of a run against a file that digestpin
// pinned before (a digest moved, with a new tag; an image added, one
// removed, one unchanged), then of a second run on its output, which
// moves nothing; both forms against golden files.
func TestSummaries(t *testing.T) {
	t.Parallel()
	want, err := Entries(images)
	if err != nil {
		t.Fatal(err)
	}
	// The images the render ran, and the workloads that run them.
	ran := []renderer.Image{
		{Reference: "index.docker.io/library/nginx:1.27", Written: "nginx:1.27", Digest: images["nginx:1.27"],
			Workloads: []renderer.Workload{{Kind: "Deployment", Namespace: "shop", Name: "web", Container: "web"}, {Kind: "Job", Namespace: "shop", Name: "web-migrate", Container: "migrate"}}},
		{Reference: "ghcr.io/acme/api:2", Written: "ghcr.io/acme/api:2", Digest: images["ghcr.io/acme/api:2"],
			Workloads: []renderer.Workload{{Kind: "Deployment", Namespace: "shop", Name: "api", Container: "api"}}},
		{Reference: "index.docker.io/library/redis:latest", Written: "redis", Digest: images["redis"],
			Workloads: []renderer.Workload{{Kind: "StatefulSet", Namespace: "shop", Name: "cache", Container: "redis"}}},
	}
	in := read(t, "summary.yaml")
	first := pin(t, "summary.yaml", in, want)
	again := pin(t, "summary.yaml", first.Out, want)
	if again.Changed {
		t.Errorf("a second run changed the file")
	}
	cs := again.Changes(ran)
	if cs.Len() != 0 || len(cs.Unchanged) != 3 {
		t.Errorf("the second run: %d changes, %d unchanged, want 0 and 3", cs.Len(), len(cs.Unchanged))
	}
	sums := []Summary{
		{Path: "clusters/web.yaml", Object: "HelmRelease shop/web", Changes: first.Changes(ran)},
		{Path: "clusters/web.yaml", Object: "HelmRelease shop/web", Changes: cs},
	}
	for _, tc := range []struct {
		golden string
		got    []byte
	}{
		{"summary.md.golden", Markdown(sums)},
		{"summary.txt.golden", Text(sums)},
	} {
		golden := filepath.Join("testdata", tc.golden)
		if *update {
			if err := os.WriteFile(golden, tc.got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		g, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if string(tc.got) != string(g) {
			t.Errorf("differs from %s:\n%s", golden, tc.got)
		}
	}
	// The same run, summarised again, is the same bytes.
	if a, b := Text([]Summary{{Path: "f", Object: "o", Changes: first.Changes(ran)}}), Text([]Summary{{Path: "f", Object: "o", Changes: first.Changes(ran)}}); string(a) != string(b) {
		t.Errorf("two summaries of one run differ:\n%s\n%s", a, b)
	}
	if got := string(Text([]Summary{{Path: "f", Object: "o", Changes: cs}})); !strings.HasPrefix(got, "f: o: no image moved, 3 unchanged (against the digests in the file)\n") {
		t.Errorf("nothing moved: %q", got)
	}
}
