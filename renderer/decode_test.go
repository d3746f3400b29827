package renderer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	k8syaml "sigs.k8s.io/yaml"
	yaml2 "sigs.k8s.io/yaml/goyaml.v2"

	"github.com/digestpin/digestpin/internal/testfiles"
	"github.com/digestpin/digestpin/kindpath"
)

// tektonTask is a Tekton Task whose first step's image field is still to
// be written (kindpath.DefaultImages).
const tektonTask = "apiVersion: tekton.dev/v1\nkind: Task\nmetadata:\n  name: t\nspec:\n  steps:\n  - name: a\n"

// dep is a Deployment with one container and image.
var dep = strings.Replace(deployment, "IMAGE", "registry.example/app:1", 1)

// ambiguousKeys are documents that the API server's decoder
// (sigs.k8s.io/yaml) could read differently from digestpin's YAML 1.2
// reading: repeated keys, merge keys that override, keys spelt with a tag
// or an alias, YAML 1.1 booleans, line breaks that split documents, and
// the error each must be refused with (substrings). FuzzRender starts from
// them too, and TestHostileFixtures keeps each in testdata/hostile for the
// API server's own reading in e2e/kube.
var ambiguousKeys = []struct {
	desc, in string
	want     []string // substrings of the error
}{
	{
		desc: "spec given twice",
		in:   dep + "spec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: registry.example/evil:1\n",
		want: []string{"document 1, line 11", "Deployment/web: spec is given twice"},
	},
	{
		desc: "template given twice",
		in:   strings.Replace(dep, "spec:\n  template:\n", "spec:\n  template:\n    spec: {containers: [{name: x, image: registry.example/evil:1}]}\n  template:\n", 1),
		want: []string{"document 1, line 8", "Deployment/web: template is given twice"},
	},
	{
		desc: "pod template metadata given twice",
		in:   strings.Replace(dep, "  template:\n", "  template:\n    metadata: {labels: {a: b}}\n    metadata: {labels: {a: c}}\n", 1),
		want: []string{"document 1, line 8", "metadata is given twice"},
	},
	{
		desc: "object metadata given twice",
		in:   strings.Replace(dep, "metadata:\n  name: web\n", "metadata:\n  name: web\nmetadata:\n  name: other\n", 1),
		want: []string{"document 1, line 5", "metadata is given twice"},
	},
	{
		desc: "kind given twice",
		in:   strings.Replace(dep, "kind: Deployment\n", "kind: ConfigMap\nkind: Deployment\n", 1),
		want: []string{"document 1, line 3", "kind is given twice"},
	},
	{
		desc: "apiVersion given twice",
		in:   "apiVersion: v1\n" + dep,
		want: []string{"document 1, line 2", "apiVersion is given twice"},
	},
	{
		desc: "name given twice",
		in:   strings.Replace(dep, "  name: web\n", "  name: web\n  name: other\n", 1),
		want: []string{"document 1, line 5", "Deployment: name is given twice"},
	},
	{
		desc: "container name given twice",
		in:   dep + "        name: other\n",
		want: []string{"document 1, line 11", `name is given twice`},
	},
	{
		desc: "checksum annotation given twice",
		in:   strings.Replace(dep, "  template:\n", "  template:\n    metadata:\n      annotations:\n        checksum/images: a\n        checksum/images: b\n", 1),
		want: []string{"document 1, line 10", "checksum/images is given twice"},
	},
	{
		desc: "initContainers given twice",
		in:   dep + "      initContainers: []\n      initContainers: [{name: i, image: registry.example/evil:1}]\n",
		want: []string{"document 1, line 12", "initContainers is given twice"},
	},
	{
		desc: "image overridden by a later merge key",
		in:   dep + "        <<: {image: registry.example/evil:1}\n",
		want: []string{"document 1, line 11", "image is both in the mapping and in a merge key (<<)"},
	},
	{
		desc: "image overriding an earlier merge key",
		in:   strings.Replace(dep, "      - name: app\n", "      - <<: {image: registry.example/evil:1}\n        name: app\n", 1),
		want: []string{"document 1, line 9", "image is both in the mapping and in a merge key (<<)"},
	},
	{
		desc: "image in two merged mappings",
		in:   strings.Replace(dep, "        image: registry.example/app:1\n", "        <<: [{image: registry.example/app:1}, {image: registry.example/evil:1}]\n", 1),
		want: []string{"document 1, line 10", "image is given twice in merge keys (<<)"},
	},
	{
		desc: "containers overridden by a merge key",
		in:   dep + "      <<: {containers: [{name: x, image: registry.example/evil:1}]}\n",
		want: []string{"document 1, line 11", "containers is both in the mapping and in a merge key (<<)"},
	},
	{
		desc: "kind spelt as !!binary",
		in:   strings.Replace(dep, "kind: Deployment", "kind: !!binary RGVwbG95bWVudA==", 1),
		want: []string{"document 1, line 2", "kind is binary RGVwbG95bWVudA==, want a string"},
	},
	{
		desc: "image key spelt as !!binary",
		in:   dep + "        !!binary aW1hZ2U=: registry.example/evil:1\n",
		want: []string{"document 1, line 11", `the key image is spelt !!binary aW1hZ2U=`},
	},
	{
		desc: "an image key spelt as !!binary in a document without the word",
		in:   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: app\n    !!binary aW1hZ2U=: registry.example/evil:1\n",
		want: []string{"document 1, line 8", `the key image is spelt !!binary aW1hZ2U=`},
	},
	{
		desc: "image key that is an alias of a binary scalar",
		in:   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations: {k: &k !!binary aW1hZ2U=}\nspec:\n  containers:\n  - name: app\n    *k : registry.example/evil:1\n",
		want: []string{"document 1, line 9", "the key image is an alias (*k) of !!binary aW1hZ2U="},
	},
	{
		desc: "spec key with a custom tag",
		in:   strings.Replace(dep, "\nspec:\n", "\n!x spec:\n", 1),
		want: []string{"document 1, line 5", "the key spec is spelt !x spec"},
	},
	{
		desc: "items given twice in a List",
		in:   "apiVersion: v1\nkind: List\nitems: []\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(dep, "\n"), "\n", "\n  ") + "\n",
		want: []string{"document 1, line 4", "List: items is given twice"},
	},
	{
		desc: "a merge key in a mapping of pod specs",
		in:   "apiVersion: example.com/v1\nkind: Worker\nmetadata: {name: w}\nspec:\n  pools:\n    <<: {b: {template: {spec: {containers: [{name: x, image: registry.example/evil:1}]}}}}\n    a: {template: {spec: {containers: [{name: app, image: registry.example/app:1}]}}}\n",
		want: []string{"document 1, line 6", "Worker/w: pools holds a merge key (<<)"},
	},
	{
		// Found by FuzzImagePaths (testdata/fuzz/FuzzImagePaths/5fa7b6fb888affd5):
		// YAML 1.1, which the API server reads, has booleans that
		// YAML 1.2 reads as strings.
		desc: "image is y, a YAML 1.1 boolean",
		in:   strings.Replace(pod, "IMAGE", "y", 1),
		want: []string{"document 1, line 8", `Pod/p container "app": image is y, which the API server reads as the boolean true: quote it ("y") if it is a reference`},
	},
	{
		desc: "image is off",
		in:   strings.Replace(pod, "IMAGE", "off", 1),
		want: []string{"line 8", "image is off, which the API server reads as the boolean false"},
	},
	{
		desc: "image is ON",
		in:   strings.Replace(pod, "IMAGE", "ON", 1),
		want: []string{"line 8", "image is ON, which the API server reads as the boolean true"},
	},
	{
		desc: "image given twice",
		in:   pod + "    image: registry.example/other:1\n",
		want: []string{"document 1, line 9", `Pod/p container "app": image is given twice`},
	},
	{
		desc: "containers given twice",
		in:   pod + "  containers: []\n",
		want: []string{"document 1, line 9", "Pod/p: containers is given twice"},
	},
	{
		desc: "documents separated by lone CR line breaks",
		in:   strings.ReplaceAll(strings.Replace(pod, "IMAGE", "registry.example/app:1", 1)+"---\n"+strings.Replace(pod, "IMAGE", "registry.example/app:2", 1), "\n", "\r"),
		want: []string{"document 1, line 9", "a second YAML document starts here"},
	},
	{
		desc: "an alias inside the node it names",
		in:   "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec: &s\n  containers:\n  - name: app\n    image: registry.example/app:1\n  loop: *s\n",
		want: []string{"document 1, line 9", "alias *s is inside the node it names"},
	},
	{
		desc: "reference given twice",
		in:   strings.Replace(volumePod, "      reference: IMAGE\n", "      reference: registry.example/data:1\n      reference: registry.example/evil:1\n", 1),
		want: []string{"line 13", `Pod/p volume "data": reference is given twice`},
	},
	{
		desc: "reference both in the mapping and in a merge key",
		in:   strings.Replace(volumePod, "      reference: IMAGE\n", "      <<: {reference: registry.example/evil:1}\n      reference: registry.example/data:1\n", 1),
		want: []string{"line 12", "reference is both in the mapping and in a merge key"},
	},
	{
		desc: "image given twice in a volume",
		in:   strings.Replace(volumePod, "    image:\n      reference: IMAGE\n      pullPolicy: IfNotPresent\n", "    image: {reference: registry.example/data:1}\n    image: {reference: registry.example/evil:1}\n", 1),
		want: []string{"line 12", "Pod/p volumes[0]: image is given twice"},
	},
	{
		desc: "volumes given twice",
		in:   strings.Replace(volumePod, "IMAGE", "registry.example/data:1", 1) + "  volumes: [{name: x, image: {reference: registry.example/evil:1}}]\n",
		want: []string{"line 14", "Pod/p: volumes is given twice"},
	},
	{
		desc: "a reference key spelt as !!binary",
		in:   strings.Replace(volumePod, "      reference: IMAGE\n", "      !!binary cmVmZXJlbmNl: registry.example/data:1\n", 1),
		want: []string{"line 12", `volume "data": the key reference is spelt !!binary`},
	},
	{
		desc: "a repeated image key",
		in:   tektonTask + "    image: registry.example/a:1\n    image: registry.example/b:1\n",
		want: []string{"document 1, line 9: Task/t field spec.steps[0].image: image is given twice"},
	},
	{
		desc: "a repeated steps key",
		in:   tektonTask + "    image: registry.example/a:1\n  steps: []\n",
		want: []string{"document 1, line 9: Task/t: steps is given twice"},
	},
	{
		desc: "an image from a merge key and the mapping",
		in:   "apiVersion: tekton.dev/v1\nkind: Task\nmetadata:\n  name: t\nbase: &b {image: registry.example/a:1}\nspec:\n  steps:\n  - <<: *b\n    image: registry.example/b:1\n",
		want: []string{"document 1, line 8: Task/t field spec.steps[0].image: image is both in the mapping and in a merge key (<<)"},
	},
	{
		desc: "steps both in the spec and in a merge key",
		in:   "apiVersion: tekton.dev/v1\nkind: Task\nmetadata:\n  name: t\nbase: &b {steps: [{image: registry.example/a:1}]}\nspec:\n  <<: *b\n  steps:\n  - image: registry.example/b:1\n",
		want: []string{"document 1, line 7: Task/t: steps is both in the mapping and in a merge key (<<)"},
	},
}

