package renderer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/renderer/stream"
	"github.com/digestpin/digestpin/resolution"
)

// addSeeds adds the golden inputs and a few small streams to a fuzz
// corpus (testdata/fuzz/ holds the crashers found so far).
func addSeeds(f *testing.F) {
	f.Helper()
	inputs, _ := filepath.Glob("testdata/*.input.yaml")
	odd, _ := filepath.Glob("testdata/oddinput/*.input.yaml")
	inputs = append(inputs, odd...)
	for _, p := range inputs {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"",
		"---\n",
		strings.Replace(deployment, "IMAGE", "nginx:1", 1),
		"\xef\xbb\xbf" + strings.Replace(deployment, "IMAGE", "nginx:1", 1),
		strings.ReplaceAll(strings.Replace(deployment, "IMAGE", "nginx:1", 1), "\n", "\r\n"),
		"apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: nginx}]}\n...\nkind: Pod\n",
		"kind: List\nitems:\n- kind: List\n  items:\n  - apiVersion: v1\n    kind: Pod\n    spec:\n      containers:\n      - {name: a, image: 'a:1'}\n",
		"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - &c {name: a, image: &i x:1}\n  - *c\n  initContainers:\n  - name: b\n    image: *i\n",
		// A "---" line that carries content, which Kubernetes' YAML
		// reader refuses, and one that it takes for a separator though
		// a YAML parser reads a key.
		"apiVersion: v1\nkind: ConfigMap\n--- {\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"spec\": {\"containers\": [{\"name\": \"a\", \"image\": \"a:1\"}]}}\n",
		"apiVersion: v1\nkind: ConfigMap\n--- !!map\n" + strings.Replace(pod, "IMAGE", "a:1", 1),
		configMapDashKey,
		// Image volumes: beside a container of the same name, and shared
		// through an anchor.
		strings.Replace(volumePod, "IMAGE", "a:1", 1),
		"apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: a, image: &r a:1}]\n  volumes:\n  - {name: a, image: &i {reference: *r}}\n  - {name: b, image: *i}\n",
	} {
		f.Add([]byte(s))
	}
	// JSON documents written in the ways JSON allows: escapes, a byte
	// order mark, null metadata, an existing checksum, huge numbers.
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","im\u0061ge":"registry.example/app:1"}]}}`,
		"\ufeff" + `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":1E2,"x":12345678901234567890123456789,"template":{"metadata":null,"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","spec":{"template":{"metadata":{"annotations":{"checksum\u002fimages":"old"}},"spec":{"containers":[{"name":"app","image":"registry.example/app:1"}]}}}}`,
		`{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"app","image":"registry.example\/app:1","args":["\ud83d\ude00"]}]}}`,
		`{"apiVersion": "tekton.dev/v1", "kind": "Task", "spec": {"steps": {"a": {"image": "registry.example/app:1"}}}}`,
	} {
		f.Add([]byte(s))
	}
	// Every ambiguous key and every sharing through anchors that the
	// table tests refuse or write out.
	for _, tc := range ambiguousKeys {
		f.Add([]byte(tc.in))
	}
	// Lines that start with "---", and what other readers take for the
	// end of a document.
	for _, tc := range separatorCases {
		f.Add([]byte(tc.in))
	}
	for _, tc := range sharedNodes {
		f.Add([]byte(tc.in))
	}
}

