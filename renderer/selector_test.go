package renderer

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/digestpin/digestpin/kindpath"
)

// mustImagePaths parses image paths for a test, after the defaults.
func mustImagePaths(t *testing.T, specs ...string) []kindpath.Image {
	t.Helper()
	paths := slices.Clone(kindpath.DefaultImages)
	for _, s := range specs {
		p, err := kindpath.ParseImage(s)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// TestImagePathSelectors renders image paths with selectors: env vars by
// name and flags in both forms are pinned, in the report by their path;
// what does not read as a reference is left alone.
func TestImagePathSelectors(t *testing.T) {
	t.Parallel()
	const runner = "apiVersion: example.com/v1\nkind: Runner\nmetadata:\n  name: r\nspec:\n"
	pin := func(ref string) string { return ref + "@" + dg(ref) }
	for _, tc := range []struct {
		desc      string
		paths     []string
		checksum  []kindpath.Checksum
		in, want  string
		workloads []Workload
	}{
		{
			desc:      "an env var by name",
			paths:     []string{"Runner=spec.env[name=RUNNER_IMAGE].value"},
			in:        runner + "  env:\n  - name: OTHER\n    value: registry.example/other:1\n  - name: RUNNER_IMAGE\n    value: registry.example/runner:1\n",
			want:      runner + "  env:\n  - name: OTHER\n    value: registry.example/other:1\n  - name: RUNNER_IMAGE\n    value: " + pin("registry.example/runner:1") + "\n",
			workloads: []Workload{{Kind: "Runner", Name: "r", Container: "field/spec.env[name=RUNNER_IMAGE].value"}},
		},
		{
			desc:  "a flag's value in both forms, and a flag at the end without one",
			paths: []string{"Runner=spec.args[flag=--tool-image]"},
			in:    runner + "  args:\n  - --tool-image=registry.example/a:1\n  - --verbose\n  - --tool-image\n  - 'registry.example/b:2'\n  - --tool-image\n",
			want:  runner + "  args:\n  - --tool-image=" + pin("registry.example/a:1") + "\n  - --verbose\n  - --tool-image\n  - '" + pin("registry.example/b:2") + "'\n  - --tool-image\n",
			workloads: []Workload{
				{Kind: "Runner", Name: "r", Container: "field/spec.args[flag=--tool-image]"},
				{Kind: "Runner", Name: "r", Container: "field/spec.args[flag=--tool-image]"},
			},
		},
		{
			desc:     "a flag in a flow sequence, with its checksum on the object",
			paths:    []string{"Runner=spec.args[flag=--tool-image]"},
			checksum: []kindpath.Checksum{{Group: "*", Kind: "Runner"}},
			in:       runner + "  args: [--tool-image=registry.example/a:1, --x]\n",
			want: "apiVersion: example.com/v1\nkind: Runner\nmetadata:\n  name: r\n  annotations:\n    checksum/images: '" +
				Checksum([]string{"field/spec.args[flag=--tool-image]=" + pin("registry.example/a:1")}) + "'\nspec:\n  args: [--tool-image=" + pin("registry.example/a:1") + ", --x]\n",
			workloads: []Workload{{Kind: "Runner", Name: "r", Container: "field/spec.args[flag=--tool-image]"}},
		},
		{
			desc:  "items selected by a key in a list of containers",
			paths: []string{"Runner=spec.containers[name=main].image"},
			in:    runner + "  containers:\n  - name: main\n    image: registry.example/main:1\n  - name: side\n    image: registry.example/side:1\n",
			want:  runner + "  containers:\n  - name: main\n    image: " + pin("registry.example/main:1") + "\n  - name: side\n    image: registry.example/side:1\n",
			workloads: []Workload{
				{Kind: "Runner", Name: "r", Container: "field/spec.containers[name=main].image"},
			},
		},
		{
			desc:  "values that are no references: a URL, paths, placeholders, a number, a boolean, a mapping, words",
			paths: []string{"Runner=spec.env[name=IMAGE].value", "Runner=spec.args[flag=--image]"},
			in: runner + "  env:\n  - name: IMAGE\n    value: https://images.example/app:1\n  - name: IMAGE\n    value: /opt/images/app:1\n" +
				"  - name: IMAGE\n    value: ./app:1\n  - name: IMAGE\n    value: $(APP_IMAGE)\n  - name: IMAGE\n    value: '{{ .image }}'\n" +
				"  - name: IMAGE\n    value: 5\n  - name: IMAGE\n    value: yes\n  - name: IMAGE\n    value: {a: b}\n  - name: IMAGE\n    value: two words\n" +
				"  - name: IMAGE\n    valueFrom: {configMapKeyRef: {name: c, key: k}}\n  - name: 5\n    value: registry.example/a:1\n" +
				"  - name: IMAGE\n    value: registry.example/untagged\n" +
				"  args: [--image=http://x/y:1, --image, --next, --image=, --image=~/img:1, --image=registry.example/untagged]\n",
		},
		{
			desc:  "a selector on a field that is not a list",
			paths: []string{"Runner=spec.env[name=IMAGE].value", "Runner=spec.args[flag=--image]"},
			in:    runner + "  env: {name: IMAGE, value: registry.example/a:1}\n  args: --image=registry.example/a:1\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &Renderer{Resolver: newFixed(), ImagePaths: mustImagePaths(t, tc.paths...), ChecksumPaths: tc.checksum}
			res, err := r.Render(context.Background(), []byte(tc.in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if diff := cmp.Diff(want, string(res.Bytes())); diff != "" {
				t.Errorf("Render() (-want +got):\n%s", diff)
			}
			var got []Workload
			for _, img := range res.Images {
				got = append(got, img.Workloads...)
			}
			if diff := cmp.Diff(tc.workloads, got); diff != "" {
				t.Errorf("Render() workloads (-want +got):\n%s", diff)
			}
			checkAsAPIServerWith(t, r, []byte(tc.in), res.Bytes())
		})
	}
}

// TestContainerImagePaths checks the images in a container's args and
// env: pinned, in the pod template's checksum as NAME/FIELD lines,
// reported as the container's field, once when an image path reaches
// the same field, and shared pod specs counted for each workload.
func TestContainerImagePaths(t *testing.T) {
	t.Parallel()
	in := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\nspec:\n  template:\n    spec:\n      containers:\n      - name: manager\n        image: registry.example/op:1\n" +
		"        args: [--collector-image=registry.example/col:1]\n        env:\n        - name: AGENT_IMAGE\n          value: registry.example/agent:2\n"
	r := &Renderer{Resolver: newFixed(), ImagePaths: mustImagePaths(t, "Deployment=spec.template.spec.containers.*.env[name=AGENT_IMAGE].value")}
	res, err := r.Render(context.Background(), []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	pin := func(ref string) string { return ref + "@" + dg(ref) }
	sum := Checksum([]string{
		"manager=" + pin("registry.example/op:1"),
		"manager/args[flag=--collector-image]=" + pin("registry.example/col:1"),
		"manager/env[name=AGENT_IMAGE].value=" + pin("registry.example/agent:2"),
	})
	want := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\nspec:\n  template:\n    metadata:\n      annotations:\n        checksum/images: '" + sum + "'\n    spec:\n      containers:\n      - name: manager\n        image: " + pin("registry.example/op:1") + "\n" +
		"        args: [--collector-image=" + pin("registry.example/col:1") + "]\n        env:\n        - name: AGENT_IMAGE\n          value: " + pin("registry.example/agent:2") + "\n"
	if diff := cmp.Diff(want, string(res.Bytes())); diff != "" {
		t.Errorf("Render() (-want +got):\n%s", diff)
	}
	got := map[string][]Workload{}
	for _, img := range res.Images {
		got[img.Written] = img.Workloads
	}
	wantW := map[string][]Workload{
		"registry.example/op:1":    {{Kind: "Deployment", Name: "op", Container: "manager"}},
		"registry.example/col:1":   {{Kind: "Deployment", Name: "op", Container: "manager", Field: "args[flag=--collector-image]"}},
		"registry.example/agent:2": {{Kind: "Deployment", Name: "op", Container: "manager", Field: "env[name=AGENT_IMAGE].value"}},
	}
	if diff := cmp.Diff(wantW, got); diff != "" {
		t.Errorf("Render() workloads (-want +got):\n%s", diff)
	}
	if s := (Workload{Kind: "Deployment", Namespace: "ns", Name: "op", Container: "manager", Field: "env[name=AGENT_IMAGE].value"}).String(); s != `Deployment/ns/op container "manager" field env[name=AGENT_IMAGE].value` {
		t.Errorf("Workload.String() = %s", s)
	}

	// A List of two Deployments sharing one pod spec: each uses the
	// arg's image.
	list := "apiVersion: v1\nkind: List\nitems:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: a}\n  spec:\n    template:\n      spec: &s\n        containers:\n        - name: m\n          image: registry.example/op:1\n          args: [--collector-image, registry.example/col:1]\n" +
		"- apiVersion: apps/v1\n  kind: Deployment\n  metadata: {name: b}\n  spec:\n    template:\n      spec: *s\n"
	res, err = (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(list))
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range res.Images {
		if img.Written == "registry.example/col:1" && len(img.Workloads) != 2 {
			t.Errorf("Render() reports %s used by %v, want both Deployments", img.Written, img.Workloads)
		}
	}
	if !strings.Contains(string(res.Bytes()), "registry.example/col:1@sha256:") {
		t.Errorf("Render() left the shared arg unpinned:\n%s", res.Bytes())
	}
}

// TestSelectorSharedOffTheWay renders a list that an env selector pins
// and that an alias shares at a place where a "*" path finds no image
// field: pinning would change that place too, so it is refused, not
// passed off as on the way to images because the "*" walk went by.
func TestSelectorSharedOffTheWay(t *testing.T) {
	t.Parallel()
	in := "apiVersion: example.com/v1\nkind: Runner\nspec:\n  env: &e\n  - name: RUNNER_IMAGE\n    value: registry.example/r:1\n  other: *e\n"
	r := &Renderer{Resolver: newFixed(), ImagePaths: mustImagePaths(t, "Runner=spec.env[name=RUNNER_IMAGE].value", "Runner=spec.*.*.tool")}
	_, err := r.Render(context.Background(), []byte(in))
	if err == nil || !strings.Contains(err.Error(), "*e shares &e (line 4) outside a pod spec's images") {
		t.Fatalf("Render() = %v, want the alias refused", err)
	}
}