// TestAmbiguousKeysRefused renders documents that the API server's
// decoder (sigs.k8s.io/yaml) reads differently from a first-key reading:
// repeated keys, merge keys that override, and keys spelt with a tag or
// an alias, on the path from the root to an image. Each must be refused
// with one line naming the document, line and key.
func TestAmbiguousKeysRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range ambiguousKeys {
		t.Run(tc.desc, func(t *testing.T) {
			custom, _ := kindpath.ParsePodSpec("example.com/Worker=spec.pools.*.template.spec")
			r := &Renderer{Resolver: newFixed(), PodSpecPaths: append(kindpath.DefaultPodSpecs[:len(kindpath.DefaultPodSpecs):len(kindpath.DefaultPodSpecs)], custom)}
			wantRefused(t, r, tc.in, tc.want)
		})
	}
}

// TestRepeatedKeysOffThePath checks that repeated keys where no image can
// be (a ConfigMap's data, a container's env) are not digestpin's business.
func TestRepeatedKeysOffThePath(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  image: a\n  image: b\n",
		strings.Replace(deployment, "IMAGE", "registry.example/app:1", 1) + "        env: {A: 1, A: 2}\n        <<: {resources: {}}\n",
		// And with a value the parser resolves as a number, a boolean, a
		// null: the API server reads strings ("0", "true", "null").
		"apiVersion: v1\nkind: Pod\nmetadata:\n  labels: {a: ! 0, b: ! true}\n  annotations:\n    c: ! null\n    d: ! 1.5\nspec:\n  containers:\n  - name: app\n    image: \"registry.example\\x2fapp:1\"\n    args: [! 0, ! ~]\n",
	} {
		res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(in))
		if err != nil {
			t.Fatalf("Render(%q) = %v", in, err)
		}
		checkAsAPIServer(t, []byte(in), res.Bytes())
	}
}

