package helmcmd

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/digestpin/digestpin/internal/fluxpin"
)

// fluxManifests are a chart's rendered manifests: a Deployment web of
// app:1.0 and a Job of app:1.0.
const fluxManifests = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
        - name: web
          image: reg.example/app:1.0
---
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
spec:
  template:
    spec:
      containers:
        - name: migrate
          image: reg.example/app:1.0
`

// TestFluxPostRender: helm-controller's post-renderers in order, each
// its patches then its images entries in order, over what the one before
// gave: read through the one with digestpin's entries, and all of them
// with those entries in place (or in a post-renderer of their own after
// all the others).
func TestFluxPostRender(t *testing.T) {
	t.Parallel()
	patch := func(image string) fluxpin.Patch {
		return fluxpin.Patch{Target: map[string]any{"kind": "Deployment"}, Patch: "- {op: replace, path: /spec/template/spec/containers/0/image, value: " + image + "}\n"}
	}
	d := "sha256:" + strings.Repeat("a", 64)
	app := fluxpin.Image{Name: "reg.example/app", NewTag: "1.0", Digest: d}
	other := fluxpin.Image{Name: "reg.example/other", NewTag: "1.0", Digest: d}
	for _, tc := range []struct {
		name string
		rs   []fluxpin.Renderer
		at   int
		want []fluxpin.Image
		out  []string // images of the result, sorted
	}{
		{name: "none", at: 0, out: []string{"reg.example/app:1.0"}},
		{name: "none, digestpin's own after", at: 0, want: []fluxpin.Image{app},
			out: []string{"reg.example/app:1.0@" + d}},
		{name: "a patch, then the images", at: 0, rs: []fluxpin.Renderer{{Patches: []fluxpin.Patch{patch("reg.example/app:2.0")}, Images: []fluxpin.Image{{Name: "reg.example/app", NewTag: "3.0"}}}},
			out: []string{"reg.example/app:3.0"}},
		{name: "images in order", at: 0, rs: []fluxpin.Renderer{{Images: []fluxpin.Image{{Name: "reg.example/app", NewName: "reg.example/other"}, {Name: "reg.example/other", NewTag: "9"}}}},
			out: []string{"reg.example/other:9"}},
		{name: "read through the one with the entries", at: 0, rs: []fluxpin.Renderer{{Index: 0}, {Index: 1, Patches: []fluxpin.Patch{patch("reg.example/app:2.0")}}},
			out: []string{"reg.example/app:1.0"}},
		{name: "renderers in order, the entries in place", at: 1, want: []fluxpin.Image{other},
			rs:  []fluxpin.Renderer{{Index: 0, Patches: []fluxpin.Patch{patch("reg.example/other:1.0")}}, {Index: 1}, {Index: 2, Images: []fluxpin.Image{{Name: "reg.example/app", NewTag: "5"}}}},
			out: []string{"reg.example/app:5", "reg.example/other:1.0@" + d}},
		{name: "a new post-renderer after the others", at: 1, want: []fluxpin.Image{other},
			rs:  []fluxpin.Renderer{{Index: 0, Patches: []fluxpin.Patch{patch("reg.example/other:1.0")}}},
			out: []string{"reg.example/app:1.0", "reg.example/other:1.0@" + d}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := postRender([]byte(fluxManifests), tc.rs, tc.at, tc.want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := fluxpin.Images(out)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !reflect.DeepEqual(got, tc.out) {
				t.Errorf("images %q, want %q", got, tc.out)
			}
		})
	}
	_, err := postRender([]byte(fluxManifests), []fluxpin.Renderer{{Index: 2, Patches: []fluxpin.Patch{{Patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: gone}\nspec: {replicas: 2}\n"}}}}, 0, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "spec.postRenderers[2] (kustomize, as helm-controller post-renders): ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a patch that does not apply: %v", err)
	}
}

// TestFluxKustomizationOf: a folder's own kustomization, else what
// kustomize-controller lists: its YAML files and the folders with a
// kustomization of their own, not looked into.
func TestFluxKustomizationOf(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, p := range []string{"b.yaml", "a.yml", "notes.txt", "sub/c.yaml", "kust/kustomization.yaml", "kust/inner.yaml"} {
		put(t, filepath.Join(dir, p), "x: 1\n")
	}
	kfile, existing, resources, err := kustomizationOf(dir)
	if err != nil || kfile != filepath.Join(dir, "kustomization.yaml") || existing != nil {
		t.Fatalf("%s %q %v", kfile, existing, err)
	}
	if want := []string{"./a.yml", "./b.yaml", "./kust", "./sub/c.yaml"}; !reflect.DeepEqual(resources, want) {
		t.Errorf("resources %q, want %q", resources, want)
	}
	put(t, filepath.Join(dir, "Kustomization"), "resources: [a.yml]\n")
	kfile, existing, resources, err = kustomizationOf(dir)
	if err != nil || kfile != filepath.Join(dir, "Kustomization") || string(existing) != "resources: [a.yml]\n" || resources != nil {
		t.Errorf("%s %q %q %v", kfile, existing, resources, err)
	}
	// The copy leaves .git and links out, as source-controller's archive
	// does; of a GitRepository, it leaves out what source-controller
	// leaves out of the artifact.
	put(t, filepath.Join(dir, ".git", "HEAD"), "ref\n")
	put(t, filepath.Join(dir, "sub", ".github", "workflows", "ci.yml"), "on: push\n")
	put(t, filepath.Join(dir, "sub", ".sops.yaml"), "creation_rules: []\n")
	put(t, filepath.Join(dir, "logo.png"), "png")
	if err := os.Symlink("b.yaml", filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, git := range []bool{false, true} {
		cp := t.TempDir()
		if err := copyTree(dir, cp, git); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{".git", "sub/.github", "sub/.sops.yaml", "logo.png"} {
			_, err := os.Stat(filepath.Join(cp, p))
			if copied := err == nil; copied != (!git && p != ".git") {
				t.Errorf("git %v: %s copied: %v", git, p, copied)
			}
		}
	}
	cp := t.TempDir()
	if err := copyTree(dir, cp, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(cp, "link.yaml")); !os.IsNotExist(err) {
		t.Errorf("the link link.yaml was copied (%v); source-controller's archive has no links", err)
	}
	if b, err := os.ReadFile(filepath.Join(cp, "sub", "c.yaml")); err != nil || string(b) != "x: 1\n" {
		t.Errorf("copy %q %v", b, err)
	}
}

// TestFluxSubstituteVars: substituteFrom's ConfigMaps and Secrets found
// in the file or beside it (a Secret's data decoded, its stringData
// over it), an optional one missing skipped, a missing one an error.
func TestFluxSubstituteVars(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ks := `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: shop
  namespace: flux-system
