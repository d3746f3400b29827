package fluxpin

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// folderKustomization is spec.path's own kustomization in the cases
// that have one: an images entry of redis that spec.images' own merges
// into, and a namespace the target namespace replaces.
const folderKustomization = `resources: [app.yaml]
namespace: old
patches:
  - path: own-patch.yaml
images:
  - name: redis
    newName: reg.example/redis
    newTag: "6"
`

// TestKustomization: the kustomization kustomize-controller builds, as
// its generator writes it, for a folder with a kustomization and one
// without; golden files in testdata/build, rewritten with -update. Merged
// once more with the same names and images entries, it stays as it is.
func TestKustomization(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		existing   string // "" for a folder without a kustomization
		resources  []string
		want       []Image // digestpin's entries, merged after the hand-written
	}{
		{name: "full-folder", file: "ks-full.yaml", existing: folderKustomization},
		{name: "full-none", file: "ks-full.yaml", resources: []string{"./app.yaml", "./db"}},
		{name: "full-pinned", file: "ks-full.yaml", existing: folderKustomization,
			want: []Image{{Name: "reg.example/nginx", NewTag: "1.27", Digest: "sha256:" + strings.Repeat("a", 64)}, {Name: "redis", NewTag: "7", Digest: "sha256:" + strings.Repeat("b", 64)}}},
		{name: "bare-empty-folder", file: "ks-bare.yaml"},
		{name: "bare-empty-kustomization", file: "ks-bare.yaml", existing: "namespace: old\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := target(t, "build/"+tc.file)
			b, err := f.Build()
			if err != nil {
				t.Fatal(err)
			}
			var existing []byte
			if tc.existing != "" {
				existing = []byte(tc.existing)
			}
			images := append(b.Images[:len(b.Images):len(b.Images)], tc.want...)
			out, err := b.Kustomization(existing, tc.resources, images)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "build", tc.name+".golden"), out)
			again := &Build{Path: b.Path, TargetNamespace: b.TargetNamespace, NamePrefix: b.NamePrefix, NameSuffix: b.NameSuffix}
			if tc.existing != "" || tc.resources != nil {
				out2, err := again.Kustomization(out, nil, images)
				if err != nil {
					t.Fatal(err)
				}
				if string(out2) != string(out) {
					t.Errorf("merged again, it changed:\n%s", out2)
				}
			}
		})
	}
}

// TestBuild reads what a Kustomization merges: digestpin's own images
// entries are left out, the patch targets keep kustomize's fields.
func TestBuild(t *testing.T) {
	t.Parallel()
	b, err := target(t, "build/ks-full.yaml").Build()
	if err != nil {
		t.Fatal(err)
	}
	if *b.TargetNamespace != "shop" || *b.NamePrefix != "pre-" || *b.NameSuffix != "-suf" || b.Path != "./deploy/shop" {
		t.Errorf("names %+v", b)
	}
	if want := []Image{{Name: "nginx", NewName: "reg.example/nginx"}, {Name: "redis", NewTag: "7"}}; !reflect.DeepEqual(b.Images, want) {
		t.Errorf("images %+v, want %+v", b.Images, want)
	}
	if len(b.Patches) != 2 || b.Patches[0].Target != nil || !reflect.DeepEqual(b.Patches[1].Target, map[string]any{"kind": "Deployment", "labelSelector": "tier=web"}) {
		t.Errorf("patches %+v", b.Patches)
	}
	if !reflect.DeepEqual(b.Components, []string{"../components/sidecar"}) || !b.IgnoreMissingComponents {
		t.Errorf("components %v %v", b.Components, b.IgnoreMissingComponents)
	}
}

// TestBuildRefuses: what kustomize-controller refuses, or digestpin
// cannot build, is one line.
func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, err string }{
		{"  components: [https://github.com/acme/c]\n", `spec.components[0] "https://github.com/acme/c" is not a local, relative path: kustomize-controller refuses it too (component path must be local and relative), and digestpin fetches no remote component`},
		{"  components: [/abs]\n", `spec.components[0] "/abs" is not a local, relative path`},
		{"  components: [git@github.com:acme/c]\n", `spec.components[0] "git@github.com:acme/c" is not a local`},
		{"  components: ../c\n", "spec.components is not a list"},
		{"  patches:\n    - target: {kind: Deployment}\n", "spec.patches[0] has no patch"},
		{"  patches: {patch: x}\n", "spec.patches is not a list"},
		{"  patches:\n    - {patch: x, target: Deployment}\n", "spec.patches[0].target is not a mapping"},
		{"  namePrefix: [a]\n", "spec.namePrefix is not a string"},
	} {
		f := parseTarget(t, "ks.yaml", "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: shop\nspec:\n  path: ./x\n"+tc.spec)
		_, err := f.Build()
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "ks.yaml:1: Kustomization shop: ") {
			t.Errorf("%q: error %v\nwant %s", tc.spec, err, tc.err)
		}
	}
}

// TestPostRenderers: the kustomize post-renderers in order, their
// hand-written images entries only, and the one digestpin's entries are
// in (else the first, else a new one after them all).
func TestPostRenderers(t *testing.T) {
	t.Parallel()
	rs, at, err := target(t, "build/hr-renderers.yaml").PostRenderers()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || at != 1 || rs[1].Index != 1 || len(rs[0].Patches) != 1 || len(rs[2].Patches) != 1 {
		t.Fatalf("renderers %+v, at %d", rs, at)
	}
	if want := []Image{{Name: "busybox", NewName: "reg.example/busybox"}}; !reflect.DeepEqual(rs[1].Images, want) {
		t.Errorf("images %+v, want %+v", rs[1].Images, want)
	}
	k, err := RendererKustomization("helm-output.yaml", rs[0], append(rs[0].Images, Image{Name: "nginx", NewTag: "1", Digest: "sha256:x"}))
	if err != nil {
		t.Fatal(err)
	}
	want := "apiVersion: kustomize.config.k8s.io/v1beta1\nimages:\n- digest: sha256:x\n  name: nginx\n  newTag: \"1\"\nkind: Kustomization\npatches:\n- patch: |\n    - {op: add, path: /metadata/labels/team, value: web}\n  target:\n    kind: Deployment\nresources:\n- helm-output.yaml\n"
	if string(k) != want {
		t.Errorf("kustomization:\n%s\nwant:\n%s", k, want)
	}
	for _, tc := range []struct {
		name, spec string
		n, at      int
	}{
		{"none", "  chart: {}\n", 0, 0},
		{"no kustomize", "  postRenderers:\n    - other: {}\n", 0, 0},
		{"first", "  postRenderers:\n    - kustomize: {patches: []}\n    - kustomize: {}\n", 2, 0},
	} {
		rs, at, err := parseTarget(t, "hr.yaml", "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\nspec:\n"+tc.spec).PostRenderers()
		if err != nil || len(rs) != tc.n || at != tc.at {
			t.Errorf("%s: %d renderers, at %d, %v; want %d, %d", tc.name, len(rs), at, err, tc.n, tc.at)
		}
	}
}

func target(t *testing.T, name string) *File {
	t.Helper()
	return parseTarget(t, name, string(read(t, name)))
}

func parseTarget(t *testing.T, name, src string) *File {
	t.Helper()
	f, err := Parse(name, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetTarget(); err != nil {
		t.Fatal(err)
	}
	return f
}

// golden compares out with the file path, which -update rewrites.
func golden(t *testing.T, path string, out []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(g) {
		t.Errorf("output differs from %s:\n%s", path, out)
	}
}