// TestOutputAsAPIServerReadsIt checks every golden and odd input with the
// API server's decoder: see checkAsAPIServer.
func TestOutputAsAPIServerReadsIt(t *testing.T) {
	t.Parallel()
	inputs, _ := filepath.Glob("testdata/*.input.yaml")
	odd, _ := filepath.Glob("testdata/oddinput/*.input.yaml")
	for _, in := range append(inputs, odd...) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			src := testfiles.Read(t, in)
			res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), src)
			if err != nil {
				t.Fatalf("Render(%s) = %v", in, err)
			}
			checkAsAPIServer(t, src, res.Bytes())
		})
	}
}

// checkAsAPIServer decodes each document of in and out as the API server
// does (sigs.k8s.io/yaml) and checks that they are the same but for the
// image fields of pod specs and of image paths and the checksum
// annotation, that every image of out is pinned, and that each pod
// template's checksum covers exactly the images that the API server
// reads. It assumes pin mode and the default pod spec and image paths.
func checkAsAPIServer(t *testing.T, in, out []byte) {
	t.Helper()
	checkAsAPIServerWith(t, &Renderer{}, in, out)
}

// checkAsAPIServerWith is checkAsAPIServer with the image paths of r.
// With checksum paths, it drops every checksum annotation outside pod
// templates before it compares, without checking them.
func checkAsAPIServerWith(t *testing.T, r *Renderer, in, out []byte) {
	t.Helper()
	imagePaths := r.imagePaths()
	// The documents as Kubernetes' YAML reader cuts them, not as
	// digestpin does: the check must not share digestpin's splitter.
	inDocs, err := kubeDocuments(in)
	if err != nil {
		t.Fatalf("digestpin rendered a stream that Kubernetes' YAML reader refuses (%v):\n%q", err, in)
	}
	outDocs, err := kubeDocuments(out)
	if err != nil {
		t.Fatalf("digestpin wrote a stream that Kubernetes' YAML reader refuses (%v):\n%q", err, out)
	}
	if len(inDocs) != len(outDocs) {
		t.Fatalf("%d documents in, %d out", len(inDocs), len(outDocs))
	}
	for i := range inDocs {
		a, errA := apiServerReading(inDocs[i])
		b, errB := apiServerReading(outDocs[i])
		if errA != nil {
			continue // the API server refuses it anyway
		}
		if jsonKeysCollide(inDocs[i]) {
			continue // the API server has no one reading of it
		}
		if errB != nil {
			t.Fatalf("document %d: the output does not decode: %v\n%s", i+1, errB, outDocs[i])
		}
		// An image field the API server reads as anything but a string
		// (a YAML 1.1 boolean such as y) must have been refused.
		notString := func(f jsonImage) {
			if v, ok := f.get(); ok && v != nil {
				if _, ok := v.(string); !ok {
					t.Errorf("document %d: the API server reads %q as %v (%T), and digestpin pinned it\n%s", i+1, f.name, v, v, inDocs[i])
				}
			}
		}
		var inImages []string
		for _, s := range podSpecsOf(a) {
			for _, f := range imageFieldsOf(s.spec) {
				notString(f)
				img := f.text()
				inImages = append(inImages, img)
				f.drop()
			}
			dropChecksum(s.holder)
		}
		var outImages []string
		for _, s := range podSpecsOf(b) {
			var lines []string
			for _, f := range imageFieldsOf(s.spec) {
				img := f.text()
				if img != "" && !strings.Contains(img, "@sha256:") {
					t.Errorf("document %d: %q runs %q, which is not pinned\n%s", i+1, f.name, img, outDocs[i])
				}
				if img != "" {
					lines = append(lines, f.name+"="+img)
				}
				outImages = append(outImages, img)
				f.drop()
			}
			if s.holder != nil && len(lines) > 0 {
				if got, want := dropChecksum(s.holder), Checksum(lines); got != want {
					t.Errorf("document %d: checksum %q, want %q for %q\n%s", i+1, got, want, lines, outDocs[i])
				}
			} else {
				dropChecksum(s.holder)
			}
		}
		// Image fields of kindpath.DefaultImages: pinned (but for those left
		// alone: empty, or a parameter), in no checksum. A value the API
		// server reads as anything but a string is not an image there:
		// it is left alone, so the comparison below keeps it.
		isString := func(f jsonImage) bool {
			v, ok := f.get()
			_, s := v.(string)
			return !ok || v == nil || s
		}
		for _, f := range imagePathFieldsOf(a, imagePaths) {
			if !isString(f) {
				continue
			}
			img := f.text()
			if img != "" && !strings.Contains(img, "{{") && !strings.Contains(img, "$(") {
				inImages = append(inImages, img)
			}
			f.drop()
		}
		for _, f := range imagePathFieldsOf(b, imagePaths) {
			if !isString(f) {
				continue
			}
			img := f.text()
			if img != "" && !strings.Contains(img, "{{") && !strings.Contains(img, "$(") {
				if !strings.Contains(img, "@sha256:") {
					t.Errorf("document %d: image field %q holds %q, which is not pinned\n%s", i+1, f.name, img, outDocs[i])
				}
				outImages = append(outImages, img)
			}
			f.drop()
		}
		if len(inImages) != len(outImages) {
			t.Errorf("document %d: %d images in, %d out", i+1, len(inImages), len(outImages))
		} else {
			for j := range inImages {
				if want := inImages[j]; !strings.HasPrefix(outImages[j], want) {
					t.Errorf("document %d: image %q became %q", i+1, want, outImages[j])
				}
			}
		}
		if len(r.ChecksumPaths) > 0 {
			dropAllChecksums(a)
			dropAllChecksums(b)
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("document %d: the API server reads more than images changed (-in +out):\n%s", i+1, diff)
		}
	}
}