// FuzzRender renders arbitrary streams. Whatever the input, Render must
// not panic (stream.FuzzSplitStream holds the node estimate to the
// nodes of each document); when it succeeds, every document it wrote must parse (one YAML
// document, a mapping or empty, as stream.ParseFull reads it), it must be a
// fixed point, documents without an image must be unchanged, JSON
// documents must stay JSON, and the API
// server must read input and output alike but for pinned images and
// checksums that cover them (checkAsAPIServer).
func FuzzRender(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		t.Parallel() // the seed corpus in parallel (no effect when fuzzing)
		r := &Renderer{Resolver: newFixed()}
		res, err := r.Render(context.Background(), in)
		if err != nil {
			if res.Bytes() != nil {
				t.Fatalf("Render() returned output with error %v", err)
			}
			return
		}
		out := res.Bytes()
		checkWriteTo(t, res, out)
		docs := mustSplit(t, out)
		// Every document, with an image or without: Render refuses one
		// that Kubernetes could not read. The parser reads what
		// Kubernetes' YAML reader hands it: the document without the
		// separator it dropped.
		for _, d := range docs {
			dec := yaml.NewDecoder(bytes.NewReader(d.Raw[d.Sep:]))
			var root yaml.Node
			err := dec.Decode(&root)
			if errors.Is(err, io.EOF) {
				continue
			}
			if err == nil {
				if err = dec.Decode(new(yaml.Node)); errors.Is(err, io.EOF) {
					err = nil
				}
			}
			if err != nil {
				t.Fatalf("output document %d does not parse: %v\n%q", d.Index, err, d.Raw)
			}
			if obj := root.Content[0]; obj.Kind != yaml.MappingNode && obj.Tag != "!!null" {
				t.Fatalf("output document %d is %s, not an object\n%q", d.Index, stream.KindName(obj), d.Raw)
			}
		}
		again, err := r.Render(context.Background(), out)
		if err != nil {
			t.Fatalf("Render(output) = %v\ninput:\n%q\noutput:\n%q", err, in, out)
		}
		if !bytes.Equal(again.Bytes(), out) {
			t.Fatalf("Render is not idempotent\ninput:\n%q\nfirst:\n%q\nsecond:\n%q", in, out, again.Bytes())
		}
		inDocs := mustSplit(t, in)
		if len(inDocs) == len(docs) {
			for i, d := range inDocs {
				if !mayHoldImage(d.Raw, r.imageKeys()) && !bytes.Equal(d.Raw, docs[i].Raw) {
					t.Fatalf("document %d without image changed: %q → %q", i+1, d.Raw, docs[i].Raw)
				}
				if stream.JSONStart(d.Body()) >= 0 && stream.JSONStart(docs[i].Body()) < 0 {
					t.Fatalf("JSON document %d is no longer JSON: %q → %q", i+1, d.Raw, docs[i].Raw)
				}
			}
		} else {
			t.Fatalf("Render changed the number of documents: %d → %d", len(inDocs), len(docs))
		}
		checkAsAPIServer(t, in, out)
	})
}

