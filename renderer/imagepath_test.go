package renderer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/kindpath"
)

// TestImagePathKeysUntouched renders documents of the kinds of
// kindpath.DefaultImages, and lookalikes, whose "image" keys and image-like
// strings are no image field of a default path, or a placeholder that
// the engine fills in: each comes out byte for byte as it came in.
func TestImagePathKeysUntouched(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ desc, in string }{
		{
			desc: "an Argo Workflow with a parameterised image, an empty script image and image parameters",
			in:   "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: w\nspec:\n  arguments:\n    parameters:\n    - name: image\n      value: registry.example/app:1\n  podMetadata:\n    annotations:\n      image: registry.example/app:1\n  templates:\n  - name: a\n    container:\n      image: '{{inputs.parameters.image}}'\n  - name: b\n    script:\n      image: ''\n      source: 'echo image: registry.example/app:1'\n  - name: c\n    inputs:\n      parameters:\n      - name: image\n        default: registry.example/app:1\n    container:\n      image: \"{{workflow.parameters.image}}\"\n",
		},
		{
			desc: "an Argo resource template whose manifest holds an image",
			in:   "apiVersion: argoproj.io/v1alpha1\nkind: WorkflowTemplate\nmetadata:\n  name: w\nspec:\n  templates:\n  - name: r\n    resource:\n      action: create\n      manifest: |\n        kind: Pod\n        spec:\n          containers:\n          - image: registry.example/app:1\n    podSpecPatch: '{\"containers\":[{\"name\":\"main\",\"image\":\"registry.example/app:1\"}]}'\n",
		},
		{
			desc: "an Argo Workflow's image keys outside templates",
			in:   "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata:\n  name: w\nspec:\n  image: registry.example/app:1\n  container:\n    image: registry.example/app:1\n  templateDefaults:\n    metadata:\n      annotations:\n        image: registry.example/app:1\n",
		},
		{
			desc: "a CronWorkflow's templates outside workflowSpec",
			in:   "apiVersion: argoproj.io/v1alpha1\nkind: CronWorkflow\nmetadata:\n  name: c\nspec:\n  schedules: ['* * * * *']\n  templates:\n  - name: a\n    container:\n      image: registry.example/app:1\n",
		},
		{
			desc: "an Argo Sensor and EventSource, whose triggers hold images",
			in:   "apiVersion: argoproj.io/v1alpha1\nkind: Sensor\nmetadata:\n  name: s\nspec:\n  template:\n    container:\n      image: registry.example/app:1\n  triggers:\n  - template:\n      name: t\n      k8s:\n        source:\n          resource:\n            spec:\n              templates:\n              - container:\n                  image: registry.example/app:1\n",
		},
		{
			desc: "a Workflow of another group",
			in:   "apiVersion: example.com/v1\nkind: Workflow\nmetadata:\n  name: w\nspec:\n  templates:\n  - container:\n      image: registry.example/app:1\n",
		},
		{
			desc: "a Tekton Task with parameterised images and image parameters",
			in:   "apiVersion: tekton.dev/v1\nkind: Task\nmetadata:\n  name: t\nspec:\n  params:\n  - name: image\n    default: registry.example/app:1\n  results:\n  - name: image\n  stepTemplate:\n    image: $(params.image)\n  steps:\n  - name: a\n    image: $(params.image)\n    script: 'echo image: registry.example/app:1'\n  - name: b\n    ref:\n      name: build\n    params:\n    - name: image\n      value: registry.example/app:1\n",
		},
		{
			desc: "a Tekton Pipeline's task params and a custom task spec",
			in:   "apiVersion: tekton.dev/v1\nkind: Pipeline\nmetadata:\n  name: p\nspec:\n  tasks:\n  - name: a\n    params:\n    - name: image\n      value: registry.example/app:1\n    taskRef:\n      name: build\n  - name: b\n    taskSpec:\n      apiVersion: example.dev/v1\n      kind: Wait\n      spec:\n        image: registry.example/app:1\n",
		},
		{
			desc: "a Tekton TaskRun's step overrides and a Task of another group",
			in:   "apiVersion: tekton.dev/v1\nkind: TaskRun\nmetadata:\n  name: r\nspec:\n  taskRef:\n    name: t\n  stepSpecs:\n  - name: a\n    computeResources: {}\n  params:\n  - name: image\n    value: registry.example/app:1\n---\napiVersion: example.com/v1\nkind: Task\nmetadata:\n  name: t\nspec:\n  steps:\n  - image: registry.example/app:1\n",
		},
		{
			desc: "a SparkApplication's sparkConf, an empty executor image and a null driver image",
			in:   "apiVersion: sparkoperator.k8s.io/v1beta2\nkind: SparkApplication\nmetadata:\n  name: s\nspec:\n  imagePullPolicy: Always\n  sparkConf:\n    spark.kubernetes.container.image: registry.example/app:1\n  hadoopConf:\n    image: registry.example/app:1\n  driver:\n    image:\n    labels:\n      image: registry.example/app:1\n  executor:\n    image: ''\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(tc.in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(tc.in, string(res.Bytes())); diff != "" {
				t.Errorf("Render() changed a document without an image field (-in +out):\n%s", diff)
			}
			if len(res.Images) != 0 {
				t.Errorf("Render() found images %v, want none", res.Images)
			}
		})
	}
}