// apiServerReading decodes a document as the API server does.
func apiServerReading(doc []byte) (any, error) {
	j, err := k8syaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	var v any
	return v, json.Unmarshal(j, &v)
}

// jsonKeysCollide reports whether two keys of one mapping in doc become
// one JSON key: the integer 0 and the float 0. are both "0", true and
// "true" are both "true". sigs.k8s.io/yaml, as the API server, then keeps
// one of the two values, which one depends on Go's map order, so the
// document has no one reading to compare. digestpin reads only keys that
// are names, never numbers or booleans, so it is not at stake.
func jsonKeysCollide(doc []byte) bool {
	var v any
	if yaml2.Unmarshal(doc, &v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[any]any:
			seen := make(map[string]bool, len(v))
			for k, e := range v {
				var s string
				switch k := k.(type) {
				case string:
					s = k
				case int:
					s = strconv.Itoa(k)
				case int64:
					s = strconv.FormatInt(k, 10)
				case float64:
					// As sigs.k8s.io/yaml writes a float key: 32 bits, so
					// 0.1 and 0.10000001 are one key too.
					s = strconv.FormatFloat(k, 'g', -1, 32)
				case bool:
					s = strconv.FormatBool(k)
				default:
					continue // sigs.k8s.io/yaml refuses it
				}
				if seen[s] || walk(e) {
					return true
				}
				seen[s] = true
			}
		case []any:
			return slices.ContainsFunc(v, walk)
		}
		return false
	}
	return walk(v)
}