// fuzzImagePaths and fuzzChecksumPaths are what FuzzImagePaths renders
// with: two image paths that reach the same fields, one that reaches a
// field on the object, and checksum paths on the object and each job.
var (
	fuzzImagePaths = []kindpath.Image{
		{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*", "tool"}},
		{Group: "example.com", Kind: "Runner", Fields: []string{"spec", "*", "*", "tool"}},
		{Group: "*", Kind: "Runner", Fields: []string{"spec", "runnerRef"}},
		{Group: "apps", Kind: "Deployment", Fields: []string{"spec", "template", "spec", "containers", "*", "image"}},
		// Selectors: an env var by name, a flag in both forms, one that
		// reaches a field of kindpath.DefaultContainerImages too.
		{Group: "*", Kind: "Runner", Fields: []string{"spec", "env[name=RUNNER_IMAGE]", "value"}},
		{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*", "args[flag=--tool-image]"}},
		{Group: "apps", Kind: "Deployment", Fields: []string{"spec", "template", "spec", "containers", "*", "args[flag=--collector-image]"}},
	}
	fuzzChecksumPaths = []kindpath.Checksum{
		{Group: "*", Kind: "Runner"},
		{Group: "*", Kind: "Runner", Fields: []string{"spec", "jobs", "*"}},
	}
)

// FuzzImagePaths renders arbitrary streams with image paths and checksum
// paths. Render must not panic; when it succeeds, its output must render
// to itself, JSON documents must stay JSON, and the API server must read
// input and output alike but for pinned image fields (every one that the
// paths reach) and checksums.
func FuzzImagePaths(f *testing.F) {
	f.Add([]byte(runner))
	f.Add([]byte(strings.Replace(deployment, "IMAGE", "registry.example/app:1", 1)))
	for _, s := range []string{
		`{"apiVersion": "example.com/v1", "kind": "Runner", "metadata": {"name": "r"}, "spec": {"runnerRef": "registry.example/r:1", "jobs": [{"tool": "registry.example/a:1"}, {"metadata": null, "tool": "registry.example/b:1"}]}}`,
		"\ufeff{\n  \"apiVersion\": \"example.com/v1\",\n  \"kind\": \"Runner\",\n  \"spec\": {\"jobs\": {\"x\": {\"tool\": \"registry.example/a:1\"}}}\n}\n",
		"apiVersion: example.com/v1\nkind: Runner\nmetadata: {name: r, annotations: {checksum/images: old}}\nspec:\n  jobs:\n  - &j {tool: registry.example/a:1}\n  - *j\n  other: [{tool: registry.example/b:1}]\n",
		"apiVersion: example.com/v1\nkind: Runner\nspec:\n  jobs: [{tool: registry.example/a:1}]\n  runnerRef: [registry.example/b:1]\n",
		"apiVersion: example.com/v1\nkind: Runner\nspec:\n  jobs: x\n",
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: example.com/v1\n  kind: Runner\n  spec: {jobs: [{tool: 'registry.example/a:1'}]}\n",
		// Selectors.
		"apiVersion: example.com/v1\nkind: Runner\nmetadata: {name: r}\nspec:\n  env:\n  - {name: RUNNER_IMAGE, value: registry.example/r:1}\n  - name: RUNNER_IMAGE\n    value: https://x/y:1\n  jobs:\n  - args: [--tool-image=registry.example/a:1, --tool-image, 'registry.example/b:1', --tool-image]\n",
		"apiVersion: example.com/v1\nkind: Runner\nspec:\n  env: &e\n  - name: RUNNER_IMAGE\n    value: &v registry.example/r:1\n  jobs:\n  - args: [--tool-image, *v]\n  other: *e\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: registry.example/c:1\n        args: [\"--collector-image=registry.example/col:1\", --prometheus-config-reloader, registry.example/rel:1]\n        command: [--engine-image=registry.example/e:1]\n        env:\n        - {name: AGENT_IMAGE, value: registry.example/a:1}\n        - {name: AGENT_IMAGE, value: registry.example/a:1, value: registry.example/b:1}\n",
		"apiVersion: example.com/v1\nkind: Runner\nspec:\n  env:\n  - name: RUNNER_IMAGE\n    <<: {value: registry.example/r:1}\n  - name: !!binary UlVOTkVSX0lNQUdF\n    value: registry.example/r:1\n",
		// A checksum path through an alias to a mapping without image
		// fields: pinning the env var would change the jobs too.
		"apiVersion: example.com/v1\nkind: Runner\nmetadata: {name: r}\nspec: {env: &e [{name: RUNNER_IMAGE, value: registry.example/a:1}], jobs: *e}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := &Renderer{Resolver: newFixed(), ImagePaths: fuzzImagePaths, ChecksumPaths: fuzzChecksumPaths}
		res, err := r.Render(context.Background(), in)
		if err != nil {
			if res.Bytes() != nil {
				t.Fatalf("Render() returned output with error %v", err)
			}
			return
		}
		again, err := r.Render(context.Background(), res.Bytes())
		if err != nil {
			t.Fatalf("Render(output) = %v\ninput:\n%q\noutput:\n%q", err, in, res.Bytes())
		}
		if !bytes.Equal(again.Bytes(), res.Bytes()) {
			t.Fatalf("Render is not idempotent\ninput:\n%q\nfirst:\n%q\nsecond:\n%q", in, res.Bytes(), again.Bytes())
		}
		inDocs, outDocs := mustSplit(t, in), mustSplit(t, res.Bytes())
		if len(inDocs) != len(outDocs) {
			t.Fatalf("Render changed the number of documents: %d → %d", len(inDocs), len(outDocs))
		}
		for i, d := range inDocs {
			if stream.JSONStart(d.Body()) >= 0 && stream.JSONStart(outDocs[i].Body()) < 0 {
				t.Fatalf("JSON document %d is no longer JSON: %q → %q", i+1, d.Raw, outDocs[i].Raw)
			}
		}
		checkAsAPIServerWith(t, r, in, res.Bytes())
	})
}

// FuzzPinnedForm checks that every form of a valid reference is a valid
// reference to the same repository with the digest, and a fixed point.
func FuzzPinnedForm(f *testing.F) {
	for _, s := range []string{"nginx", "nginx:1", "localhost:5000/a/b:c", "ghcr.io/x/y@" + dg("z"), "a:1@" + dg("z")} {
		f.Add(s)
	}
	digest := dg("fuzz")
	f.Fuzz(func(t *testing.T, image string) {
		ref, err := name.ParseReference(image)
		if err != nil {
			return
		}
		for _, m := range []Mode{ModePin, ModeDigest} {
			got := pinnedForm(image, digest, m)
			pinned, err := name.ParseReference(got)
			if err != nil {
				t.Fatalf("pinnedForm(%q, %s) = %q, which does not parse: %v", image, m, got, err)
			}
			if pinned.Context().Name() != ref.Context().Name() {
				t.Fatalf("pinnedForm(%q, %s) = %q names %s, want %s", image, m, got, pinned.Context(), ref.Context())
			}
			if again := pinnedForm(got, digest, m); again != got {
				t.Fatalf("pinnedForm is not a fixed point: %q → %q → %q", image, got, again)
			}
		}
	})
}

// FuzzEmbedded renders arbitrary ConfigMaps whose data.x an image path
// with "|" reaches into (spec.image and items.*.image of the document
// the string holds). Render must not panic; when it succeeds, the
// output is the input with its images pinned and nothing else changed,
// each pinned reference is the value of an image field that a path names
// (the output's text, read again, holds it there), and the output
// renders to itself. The seed f99f7278089b50e8 is an image without a
// tag, pinned as ":latest@…".
func FuzzEmbedded(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: ConfigMap\ndata:\n  x: |\n    spec:\n      image: registry.example/a:1 # c\n    items: [{image: 'registry.example/b:1'}, {image: \"registry.example/c:1\"}]\n",
		"apiVersion: v1\r\nkind: ConfigMap\r\ndata:\r\n  x: |2-\r\n      spec: {image: registry.example/a:1}\r\n",
		"apiVersion: v1\nkind: ConfigMap\ndata:\n  x: >\n    spec:\n      image: registry.example/a:1\n",
		"apiVersion: v1\nkind: ConfigMap\ndata:\n  x: |\n    {\"spec\": {\"image\": \"registry.example/a:1\"}}\n    ---\n    spec:\n      image: &a registry.example/b:1\n",
		"apiVersion: v1\nkind: ConfigMap\ndata:\n  x: \"spec:\\n  image: registry.example/a:1\\n\"\n",
		"apiVersion: v1\nkind: ConfigMap\ndata:\n  x: |+\n    # é\n\n    spec:\n      image: \"registry.example/a\\x3a1\"\n\n",
	} {
		f.Add([]byte(s))
	}
	var paths []kindpath.Image
	for _, s := range []string{"ConfigMap=data.x|spec.image", "ConfigMap=data.x|items.*.image"} {
		p, err := kindpath.ParseImage(s)
		if err != nil {
			f.Fatal(err)
		}
		paths = append(paths, p)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := &Renderer{Resolver: newFixed(), ImagePaths: paths}
		res, err := r.Render(context.Background(), in)
		if err != nil {
			return
		}
		// The input, with digests added and nothing else.
		back := string(res.Bytes())
		var pinned []string
		for _, im := range res.Images {
			if im.Source == resolution.Pinned {
				continue
			}
			p := pinnedForm(im.Written, im.Digest, ModePin)
			back = strings.ReplaceAll(back, p, im.Written)
			pinned = append(pinned, p)
		}
		if back != string(in) {
			t.Fatalf("Render changed more than the image values\ninput:\n%q\noutput:\n%q", in, res.Bytes())
		}
		// Each pinned reference is the value of a field a path names.
		if len(pinned) > 0 {
			var doc yaml.Node
			if err := yaml.Unmarshal(res.Bytes(), &doc); err != nil {
				t.Fatalf("the output does not parse: %v\n%q", err, res.Bytes())
			}
			text := lookup(&doc, "data", "x")
			if text == nil {
				t.Fatalf("the output has no data.x:\n%q", res.Bytes())
			}
			roots, err := stream.ParseText(text.Value, maxEmbeddedNodes)
			if err != nil {
				t.Fatalf("the output's text does not parse: %v\n%q", err, text.Value)
			}
			found := map[string]bool{}
			for _, root := range roots {
				if v := lookup(root, "spec", "image"); v != nil {
					found[v.Value] = true
				}
				if items := lookup(root, "items"); items != nil && items.Kind == yaml.SequenceNode {
					for _, it := range items.Content {
						if v := lookup(it, "image"); v != nil {
							found[v.Value] = true
						}
					}
				}
			}
			for _, p := range pinned {
				if !found[p] {
					t.Fatalf("%s is the value of no field the paths name in the output's text:\n%q", p, text.Value)
				}
			}
		}
		again, err := r.Render(context.Background(), res.Bytes())
		if err != nil {
			t.Fatalf("Render(output) = %v\ninput:\n%q\noutput:\n%q", err, in, res.Bytes())
		}
		if !bytes.Equal(again.Bytes(), res.Bytes()) {
			t.Fatalf("Render is not idempotent\ninput:\n%q\nfirst:\n%q\nsecond:\n%q", in, res.Bytes(), again.Bytes())
		}
	})
}

// lookup follows keys from node n (a document, or a mapping), aliases
// followed; nil when one is missing.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		n = stream.Deref(n)
		if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
			n = stream.Deref(n.Content[0])
		}
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return stream.Deref(n)
}
