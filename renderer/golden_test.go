package renderer

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/kindpath"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGolden renders each testdata/NAME.input.yaml and compares it with
// NAME.golden.yaml, then renders the golden file again to prove that
// digestpin on its own output changes nothing.
func TestGolden(t *testing.T) {
	t.Parallel()
	custom, err := kindpath.ParsePodSpec("example.com/Worker=spec.pools.*.template.spec")
	if err != nil {
		t.Fatal(err)
	}
	renderers := map[string]*Renderer{
		"helm-all-kinds": {},
		"odd-syntax":     {},
		"digest-mode":    {Mode: ModeDigest},
		"annotate-mode":  {Mode: ModeAnnotate, ChecksumAnnotation: "example.com/images"},
		"custom-path":    {PodSpecPaths: append(kindpath.DefaultPodSpecs[:len(kindpath.DefaultPodSpecs):len(kindpath.DefaultPodSpecs)], custom)},
		"image-volumes":  {},
		// Workload CRDs, each in a project's own layout.
		"knative-serving":            {},
		"openkruise":                 {},
		"keda-scaledjob":             {},
		"openshift-deploymentconfig": {},
		"openkruise-jobs":            {},
		// Image fields outside pod specs (kindpath.DefaultImages).
		"argo-workflows": {},
		"tekton":         {},
		"spark-operator": {},
		// Operator resources (operatorPodSpecPaths, operatorImagePaths),
		// each in the layout of the operator's own examples and chart.
		"prometheus-operator":    {},
		"cloudnative-pg":         {},
		"eck":                    {},
		"strimzi":                {},
		"opentelemetry-operator": {},
		"grafana-redis-mongodb":  {},
		"crossplane":             {},
		// Argo inline templates and executor plugins, Tekton pipelines
		// in pipelines, OpenKruise EphemeralJob and AdvancedCronJob.
		"workflow-shapes": {},
		// Images in the args and env of operators and controllers
		// (kindpath.DefaultContainerImages).
		"images-in-args-env": {},
		// Documents in flow style keep their layout.
		"flow-style": {},
		// Documents written as JSON stay JSON.
		"kubectl-json": {},
		"json-stream":  {},
		// Manifests inside strings: listed as unpinned, never rewritten
		// (TestGoldenUnpinned).
		"embedded-manifests": {},
		// Manifests inside strings that image paths with "|" name: pinned
		// in the bytes of each image alone.
		"embedded-pinned": {ImagePaths: embeddedPaths(t), ChecksumPaths: []kindpath.Checksum{{Group: "*", Kind: "ConfigMap"}}},
	}
	inputs, err := filepath.Glob("testdata/*.input.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) != len(renderers) {
		t.Fatalf("found %d inputs, want one for each of the %d renderers", len(inputs), len(renderers))
	}
	for _, in := range inputs {
		base := strings.TrimSuffix(filepath.Base(in), ".input.yaml")
		t.Run(base, func(t *testing.T) {
			r, ok := renderers[base]
			if !ok {
				t.Fatalf("no renderer for %s", in)
			}
			r.Resolver = newFixed()
			checkGolden(t, r, in, filepath.Join("testdata", base+".golden.yaml"))
		})
	}
}

// embeddedPaths are the default image paths and those of the images
// inside strings of testdata/embedded-pinned.input.yaml.
func embeddedPaths(t *testing.T) []kindpath.Image {
	t.Helper()
	paths := kindpath.DefaultImages[:len(kindpath.DefaultImages):len(kindpath.DefaultImages)]
	for _, s := range []string{`ConfigMap=data.policy-server\.yaml|spec.image`, `argoproj.io/WorkflowTemplate=spec.templates.*.resource.manifest|spec.containers.*.image`} {
		p, err := kindpath.ParseImage(s)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// checkGolden renders the file in with r and compares the output with the
// file golden (go test -update rewrites it), then renders the golden file
// again to prove that it is a fixed point. It returns the input and the
// result.
func checkGolden(t *testing.T, r *Renderer, in, golden string) ([]byte, Result) {
	t.Helper()
	src, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Render(context.Background(), src)
	if err != nil {
		t.Fatalf("Render(%s) = %v", in, err)
	}
	if *update {
		if err := os.WriteFile(golden, res.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update): %v", err)
	}
	if diff := cmp.Diff(string(want), string(res.Bytes())); diff != "" {
		t.Errorf("Render(%s) (-%s +got):\n%s", in, golden, diff)
	}
	// Idempotence: the golden file is a fixed point.
	again, err := r.Render(context.Background(), want)
	if err != nil {
		t.Fatalf("Render(%s) = %v", golden, err)
	}
	if !bytes.Equal(want, again.Bytes()) {
		t.Errorf("Render(%s) changed its own output (-want +got):\n%s", golden, cmp.Diff(string(want), string(again.Bytes())))
	}
	return src, res
}