// jsonPodSpec is a pod spec as decoded JSON, and the template that holds
// it (nil when its checksum is not written).
type jsonPodSpec struct {
	spec, holder map[string]any
}

// podSpecsOf follows kindpath.DefaultPodSpecs through a decoded object (and the
// items of a List).
func podSpecsOf(v any) []jsonPodSpec {
	obj, _ := v.(map[string]any)
	if obj == nil {
		return nil
	}
	kind, _ := obj["kind"].(string)
	if items, ok := obj["items"].([]any); ok && strings.HasSuffix(kind, "List") {
		var out []jsonPodSpec
		for _, it := range items {
			out = append(out, podSpecsOf(it)...)
		}
		return out
	}
	apiVersion, _ := obj["apiVersion"].(string)
	var out []jsonPodSpec
	for _, p := range kindpath.DefaultPodSpecs {
		if p.Kind != kind || p.Group != apiGroup(apiVersion) {
			continue
		}
		// Follow the fields: a name into a mapping, "*" into every item of
		// a list (the pod spec paths step into lists only).
		type at struct {
			holder map[string]any // the mapping that holds n
			n      any
		}
		ats := []at{{n: obj}}
		for _, f := range p.Fields {
			var next []at
			for _, a := range ats {
				switch n := a.n.(type) {
				case map[string]any:
					if f != "*" && n[f] != nil {
						next = append(next, at{n, n[f]})
					}
				case []any:
					if f == "*" {
						for _, v := range n {
							next = append(next, at{a.holder, v})
						}
					}
				}
			}
			ats = next
		}
		for _, a := range ats {
			spec, _ := a.n.(map[string]any)
			if spec == nil {
				continue
			}
			holder := a.holder
			if p.Fields[len(p.Fields)-1] != "spec" || p.NoChecksum {
				holder = nil
			}
			out = append(out, jsonPodSpec{spec: spec, holder: holder})
		}
	}
	return out
}

// imagePathFieldsOf follows image paths through a decoded object (and
// the items of a List) to the mappings that hold image fields, each once;
// "*" steps into the items of a list and the values of a mapping, in the
// order of their keys.
func imagePathFieldsOf(v any, paths []kindpath.Image) []jsonImage {
	obj, _ := v.(map[string]any)
	if obj == nil {
		return nil
	}
	kind, _ := obj["kind"].(string)
	if items, ok := obj["items"].([]any); ok && strings.HasSuffix(kind, "List") {
		var out []jsonImage
		for _, it := range items {
			out = append(out, imagePathFieldsOf(it, paths)...)
		}
		return out
	}
	apiVersion, _ := obj["apiVersion"].(string)
	var out []jsonImage
	type field struct {
		m   uintptr // the map, by identity
		key string
	}
	seen := map[field]bool{}
	for _, p := range paths {
		if p.Kind != kind || (p.Group != "*" && p.Group != apiGroup(apiVersion)) {
			continue
		}
		at := []any{obj}
		for _, f := range p.Fields[:len(p.Fields)-1] {
			var next []any
			for _, n := range at {
				switch n := n.(type) {
				case []any:
					if f == "*" {
						next = append(next, n...)
					}
				case map[string]any:
					if sel, ok := kindpath.ParseSelector(f); ok {
						list, _ := n[sel.Field].([]any)
						for _, it := range list {
							if m, _ := it.(map[string]any); m != nil && m[sel.Key] == sel.Value {
								next = append(next, m)
							}
						}
						continue
					}
					if f != "*" {
						if n[f] != nil {
							next = append(next, n[f])
						}
						continue
					}
					for _, k := range slices.Sorted(maps.Keys(n)) {
						next = append(next, n[k])
					}
				}
			}
			at = next
		}
		key := p.Fields[len(p.Fields)-1]
		for _, n := range at {
			if m, ok := n.(map[string]any); ok {
				if sel, ok := kindpath.ParseSelector(key); ok && sel.IsFlag() {
					if list, _ := m[sel.Field].([]any); !seen[field{reflect.ValueOf(m).Pointer(), key}] {
						seen[field{reflect.ValueOf(m).Pointer(), key}] = true
						out = append(out, jsonArgs(list, sel.Value, p.String())...)
					}
					continue
				}
				if v, ok := m[key].(string); (ok && leaves(p, v)) || (hasSelector(p.Fields) && !jsonTagged(v)) {
					continue // left alone
				}
				if _, ok := m[key]; ok && !seen[field{reflect.ValueOf(m).Pointer(), key}] {
					seen[field{reflect.ValueOf(m).Pointer(), key}] = true
					out = append(out, jsonImage{name: p.String(), key: key, m: m})
				}
			}
		}
	}
	return out
}

