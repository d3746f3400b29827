package renderer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEmbedded lists the tagged image references inside strings that
// hold a YAML or JSON document, never rewrites them, and lists nothing
// for prose, pinned or untagged references, or text the guards refuse.
func TestEmbedded(t *testing.T) {
	t.Parallel()
	const pinned = "@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	cm := func(key, text string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: ns\ndata:\n  " + key + ": |\n    " + strings.ReplaceAll(strings.TrimSuffix(text, "\n"), "\n", "\n    ") + "\n"
	}
	field := func(outer, inner string) Workload {
		return Workload{Kind: "ConfigMap", Namespace: "ns", Name: "cm", Container: FieldPrefix + outer, Field: EmbeddedPrefix + inner}
	}
	const pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {image: registry.example/l:1}\nspec:\n  initContainers:\n  - name: i\n    image: registry.example/init:1\n  containers:\n  - name: c\n    image: %s\n    imagePullPolicy: IfNotPresent\n"
	bomb := "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
	for _, c := range "bcdefghij" {
		prev := string(c - 1)
		bomb += string(c) + ": &" + string(c) + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
	}
	for _, tc := range []struct {
		desc string
		in   string
		want []Unpinned
	}{
		{
			desc: "a Pod manifest in a ConfigMap",
			in:   cm("policy-server.yaml", strings.Replace(pod, "%s", "ghcr.io/kubewarden/policy-server:v1.20.0", 1)),
			want: []Unpinned{
				{Reference: "registry.example/init:1", Workload: field(`data["policy-server.yaml"]`, "spec.initContainers[0].image")},
				{Reference: "ghcr.io/kubewarden/policy-server:v1.20.0", Workload: field(`data["policy-server.yaml"]`, "spec.containers[0].image")},
			},
		},
		{
			desc: "the same with digests",
			in:   cm("policy-server.yaml", strings.Replace(strings.Replace(pod, "%s", "ghcr.io/kubewarden/policy-server:v1.20.0"+pinned, 1), "init:1", "init:1"+pinned, 1)),
		},
		{
			desc: "a custom resource and a config of several documents, any key that says image",
			in:   cm("config", "apiVersion: policies.kubewarden.io/v1\nkind: PolicyServer\nmetadata:\n  name: default\nspec:\n  image: ghcr.io/kubewarden/policy-server:v1.20.0\n---\nsidecarImage: registry.example/side:2\nimages: [registry.example/a:1, registry.example/b]\n"),
			want: []Unpinned{
				{Reference: "ghcr.io/kubewarden/policy-server:v1.20.0", Workload: field("data.config", "(1).spec.image")},
				{Reference: "registry.example/side:2", Workload: field("data.config", "(2).sidecarImage")},
				{Reference: "registry.example/a:1", Workload: field("data.config", "(2).images[0]")},
			},
		},
		{
			desc: "embedded JSON, in a ConfigMap written as JSON",
			in:   `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": {"pod.json": "{\n  \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"registry.example/app:1\"}]}\n}\n"}}` + "\n",
			want: []Unpinned{{Reference: "registry.example/app:1", Workload: field(`data["pod.json"]`, "spec.containers[0].image")}},
		},
		{
			desc: "a manifest in an annotation of a Deployment",
			in: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: ns\n  annotations:\n    example.com/last-applied: |\n      spec:\n        template:\n          spec:\n            containers:\n            - name: c\n              image: registry.example/old:1\n" +
				"spec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: registry.example/c:1\n",
			want: []Unpinned{{Reference: "registry.example/old:1", Workload: Workload{Kind: "Deployment", Namespace: "ns", Name: "d", Container: FieldPrefix + `metadata.annotations["example.com/last-applied"]`, Field: EmbeddedPrefix + "spec.template.spec.containers[0].image"}}},
		},
		{
			desc: "prose that mentions image:, notes, a script, untagged and short names",
			in: cm("NOTES.txt", "Thank you for installing.\nTo change the image: set image.repository to registry.example/app:2.\n") + "  script.sh: |\n    #!/bin/sh\n    docker pull registry.example/app:2 # the image\n" +
				"  values.yaml: |\n    image: registry.example/app\n    sidecarImage: nginx:1.27\n    imageTag: '1.2'\n    image2: {repository: registry.example/app, tag: '2'}\n",
		},
		{
			desc: "no line break: a one-line JSON blob is not parsed",
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  pod.json: '{\"image\": \"registry.example/app:1\"}'\n",
		},
		{
			// The aliases are walked once each; the merges are refused
			// (stream.ParseText), and the text skipped.
			desc: "a billion laughs in a string, and a merge-key bomb",
			in: cm("bomb.yaml", bomb+"image: registry.example/app:1\n") + "  merge.yaml: |\n    image: registry.example/merge:1\n    m0: &m0 {a: 1}\n" + func() string {
				s := ""
				for i := 1; i <= 40; i++ {
					s += fmt.Sprintf("    m%d: &m%d {<<: [*m%d, *m%d]}\n", i, i, i-1, i-1)
				}
				return s
			}(),
			want: []Unpinned{{Reference: "registry.example/app:1", Workload: field(`data["bomb.yaml"]`, "image")}},
		},
		{
			desc: "a string shared through aliases in a billion laughs, listed once",
			in: "apiVersion: example.com/v1\nkind: Bundle\nmetadata:\n  name: b\nspec:\n  text: &s |\n    image: registry.example/app:1\n  a: &a [*s, *s, *s, *s, *s, *s, *s, *s, *s]\n" + func() string {
				s := ""
				for i, c := range "bcdefghij" {
					p := string("abcdefghij"[i])
					s += fmt.Sprintf("  %c: &%c [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", c, c, p, p, p, p, p, p, p, p, p)
				}
				return s
			}(),
			want: []Unpinned{{Reference: "registry.example/app:1", Workload: Workload{Kind: "Bundle", Name: "b", Container: FieldPrefix + "spec.text", Field: EmbeddedPrefix + "image"}}},
		},
		{
			desc: "a CRD's descriptions show examples",
			in:   "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: runners.example.com\nspec:\n  versions:\n  - name: v1\n    schema:\n      openAPIV3Schema:\n        description: |\n          For example:\n            spec:\n              image: registry.example/a:1\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var mu sync.Mutex
			var warnings []string
			r := &Renderer{Resolver: newFixed(), Warnf: func(f string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				warnings = append(warnings, f)
			}}
			res, err := r.Render(context.Background(), []byte(tc.in))
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(tc.want, res.Unpinned, cmpIgnoreWhere); diff != "" {
				t.Errorf("Render() unpinned (-want +got):\n%s", diff)
			}
			if want := min(len(tc.want), 1); len(warnings) != want {
				t.Errorf("Render() warned %d times (%q), want %d", len(warnings), warnings, want)
			}
			// A ConfigMap has no image field: the text is never rewritten.
			if strings.Contains(tc.in, "kind: ConfigMap") && string(res.Bytes()) != tc.in {
				t.Errorf("Render() = %q, want the input unchanged", res.Bytes())
			}
			// Strict fails on the same stream, naming the object and key.
			r.Strict = true
			_, err = r.Render(context.Background(), []byte(tc.in))
			switch {
			case len(tc.want) == 0 && err != nil:
				t.Errorf("Render() with Strict = %v", err)
			case len(tc.want) > 0 && err == nil:
				t.Errorf("Render() with Strict = nil error, want one")
			case len(tc.want) > 0:
				if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "document 1, line ") || !strings.Contains(msg, tc.want[0].Workload.String()) ||
					!strings.Contains(msg, tc.want[0].Reference) || !strings.Contains(msg, "is pinned where the string is a literal block scalar (|) by naming it with ImagePaths KIND=FIELD.PATH|PATH.IN.TEXT") {
					t.Errorf("Render() with Strict = %q, want one line naming %s %s", err, tc.want[0].Workload, tc.want[0].Reference)
				}
			}
		})
	}
}