// runner is a CRD with image fields outside a pod spec, for paths given
// as flags would be.
const runner = `apiVersion: example.com/v1
kind: Runner
metadata:
  name: r
spec:
  runnerRef: registry.example/runner:1
  jobs:
  - name: a
    metadata:
      labels: {job: a}
    tool: registry.example/tool-a:1
  - name: b
    tool: registry.example/tool-b:1
`

// TestImagePathsAndChecksumPaths renders the runner CRD with declared
// image paths (one whose field has no "image" in its name: the document
// must still be read) and checksum paths: the object itself, each job,
// or none; the checksum lines are field/PATH=REF.
func TestImagePathsAndChecksumPaths(t *testing.T) {
	t.Parallel()
	ref := func(s string) string { return "registry.example/" + s + "@" + dg("registry.example/"+s) }
	paths := []kindpath.Image{
		{Group: "example.com", Kind: "Runner", Fields: []string{"spec", "runnerRef"}},
		{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*", "tool"}},
	}
	runnerLine := "field/spec.runnerRef=" + ref("runner:1")
	aLine := "field/spec.jobs[0].tool=" + ref("tool-a:1")
	bLine := "field/spec.jobs[1].tool=" + ref("tool-b:1")
	pinned := strings.NewReplacer("registry.example/runner:1", ref("runner:1"), "registry.example/tool-a:1", ref("tool-a:1"), "registry.example/tool-b:1", ref("tool-b:1")).Replace(runner)
	for _, tc := range []struct {
		desc      string
		checksums []kindpath.Checksum
		want      string
	}{
		{desc: "no checksum path", want: pinned},
		{
			desc:      "the object itself",
			checksums: []kindpath.Checksum{{Group: "example.com", Kind: "Runner"}},
			want:      strings.Replace(pinned, "  name: r\n", "  name: r\n  annotations:\n    checksum/images: '"+Checksum([]string{runnerLine, aLine, bLine})+"'\n", 1),
		},
		{
			// The jobs' own paths belong to the longer checksum path;
			// spec.runnerRef to the object.
			desc:      "each job, and the object",
			checksums: []kindpath.Checksum{{Group: "*", Kind: "Runner"}, {Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*"}}},
			want: strings.NewReplacer(
				"  name: r\n", "  name: r\n  annotations:\n    checksum/images: '"+Checksum([]string{runnerLine})+"'\n",
				"      labels: {job: a}\n", "      labels: {job: a}\n      annotations:\n        checksum/images: '"+Checksum([]string{aLine})+"'\n",
			).Replace(pinned) + "    metadata:\n      annotations:\n        checksum/images: '" + Checksum([]string{bLine}) + "'\n",
		},
		{
			desc:      "a checksum path of another group",
			checksums: []kindpath.Checksum{{Group: "other.example.com", Kind: "Runner"}},
			want:      pinned,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{Resolver: newFixed(), ImagePaths: paths, ChecksumPaths: tc.checksums}
			res, err := r.Render(context.Background(), []byte(runner))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(tc.want, string(res.Bytes())); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
			var got []string
			for _, img := range res.Images {
				for _, w := range img.Workloads {
					got = append(got, w.String())
				}
			}
			checkAsAPIServerWith(t, r, []byte(runner), res.Bytes())
			want := []string{"Runner/r field spec.runnerRef", "Runner/r field spec.jobs[0].tool", "Runner/r field spec.jobs[1].tool"}
			if diff := cmp.Diff(slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(got))); diff != "" {
				t.Errorf("Render() workloads (-want +got):\n%s", diff)
			}
			again, err := r.Render(context.Background(), res.Bytes())
			if err != nil {
				t.Fatalf("Render(output) = %v", err)
			}
			if diff := cmp.Diff(string(res.Bytes()), string(again.Bytes())); diff != "" {
				t.Errorf("Render() changed its own output (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImagePathRepeatingADefault checks that an image path given twice
// (a flag that repeats a default) pins and reports each field once.
func TestImagePathRepeatingADefault(t *testing.T) {
	t.Parallel()
	p, err := kindpath.ParseImage("tekton.dev/Task=spec.steps.*.image")
	if err != nil {
		t.Fatal(err)
	}
	in := "apiVersion: tekton.dev/v1\nkind: Task\nmetadata:\n  name: t\nspec:\n  steps:\n  - name: a\n    image: registry.example/app:1\n"
	r := &Renderer{Resolver: newFixed(), ImagePaths: append(slices.Clip(kindpath.DefaultImages), p)}
	res, err := r.Render(context.Background(), []byte(in))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	if len(res.Images) != 1 || len(res.Images[0].Workloads) != 1 {
		t.Errorf("Render() images = %+v, want one image used once", res.Images)
	}
	if want := strings.Replace(in, "app:1", "app:1@"+dg("registry.example/app:1"), 1); string(res.Bytes()) != want {
		t.Errorf("Render() = %s, want %s", res.Bytes(), want)
	}
}

// TestImagePathErrors checks that image fields found by image paths are
// refused as containers' images are: where the API server could read
// something else, where they hold no reference, with the document, line,
// object and field.
func TestImagePathErrors(t *testing.T) {
	t.Parallel()
	const task = "apiVersion: tekton.dev/v1\nkind: Task\nmetadata:\n  name: t\nspec:\n  steps:\n  - name: a\n"
	for _, tc := range []struct {
		desc, in string
		want     []string
	}{
		{
			desc: "a \"*\" over a mapping with a merge key",
			in:   "apiVersion: example.com/v1\nkind: Runner\nmetadata:\n  name: r\nbase: &b {x: {tool: registry.example/a:1}}\nspec:\n  jobs:\n    <<: *b\n    y: {tool: registry.example/b:1}\n",
			want: []string{"document 1, line 8: Runner/r: jobs holds a merge key (<<); write it out"},
		},
		{
			desc: "a list",
			in:   task + "    image: [registry.example/a:1]\n",
			want: []string{`document 1, line 8: Task/t field spec.steps[0].image: image is a sequence, want a reference such as registry/name:tag`},
		},
		{
			desc: "a boolean",
			in:   task + "    image: true\n",
			want: []string{`document 1, line 8: Task/t field spec.steps[0].image: image is bool true, want a reference`},
		},
		{
			desc: "a number",
			in:   task + "    image: 12\n",
			want: []string{`document 1, line 8: Task/t field spec.steps[0].image: image is int 12, want a reference such as registry/name:tag`},
		},
		{
			desc: "a mapping",
			in:   "apiVersion: sparkoperator.k8s.io/v1beta2\nkind: SparkApplication\nmetadata:\n  name: s\n  namespace: n\nspec:\n  image: {name: spark}\n",
			want: []string{`document 1, line 7: SparkApplication/n/s field spec.image: image is a mapping`},
		},
		{
			desc: "a bad reference",
			in:   task + "    image: Registry.example/A:1\n",
			want: []string{`document 1, line 8: Task/t field spec.steps[0].image: parsing image "Registry.example/A:1"`},
		},
		{
			desc: "a blank reference",
			in:   task + "    image: ' '\n",
			want: []string{`document 1, line 8: Task/t field spec.steps[0].image: image is empty`},
		},
		{
			desc: "an image that a ConfigMap shares",
			in:   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n  data: &d {image: registry.example/a:1}\n- apiVersion: tekton.dev/v1\n  kind: Task\n  metadata: {name: t}\n  spec:\n    steps:\n    - *d\n",
			want: []string{"document 1, line 7: &d is not on the way to a pod spec's images"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			paths := append(slices.Clip(kindpath.DefaultImages), kindpath.Image{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*", "tool"}})
			wantRefused(t, &Renderer{Resolver: newFixed(), ImagePaths: paths}, tc.in, tc.want)
		})
	}
}

// TestImagePathKeepUnresolved checks that KeepUnresolved keeps an image
// field that holds no reference, or whose image cannot be resolved, as it
// keeps a container's, with a warning naming the field.
func TestImagePathKeepUnresolved(t *testing.T) {
	t.Parallel()
	in := "apiVersion: tekton.dev/v1\nkind: Task\nmetadata:\n  name: t\nspec:\n  steps:\n  - name: a\n    image: ' '\n  - name: b\n    image: registry.example/gone:1\n  - name: c\n    image: registry.example/app:1\n"
	f := newFixed()
	f.failed["registry.example/gone:1"] = fmt.Errorf("not found")
	var warnings []string
	r := &Renderer{Resolver: f, KeepUnresolved: true, Warnf: func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }}
	res, err := r.Render(context.Background(), []byte(in))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	want := strings.Replace(in, "app:1", "app:1@"+dg("registry.example/app:1"), 1)
	if diff := cmp.Diff(want, string(res.Bytes())); diff != "" {
		t.Errorf("Render() (-want +got):\n%s", diff)
	}
	wantW := []string{
		`keeping registry.example/gone:1 unpinned: document 1, line 10: Task/t field spec.steps[1].image: resolving registry.example/gone:1: not found`,
		`keeping image " " unpinned: document 1, line 8: Task/t field spec.steps[0].image: image is empty, want a reference such as registry/name:tag`,
	}
	if diff := cmp.Diff(wantW, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// TestImagePathOnAPodSpecField checks that an image path that leads to a
// container's image (a path given as a flag that repeats the pod spec)
// pins and reports the image once, as the container's, and that a
// checksum path covering the field agrees with the pod template on it.
func TestImagePathOnAPodSpecField(t *testing.T) {
	t.Parallel()
	img := "registry.example/app:1"
	pinned := img + "@" + dg(img)
	in := strings.Replace(deployment, "IMAGE", img, 1)
	withTemplateSum := strings.Replace(strings.Replace(deployment, "IMAGE", pinned, 1), "    spec:\n", "    metadata:\n      annotations:\n        checksum/images: '"+Checksum([]string{"app=" + pinned})+"'\n    spec:\n", 1)
	paths := []kindpath.Image{{Group: "apps", Kind: "Deployment", Fields: []string{"spec", "template", "spec", "containers", "*", "image"}}}
	for _, tc := range []struct {
		desc      string
		checksums []kindpath.Checksum
		want      string
	}{
		{desc: "no checksum path", want: withTemplateSum},
		{
			desc:      "a checksum on the object",
			checksums: []kindpath.Checksum{{Group: "apps", Kind: "Deployment"}},
			want:      strings.Replace(withTemplateSum, "  name: web\n", "  name: web\n  annotations:\n    checksum/images: '"+Checksum([]string{"field/spec.template.spec.containers[0].image=" + pinned})+"'\n", 1),
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{Resolver: newFixed(), ImagePaths: paths, ChecksumPaths: tc.checksums}
			res, err := r.Render(context.Background(), []byte(in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(tc.want, string(res.Bytes())); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
			checkAsAPIServerWith(t, r, []byte(in), res.Bytes())
			want := []Workload{{Kind: "Deployment", Name: "web", Container: "app"}}
			if len(res.Images) != 1 {
				t.Fatalf("Render() images = %+v, want one", res.Images)
			}
			if diff := cmp.Diff(want, res.Images[0].Workloads); diff != "" {
				t.Errorf("Render() workloads (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChecksumPathCoversEveryPathToAField checks that a field that two
// image paths lead to, one of which a checksum path owns, is pinned once
// and covered by that checksum, whichever path comes first; and that a
// mapping that two checksum paths lead to gets one checksum.
func TestChecksumPathCoversEveryPathToAField(t *testing.T) {
	t.Parallel()
	ref := func(s string) string { return "registry.example/" + s + "@" + dg("registry.example/"+s) }
	aLine := "field/spec.jobs[0].tool=" + ref("tool-a:1")
	bLine := "field/spec.jobs[1].tool=" + ref("tool-b:1")
	want := strings.NewReplacer(
		"registry.example/tool-a:1", ref("tool-a:1"), "registry.example/tool-b:1", ref("tool-b:1"),
		"      labels: {job: a}\n", "      labels: {job: a}\n      annotations:\n        checksum/images: '"+Checksum([]string{aLine})+"'\n",
	).Replace(runner) + "    metadata:\n      annotations:\n        checksum/images: '" + Checksum([]string{bLine}) + "'\n"
	jobs := kindpath.Image{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*", "tool"}}
	anyPath := kindpath.Image{Group: "*", Kind: "Runner", Fields: []string{"spec", "*", "*", "tool"}}
	jobsSum := kindpath.Checksum{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*"}}
	anySum := kindpath.Checksum{Group: "example.com", Kind: "Runner", Fields: []string{"spec", "*", "*"}}
	for _, tc := range []struct {
		paths     []kindpath.Image
		checksums []kindpath.Checksum
	}{
		{[]kindpath.Image{jobs, anyPath}, []kindpath.Checksum{jobsSum}},
		{[]kindpath.Image{anyPath, jobs}, []kindpath.Checksum{jobsSum}},
		{[]kindpath.Image{jobs, jobs}, []kindpath.Checksum{jobsSum}},
		// Two checksum paths that lead to the same mappings, each owning
		// one of the image paths: one checksum each.
		{[]kindpath.Image{jobs, anyPath}, []kindpath.Checksum{jobsSum, anySum}},
		{[]kindpath.Image{anyPath, jobs}, []kindpath.Checksum{anySum, jobsSum}},
	} {
		t.Run(fmt.Sprint(tc.paths, tc.checksums), func(t *testing.T) {
			r := &Renderer{Resolver: newFixed(), ImagePaths: tc.paths, ChecksumPaths: tc.checksums}
			res, err := r.Render(context.Background(), []byte(runner))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(want, string(res.Bytes())); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
			for _, img := range res.Images {
				if len(img.Workloads) != 1 {
					t.Errorf("Render() reports %s used by %v, want once", img.Reference, img.Workloads)
				}
			}
		})
	}
}

// TestChecksumPathRefused checks that a checksum path that would leave
// image fields out of every checksum, or write an annotation where the
// API server reads none, is refused: one that leads to a list or a
// scalar, to a pod template or pod spec (which have checksums of their
// own, or no metadata).
func TestChecksumPathRefused(t *testing.T) {
	t.Parallel()
	jobs := []kindpath.Image{{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*", "tool"}}}
	side := []kindpath.Image{{Group: "apps", Kind: "Deployment", Fields: []string{"spec", "template", "spec", "containers", "*", "sidecar", "image"}}}
	dep := strings.Replace(deployment, "IMAGE", "registry.example/app:1", 1) + "        sidecar: {image: registry.example/side:1}\n"
	for _, tc := range []struct {
		desc      string
		in        string
		paths     []kindpath.Image
		checksums []string
		want      string
	}{
		{
			desc: "a list", in: runner, paths: jobs, checksums: []string{"Runner=spec.jobs"},
			want: "document 1, line 8: Runner/r: the checksum path Runner=spec.jobs leads to a sequence at spec.jobs, want a mapping",
		},
		{
			desc: "a scalar", in: runner, paths: append(slices.Clip(jobs), kindpath.Image{Group: "*", Kind: "Runner", Fields: []string{"spec", "runnerRef", "x", "image"}}),
			checksums: []string{"Runner=spec.runnerRef"},
			want:      "document 1, line 6: Runner/r: the checksum path Runner=spec.runnerRef leads to a scalar at spec.runnerRef, want a mapping",
		},
		{
			desc: "the object's metadata a scalar", in: strings.Replace(runner, "metadata:\n  name: r\n", "metadata: 0\n", 1), paths: jobs, checksums: []string{"Runner=."},
			want: "document 1, line 3: Runner/: cannot write the checksum/images annotation: metadata is int 0, want a mapping",
		},
		{
			desc: "a pod template", in: dep, paths: side, checksums: []string{"apps/Deployment=spec.template"},
			want: "document 1, line 7: Deployment/web: the checksum path apps/Deployment=spec.template leads to the pod template at spec.template",
		},
		{
			desc: "a container", in: dep, paths: side, checksums: []string{"Deployment=spec.template.spec.containers.*"},
			want: "document 1, line 9: Deployment/web: the checksum path Deployment=spec.template.spec.containers.* leads to the mapping inside a pod template at spec.template.spec.containers[0]",
		},
		{
			desc: "a pod spec", in: dep, paths: side, checksums: []string{"Deployment=spec.template.spec"},
			want: "document 1, line 8: Deployment/web: the checksum path Deployment=spec.template.spec leads to the pod spec at spec.template.spec",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{Resolver: newFixed(), ImagePaths: tc.paths}
			for _, s := range tc.checksums {
				c, err := kindpath.ParseChecksum(s)
				if err != nil {
					t.Fatal(err)
				}
				r.ChecksumPaths = append(r.ChecksumPaths, c)
			}
			wantRefused(t, r, tc.in, []string{tc.want})
		})
	}
}

// TestImagePathOverAMapping checks that a "*" field steps into every
// value of a mapping, each field named by its key, and that the group of
// a path must be the object's.
func TestImagePathOverAMapping(t *testing.T) {
	t.Parallel()
	in := "apiVersion: example.com/v1\nkind: Runner\nmetadata:\n  name: r\nspec:\n  jobs:\n    x:\n      tool: registry.example/tool-a:1\n    y.z:\n      tool: registry.example/tool-b:1\n"
	for _, tc := range []struct {
		desc  string
		group string
		want  []string
	}{
		{desc: "any group", group: "*", want: []string{"Runner/r field spec.jobs.x.tool", "Runner/r field spec.jobs.y.z.tool"}},
		{desc: "the group", group: "example.com", want: []string{"Runner/r field spec.jobs.x.tool", "Runner/r field spec.jobs.y.z.tool"}},
		{desc: "another group", group: "example.org"},
		{desc: "the core group", group: ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{Resolver: newFixed(), ImagePaths: []kindpath.Image{{Group: tc.group, Kind: "Runner", Fields: []string{"spec", "jobs", "*", "tool"}}}}
			res, err := r.Render(context.Background(), []byte(in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			var got []string
			for _, img := range res.Images {
				for _, w := range img.Workloads {
					got = append(got, w.String())
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Render() workloads (-want +got):\n%s", diff)
			}
			if want := strings.Count(in, "tool-") * len(tc.want) / 2; strings.Count(string(res.Bytes()), "@sha256:") != want {
				t.Errorf("Render() pinned %d images, want %d:\n%s", strings.Count(string(res.Bytes()), "@sha256:"), want, res.Bytes())
			}
			checkAsAPIServerWith(t, r, []byte(in), res.Bytes())
		})
	}
}

// TestChecksumPathCoveringNothing checks that a checksum path that no
// image path goes through is refused, before any document is read: it
// would write no checksum, so that in ModeAnnotate a moved image would
// change nothing. It names the kind and the path.
func TestChecksumPathCoveringNothing(t *testing.T) {
	t.Parallel()
	paths := []kindpath.Image{
		{Group: "example.com", Kind: "Runner", Fields: []string{"spec", "runnerRef"}},
		{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*", "tool"}},
	}
	for _, tc := range []struct {
		desc string
		c    kindpath.Checksum
		want string
	}{
		{
			desc: "the image field itself, a string",
			c:    kindpath.Checksum{Group: "example.com", Kind: "Runner", Fields: []string{"spec", "runnerRef"}},
			want: "checksum path example.com/Runner=spec.runnerRef covers no image path: no image path of example.com/Runner goes through spec.runnerRef to a field inside it (image paths of Runner: example.com/Runner=spec.runnerRef, Runner=spec.jobs.*.tool)",
		},
		{
			desc: "an image field under a *",
			c:    kindpath.Checksum{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*", "tool"}},
			want: "checksum path Runner=spec.jobs.*.tool covers no image path",
		},
		{
			desc: "a field no image path has",
			c:    kindpath.Checksum{Group: "*", Kind: "Runner", Fields: []string{"spec", "podtemplate"}},
			want: "checksum path Runner=spec.podtemplate covers no image path: no image path of Runner goes through spec.podtemplate",
		},
		{
			desc: "a kind without image paths",
			c:    kindpath.Checksum{Group: "apps", Kind: "Deployment"},
			want: "checksum path apps/Deployment=. covers no image path: there is no image path for Deployment; its pod templates get a checksum of their own",
		},
		{
			desc: "a group no image path of the kind matches",
			c:    kindpath.Checksum{Group: "other.example.com", Kind: "Runner", Fields: []string{"spec"}},
			want: "", // spec.jobs.*.tool is of every group
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			for _, mode := range []Mode{ModePin, ModeAnnotate} {
				r := &Renderer{Resolver: newFixed(), Mode: mode, ImagePaths: paths, ChecksumPaths: []kindpath.Checksum{tc.c}}
				res, err := r.Render(context.Background(), []byte(runner))
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("Render(%s) = %v", mode, err)
				case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
					t.Errorf("Render(%s) = %v, want an error starting %q", mode, err, tc.want)
				case tc.want != "" && res.Bytes() != nil:
					t.Errorf("Render(%s) wrote output with an error", mode)
				}
				// Empty input too: the paths are wrong before any document.
				if _, err := r.Render(context.Background(), nil); (err != nil) != (tc.want != "") {
					t.Errorf("Render(%s, empty) = %v, want an error: %t", mode, err, tc.want != "")
				}
			}
		})
	}
}

// TestValidateMode checks that a Mode outside the modes is refused: it
// would pin as ModePin, whatever the caller meant.
func TestValidateMode(t *testing.T) {
	t.Parallel()
	r := &Renderer{Resolver: newFixed(), Mode: "annotat"}
	if _, err := r.Render(context.Background(), []byte(dep)); err == nil || err.Error() != `mode "annotat": want pin, digest or annotate` {
		t.Errorf("Render() = %v, want the mode refused", err)
	}
	for _, m := range []Mode{"", ModePin, ModeDigest, ModeAnnotate} {
		if err := (&Renderer{Mode: m}).Validate(); err != nil {
			t.Errorf("Validate(%q) = %v", m, err)
		}
	}
}

// TestSharedNodeOffImagePathsRefused checks that a node shared through an
// alias is pinned only where every place of it is on the way to an image
// field that gets pinned: a walk that passes an alias on its way to
// nothing to pin (a checksum path's mapping without image fields, a field
// that does not read as a reference) does not make that place one, so
// pinning the node at its other place is refused, whatever checksum
// paths are given (FuzzImagePaths found the first). Nor does a walk of a
// pod spec path to a pod spec, container or image volume without images.
func TestSharedNodeOffImagePathsRefused(t *testing.T) {
	t.Parallel()
	const head = "apiVersion: example.com/v1\nkind: Runner\nmetadata: {name: r}\n"
	env := "Runner=spec.env[name=RUNNER_IMAGE].value"
	for _, tc := range []struct {
		desc      string
		paths     []string
		checksums []string
		podSpecs  []string
		in        string
		want      string
	}{
		{
			desc:  "a list of env vars shared as jobs",
			paths: []string{env, "Runner=spec.jobs.*.tool"},
			in:    head + "spec: {env: &e [{name: RUNNER_IMAGE, value: registry.example/a:1}], jobs: *e}\n",
			want:  "document 1, line 4: *e shares &e (line 4) outside a pod spec's images",
		},
		{
			desc:      "a checksum path through the alias",
			paths:     []string{env, "Runner=spec.jobs.*.tool"},
			checksums: []string{"Runner=spec.jobs.*"},
			in:        head + "spec: {env: &e [{name: RUNNER_IMAGE, value: registry.example/a:1}], jobs: *e}\n",
			want:      "document 1, line 4: *e shares &e (line 4) outside a pod spec's images",
		},
		{
			desc:      "checksum paths on the object and through the alias",
			paths:     []string{env, "Runner=spec.jobs.*.tool"},
			checksums: []string{"Runner=.", "Runner=spec.jobs.*"},
			in:        head + "spec: {env: &e [{name: RUNNER_IMAGE, value: registry.example/a:1}], jobs: *e}\n",
			want:      "document 1, line 4: *e shares &e (line 4) outside a pod spec's images",
		},
		{
			desc:      "a checksum path to a mapping whose images another path's checksum covers",
			paths:     []string{"Runner=spec.a.image", "Runner=spec.b.tool"},
			checksums: []string{"Runner=spec.a", "Runner=spec.b"},
			in:        head + "spec:\n  a: &x {image: registry.example/a:1}\n  b: *x\n",
			want:      "document 1, line 6: *x shares &x (line 5) outside a pod spec's images",
		},
		{
			desc:  "an env var through the alias that does not read as a reference",
			paths: []string{env, "Runner=spec.jobs[name=OTHER].value"},
			in:    head + "spec:\n  env: &e\n  - {name: RUNNER_IMAGE, value: registry.example/a:1}\n  - {name: OTHER, value: not a reference}\n  jobs: *e\n",
			want:  "document 1, line 8: *e shares &e (line 5) outside a pod spec's images",
		},
		{
			desc:  "a flag through the alias whose value does not read as a reference",
			paths: []string{env, "Runner=spec.jobs.*.args[flag=--tool-image]"},
			in:    head + "spec:\n  env: &a\n  - {name: RUNNER_IMAGE, value: registry.example/a:1}\n  - --tool-image=/not/a/reference\n  jobs:\n  - args: *a\n",
			want:  "document 1, line 9: *a shares &a (line 5) outside a pod spec's images",
		},
		{
			desc:     "a pod template without images through the alias",
			paths:    []string{"Runner=spec.config.image"},
			podSpecs: []string{"example.com/Runner=spec.template.spec"},
			in:       head + "spec:\n  config: &t {image: registry.example/a:1, spec: {containers: []}}\n  template: *t\n",
			want:     "document 1, line 6: *t shares &t (line 5) outside a pod spec's images",
		},
		{
			desc:     "containers without images through the alias",
			paths:    []string{"Runner=spec.tools.*.ref"},
			podSpecs: []string{"example.com/Runner=spec.template.spec"},
			in:       head + "spec:\n  tools: &c [{name: a, ref: registry.example/a:1}]\n  template: {spec: {containers: *c}}\n",
			want:     "document 1, line 6: *c shares &c (line 5) outside a pod spec's images",
		},
		{
			desc:     "an image volume without an image through the alias",
			paths:    []string{"Runner=spec.tools.*.ref"},
			podSpecs: []string{"example.com/Runner=spec.template.spec"},
			in:       head + "spec:\n  tools: &v [{name: a, ref: registry.example/a:1, image: {}}]\n  template: {spec: {containers: [{name: c, image: registry.example/c:1}], volumes: *v}}\n",
			want:     "document 1, line 6: *v shares &v (line 5) outside a pod spec's images",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{Resolver: newFixed()}
			for _, s := range tc.podSpecs {
				p, err := kindpath.ParsePodSpec(s)
				if err != nil {
					t.Fatal(err)
				}
				r.PodSpecPaths = append(r.PodSpecPaths, p)
			}
			for _, s := range tc.paths {
				p, err := kindpath.ParseImage(s)
				if err != nil {
					t.Fatal(err)
				}
				r.ImagePaths = append(r.ImagePaths, p)
			}
			for _, s := range tc.checksums {
				c, err := kindpath.ParseChecksum(s)
				if err != nil {
					t.Fatal(err)
				}
				r.ChecksumPaths = append(r.ChecksumPaths, c)
			}
			wantRefused(t, r, tc.in, []string{tc.want})
		})
	}
}