// jsonImage is an image field of a decoded pod spec: key of mapping m,
// or item index of list after prefix (an argument "--flag=IMAGE"), used
// by name ("app", or "volume/data" for an image volume, "app/env[…]" for
// a field of a container).
type jsonImage struct {
	name, key string
	m         map[string]any
	list      []any
	index     int
	prefix    string
}

// get returns the field's value, and whether it is there.
func (f jsonImage) get() (any, bool) {
	if f.list != nil {
		return f.list[f.index], true
	}
	v, ok := f.m[f.key]
	return v, ok
}

// text returns the reference the field holds, or "".
func (f jsonImage) text() string {
	v, _ := f.get()
	s, _ := v.(string)
	return strings.TrimPrefix(s, f.prefix)
}

// drop takes the field out of the decoded document.
func (f jsonImage) drop() {
	if f.list != nil {
		f.list[f.index] = "(image)"
		return
	}
	delete(f.m, f.key)
}

// jsonArgs returns the values of flag in a decoded list of arguments, as
// fields named name: the rest of "FLAG=…" and the item after "FLAG",
// when it is a tagged reference.
func jsonArgs(list []any, flag, name string) []jsonImage {
	var out []jsonImage
	for i := 0; i < len(list); i++ {
		a, _ := list[i].(string)
		f := jsonImage{name: name, list: list, index: i, prefix: flag + "="}
		switch {
		case strings.HasPrefix(a, flag+"="):
		case a == flag && i+1 < len(list):
			i++
			f.index, f.prefix = i, ""
		default:
			continue
		}
		if v := f.text(); jsonTagged(v) {
			out = append(out, f)
		}
	}
	return out
}

// jsonTagged reports whether v is a reference with a tag or digest (the
// form kindpath.DefaultContainerImages pin), as far as a test tells.
func jsonTagged(v string) bool {
	if v == "" || strings.Contains(v, "://") || strings.ContainsAny(v[:1], "/.-$~") || strings.ContainsAny(v, " {") {
		return false
	}
	if _, err := name.ParseReference(v); err != nil {
		return false
	}
	return strings.Contains(v, "@") || strings.LastIndex(v, ":") > strings.LastIndex(v, "/")
}

// containerFieldsOf returns the fields of kindpath.DefaultContainerImages in
// decoded container m, named NAME/PATH.
func containerFieldsOf(m map[string]any, name string) []jsonImage {
	var out []jsonImage
	for _, p := range kindpath.DefaultContainerImages {
		sel, _ := kindpath.ParseSelector(p.Fields[0])
		list, _ := m[sel.Field].([]any)
		if sel.IsFlag() {
			out = append(out, jsonArgs(list, sel.Value, name+"/"+p.Fields[0])...)
			continue
		}
		for _, it := range list {
			env, _ := it.(map[string]any)
			if env["name"] == sel.Value {
				if v, _ := env["value"].(string); jsonTagged(v) {
					out = append(out, jsonImage{name: name + "/" + strings.Join(p.Fields, "."), key: "value", m: env})
				}
			}
		}
	}
	return out
}

// imageFieldsOf returns the image fields of a decoded pod spec: those of
// its containers, then those of its image volumes.
func imageFieldsOf(spec map[string]any) []jsonImage {
	var out []jsonImage
	for _, f := range containerFields {
		list, _ := spec[f].([]any)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				name, _ := m["name"].(string)
				out = append(out, jsonImage{name: name, key: "image", m: m})
				out = append(out, containerFieldsOf(m, name)...)
			}
		}
	}
	vols, _ := spec["volumes"].([]any)
	for _, v := range vols {
		vol, _ := v.(map[string]any)
		if img, ok := vol["image"].(map[string]any); ok {
			name, _ := vol["name"].(string)
			out = append(out, jsonImage{name: VolumePrefix + name, key: "reference", m: img})
		}
	}
	return out
}

