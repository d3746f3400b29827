//go:build linux

package kube

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDryRunCharts: the test charts of the repository (testdata/chart
// with its hook Job and test Pod, testdata/generated) and of this module,
// rendered by `digestpin template` (hooks and test Pods included) against
// the loopback registry, go document by document to a server-side dry
// run: the API server accepts every document and decodes exactly the
// images digestpin reports, each pinned.
func TestDryRunCharts(t *testing.T) {
	t.Parallel()
	r := newRollout(t)
	seed := filepath.Join(t.TempDir(), "seed")
	if err := os.WriteFile(seed, []byte(mustRun(t, nil, nil, r.bin, "seed")), 0o600); err != nil {
		t.Fatal(err)
	}
	root := repoRoot(t)
	image := []string{"--set", "image=" + r.reg.Ref("app:1.0")}
	for _, tc := range []struct {
		chart string // relative to the repository
		sets  []string
	}{
		{chart: "testdata/chart", sets: []string{"--set", "image.app=" + r.reg.Ref("app:1.0"), "--set", "image.db=" + r.reg.Ref("db:1.0"), "--set", "image.tools=" + r.reg.Ref("tools:1.0")}},
		{chart: "testdata/generated", sets: image},
		{chart: "e2e/kube/testdata/rollout", sets: r.sets()},
		{chart: "e2e/kube/testdata/jobs", sets: image},
		{chart: "e2e/kube/testdata/secret", sets: image},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			t.Parallel()
			rep := filepath.Join(t.TempDir(), "report.json")
			args := append([]string{"template", "dry", filepath.Join(root, tc.chart), "-n", "dryrun-charts", "--seed-file", seed, "--report", rep}, tc.sets...)
			stream := mustRun(t, nil, r.helmHome, r.bin, args...)
			b, err := os.ReadFile(rep)
			if err != nil {
				t.Fatal(err)
			}
			var report report
			if err := json.Unmarshal(b, &report); err != nil {
				t.Fatalf("decoding the report: %v", err)
			}
			want := map[string]string{}
			for _, im := range report.Images {
				for _, w := range im.Workloads {
					if w.Field == "" {
						want[w.Kind+"/"+w.Namespace+"/"+w.Name+"/"+w.Container] = repoDigest(t, im.Name, im.Digest)
					}
				}
			}
			got := map[string]string{}
			docs := 0
			for i, d := range splitDocs(t, []byte(stream)) {
				var m map[string]any
				if err := yaml.Unmarshal([]byte(d), &m); err != nil {
					t.Fatalf("document %d: the API server's decoder refuses it: %v", i+1, err)
				}
				if m == nil {
					continue
				}
				docs++
				md, _ := m["metadata"].(map[string]any)
				docNS, _ := md["namespace"].(string)
				out, refused := r.c.dryRun(t, m, docNS)
				if refused != "" {
					t.Errorf("document %d, %v %v: the API server refuses it: %s", i+1, m["kind"], objName(m), refused)
					continue
				}
				imagesOf(out, docNS, got)
			}
			if len(want) == 0 {
				t.Fatalf("digestpin reports no image of %s", tc.chart)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: the API server runs %q, digestpin reports %s", k, got[k], v)
				}
			}
			for k, v := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("the API server runs %s = %s; digestpin reports no image for it", k, v)
				}
			}
			figure(t, "%d documents accepted by the API server's dry run, their %d images as digestpin reports them", docs, len(got))
		})
	}
}