spec:
  path: ./deploy
  postBuild:
    substitute: {C: inline}
    substituteFrom:
      - {kind: ConfigMap, name: cm}
      - {kind: Secret, name: sec}
      - {kind: ConfigMap, name: gone, optional: true}
FROM---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: flux-system}
data: {A: from-cm, B: from-cm, C: from-cm}
`
	put(t, filepath.Join(dir, "secret.yaml"), "apiVersion: v1\nkind: Secret\nmetadata: {name: sec}\ndata: {B: ZnJvbS1zZWNyZXQ=, D: eA==}\nstringData: {D: string-data}\n")
	for _, tc := range []struct {
		name, from string
		vars       map[string]string
		err        string
	}{
		{name: "found", vars: map[string]string{"A": "from-cm", "B": "from-secret", "C": "inline", "D": "string-data"}},
		{name: "missing", from: "      - {kind: Secret, name: nope}\n",
			err: "spec.postBuild.substituteFrom[3]: no Secret nope in DIR/ks.yaml or beside it, and digestpin reads no cluster: put the object beside the file, or mark it optional: true"},
	} {
		p := filepath.Join(dir, "ks.yaml")
		f, err := fluxpin.Parse(p, []byte(strings.Replace(ks, "FROM", tc.from, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.SetTarget(); err != nil {
			t.Fatal(err)
		}
		pb, err := f.PostBuild()
		if err != nil {
			t.Fatal(err)
		}
		var o fluxOptions
		vars, err := o.substituteVars(f, pb)
		if tc.err != "" {
			if want := strings.ReplaceAll(tc.err, "DIR", dir); err == nil || err.Error() != want {
				t.Errorf("%s: error %v\nwant %s", tc.name, err, want)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(vars, tc.vars) {
			t.Errorf("%s: vars %v, %v; want %v", tc.name, vars, err, tc.vars)
		}
	}
}