// dropAllChecksums drops the checksum annotation of every mapping of a
// decoded document (see dropChecksum).
func dropAllChecksums(v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			dropAllChecksums(c)
		}
		// Null metadata is absent metadata to the API server.
		if m, ok := v["metadata"]; ok && (m == nil || reflect.TypeOf(m).Kind() == reflect.Map) {
			dropChecksum(v)
		}
	case []any:
		for _, c := range v {
			dropAllChecksums(c)
		}
	}
}

// dropChecksum removes the checksum annotation of a decoded pod template
// (and annotations or metadata left empty), and returns its value.
func dropChecksum(holder map[string]any) string {
	meta, isMap := holder["metadata"].(map[string]any)
	ann, annIsMap := meta["annotations"].(map[string]any)
	v, ok := ann[DefaultChecksumAnnotation]
	delete(ann, DefaultChecksumAnnotation)
	// Empty, null and absent metadata (and annotations) are the same to
	// the API server; other values (a number, a list) stay, so that a
	// renderer that replaced them shows.
	if len(ann) == 0 && (annIsMap || meta["annotations"] == nil) {
		delete(meta, "annotations")
	}
	if len(meta) == 0 && (isMap || holder["metadata"] == nil) {
		delete(holder, "metadata")
	}
	if !ok {
		return ""
	}
	return fmt.Sprint(v)
}

// stopAfter is a context that is done after its Err has been asked n
// times: it stops a Render in the middle of a phase.
type stopAfter struct {
	context.Context
	mu sync.Mutex
	n  int
}

func (c *stopAfter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n <= 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

// TestRenderStopsWhenCancelled checks that Render stops, with the
// context's error and no output, when its context is done while it
// parses, resolves or rewrites a stream.
func TestRenderStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, "---\n%s", strings.NewReplacer("web", fmt.Sprintf("web%d", i), "IMAGE", fmt.Sprintf("registry.example/app:%d", i%3)).Replace(deployment))
	}
	for _, tc := range []struct {
		desc, want string
		n          int
		keep       bool
	}{
		// 200 documents are 7 batches of 32 for each phase.
		{desc: "at once", n: 0, want: "rendering 200 documents"},
		{desc: "while parsing", n: 1, want: "rendering 200 documents"},
		{desc: "while resolving, keeping unresolved images", n: 7, keep: true, want: "resolving 3 images"},
		{desc: "while rewriting", n: 10, want: "rendering 200 documents"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			old := runtime.GOMAXPROCS(1) // one worker: Err is asked once a batch
			defer runtime.GOMAXPROCS(old)
			ctx := &stopAfter{Context: context.Background(), n: tc.n}
			r := &Renderer{Resolver: newFixed(), KeepUnresolved: tc.keep}
			res, err := r.Render(ctx, []byte(b.String()))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Render() = %v, want context.Canceled", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Render() = %v, want it to say %q", err, tc.want)
			}
			if res.Bytes() != nil || res.Images != nil {
				t.Errorf("Render() returned a partial result with %v", err)
			}
		})
	}
}

// TestErrorsNameTheTemplateLine checks that an error in a document from a
// Helm template names the line in the template's rendered output, counted
// from the "# Source:" comment of the first of its documents in a row.
func TestErrorsNameTheTemplateLine(t *testing.T) {
	t.Parallel()
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
	bad := strings.Replace(pod, "IMAGE", "Bad:1", 1)
	for _, tc := range []struct{ desc, in, want string }{
		{
			desc: "the first document of a template",
			in:   "---\n# Source: c/templates/a.yaml\n" + bad,
			want: "document 1 (c/templates/a.yaml), line 10 (rendered line 8 of the template): Pod/p",
		},
		{
			desc: "the second document of a template",
			in:   "---\n# Source: c/templates/a.yaml\n" + cm + "---\n# Source: c/templates/a.yaml\n" + bad,
			want: "document 2 (c/templates/a.yaml), line 16 (rendered line 14 of the template): Pod/p",
		},
		{
			desc: "the first document of the next template",
			in:   "---\n# Source: c/templates/a.yaml\n" + cm + "---\n# Source: c/templates/b.yaml\n" + bad,
			want: "document 2 (c/templates/b.yaml), line 16 (rendered line 8 of the template): Pod/p",
		},
		{
			desc: "no template",
			in:   cm + "---\n" + bad,
			want: "document 2, line 13: Pod/p",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Render() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestEncoderKeepsFlowNulls checks that a document the encoder writes
// keeps the empty nulls of flow collections ("{a, b: c}") null: written
// as quoted empty strings they would be strings to the API server. (Found by
// FuzzRender's API server check: testdata/fuzz/FuzzRender/28bf4a156dd16d80.)
func TestEncoderKeepsFlowNulls(t *testing.T) {
	t.Parallel()
	in := "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {a, ? b}}\nspec: {containers: [{name: app, image: registry.example/app:1, stdin}]}\n"
	res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(in))
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	if strings.Contains(string(res.Bytes()), "''") {
		t.Errorf("Render() wrote an empty string for a null:\n%s", res.Bytes())
	}
	checkAsAPIServer(t, []byte(in), res.Bytes())
}

// TestEmptyNonSpecificTag checks that a document written again keeps the
// strings that it tags "!", empty or not: the API server's decoder reads them
// as strings, the parser as null or a number. (Found by FuzzImagePaths.)
func TestEmptyNonSpecificTag(t *testing.T) {
	t.Parallel()
	// The escaped image makes the renderer encode the document again.
	for _, in := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: !\nspec:\n  containers:\n  - name: app\n    image: \"registry.example\\x2fapp:1\"\n    args:\n    - ! x\n    - !\n    workingDir: !\n    command:\n    - !\n    - ''\n",
		// In flow collections too, as keys and values: the empty nulls
		// there are spelt "null", but not these ({! } is {"": null}).
		"apiVersion: v1\nkind: Pod\nmetadata:\n  labels: {! }\n  annotations: {a: ! }\nspec:\n  containers:\n  - name: app\n    image: \"registry.example\\x2fapp:1\"\n    args: [! , ! x, '']\n",
		// YAML 1.1's booleans, which the API server reads: a string
		// here, as written (found by FuzzImagePaths).
		"apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    a: ! Y\n    b: ! on\n    c: ! no\nspec:\n  containers:\n  - name: app\n    image: \"registry.example\\x2fapp:1\"\n    args: [! y, ! Off, ! 0x1F, ! 1_000]\n",
	} {
		res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(in))
		if err != nil {
			t.Fatalf("Render() = %v", err)
		}
		if !strings.Contains(string(res.Bytes()), "@sha256:") {
			t.Fatalf("Render() pinned nothing:\n%s", res.Bytes())
		}
		checkAsAPIServer(t, []byte(in), res.Bytes())
	}
}

// TestNonSpecificMetadataRefused: metadata or annotations written "!" are
// the string "" to the API server, not the null the parser reads, so the
// checksum annotation has nowhere to go: an error, not a replaced value
// (found by FuzzImagePaths).
func TestNonSpecificMetadataRefused(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    metadata: !\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    metadata:\n      annotations: !\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1\n",
	} {
		res, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(in))
		if err == nil || !strings.Contains(err.Error(), `is the string "" (tagged "!"), want a mapping`) || res.Bytes() != nil {
			t.Errorf("Render(%q) = %v, want the mapping refused", in, err)
		}
	}
	// A null is made the mapping, as before.
	in := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    metadata:\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app:1\n"
	if _, err := (&Renderer{Resolver: newFixed()}).Render(context.Background(), []byte(in)); err != nil {
		t.Errorf("Render() of a null metadata = %v", err)
	}
}

// TestOwnTagInFlagRefused: a flag, or its value, or an env var's value at
// an image path, under a tag of the
// chart's own ("!x --tool-image") is the plain string to the API server
// but a value of that tag to the parser: refused, never left unpinned
// (found by FuzzImagePaths). An unrelated tagged argument is left alone.
func TestOwnTagInFlagRefused(t *testing.T) {
	t.Parallel()
	r := &Renderer{Resolver: newFixed(), ImagePaths: fuzzImagePaths, ChecksumPaths: fuzzChecksumPaths}
	for _, args := range []string{"[!x --tool-image, 'registry.example/a:1']", "[--tool-image, !x 'registry.example/a:1']", "[!x --tool-image=registry.example/a:1]"} {
		in := "apiVersion: example.com/v1\nkind: Runner\nspec:\n  jobs:\n  - args: " + args + "\n"
		res, err := r.Render(context.Background(), []byte(in))
		if err == nil || !strings.Contains(err.Error(), "document 1, line 5: ") || !strings.Contains(err.Error(), "is tagged !x") || res.Bytes() != nil {
			t.Errorf("Render(args %s) = %v, want the tagged argument refused", args, err)
		}
	}
	// And an env var's value at an image path.
	in := "apiVersion: example.com/v1\nkind: Runner\nspec:\n  env:\n  - name: RUNNER_IMAGE\n    value: !x registry.example/r:1\n"
	if res, err := r.Render(context.Background(), []byte(in)); err == nil || !strings.Contains(err.Error(), "value is tagged !x") || res.Bytes() != nil {
		t.Errorf("Render(env) = %v, want the tagged value refused", err)
	}
	in = "apiVersion: example.com/v1\nkind: Runner\nspec:\n  jobs:\n  - args: [!x other, --tool-image, registry.example/a:1]\n"
	res, err := r.Render(context.Background(), []byte(in))
	if err != nil || !strings.Contains(string(res.Bytes()), "@sha256:") {
		t.Errorf("Render() = %v, %s; want the flag's value pinned", err, res.Bytes())
	}
}
