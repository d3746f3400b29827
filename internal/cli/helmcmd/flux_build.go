package helmcmd

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/digestpin/digestpin/internal/fluxpin"
)

// What digestpin builds of a Flux object before it reads the images is
// what its controller applies: kustomize-controller v1.9's build of a
// Kustomization (the spec's fields merged into spec.path's
// kustomization, then spec.postBuild's substitution) and helm-controller
// v1.6's kustomize post-renderers of a HelmRelease. Each also builds
// what runs once digestpin's entries are written, and fluxpin.Check
// refuses an image they would not pin.

// built is a build of a Flux object: what it runs without digestpin's
// images entries, and a function that builds it with them.
type built struct {
	stream []byte
	// with is what runs with digestpin's entries want written, and what
	// may change an image after they apply (for messages).
	with    func(ctx context.Context, want []fluxpin.Image) ([]byte, string, error)
	cleanup func()
}

// kustomizationFiles are the names kustomize reads a kustomization
// from, in its order.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// build builds the Kustomization as kustomize-controller does: the
// repository (without .git) is copied to a temporary folder, where the
// kustomization of spec.path is rewritten with the spec's fields merged
// in, built with kustomize (files may be loaded from anywhere in the
// repository, as the controller loads them), and spec.postBuild's
// variables substituted.
func (o *fluxOptions) build(ctx context.Context, f *fluxpin.File, root string) (*built, error) {
	t := f.Target
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s: %s", f.Path, t.Line, t.Describe(), fmt.Sprintf(format, args...))
	}
	b, err := f.Build()
	if err != nil {
		return nil, err
	}
	pb, err := f.PostBuild()
	if err != nil {
		return nil, err
	}
	rel := b.Path
	dir, err := inRepo(root, rel)
	if err != nil {
		return nil, fail("spec.path %s", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() { //nolint:gosec // G703: inRepo keeps it inside the repository
		return nil, fail("spec.path %q is no folder under %s", rel, root)
	}
	specDir, _ := filepath.Rel(root, dir)
	comps := b.Components[:0:0]
	for i, c := range b.Components {
		cdir, err := inRepo(root, path.Join(filepath.ToSlash(specDir), c))
		if err != nil {
			return nil, fail("spec.components[%d] %q leaves the repository %s (relative to spec.path %s): kustomize-controller reads nothing outside its source either", i, c, root, rel)
		}
		if _, err := os.Stat(cdir); err != nil { //nolint:gosec // G703: inRepo keeps it inside the repository
			if b.IgnoreMissingComponents {
				continue
			}
			return nil, fail("spec.components[%d] %q: no such folder under spec.path %s (spec.ignoreMissingComponents: true skips it)", i, c, rel)
		}
		comps = append(comps, c)
	}
	b.Components = comps
	vars, err := o.substituteVars(f, pb)
	if err != nil {
		return nil, fail("%s", err)
	}
	tmp, err := os.MkdirTemp("", "digestpin-flux-build-")
	if err != nil {
		return nil, fmt.Errorf("making a folder to build %s: %w", f.Path, err)
	}
	cleanup := func() { _ = os.RemoveAll(tmp) }
	if err := copyTree(root, tmp, str(t.Spec, "sourceRef", "kind") == "GitRepository"); err != nil {
		cleanup()
		return nil, fail("copying the repository %s to build it: %s", root, err)
	}
	work := filepath.Join(tmp, specDir)
	kfile, existing, resources, err := kustomizationOf(work)
	if err != nil {
		cleanup()
		return nil, fail("spec.path %s: %s", rel, err)
	}
	run := func(ctx context.Context, images []fluxpin.Image) ([]byte, error) {
		k, err := b.Kustomization(existing, resources, images)
		if err != nil {
			return nil, fail("%s", err)
		}
		if err := os.WriteFile(kfile, k, 0o600); err != nil { //nolint:gosec // G703: our own temporary folder
			return nil, fmt.Errorf("writing the kustomization of %s: %w", rel, err)
		}
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, o.kustomize, "build", "--load-restrictor", "LoadRestrictionsNone", work) //nolint:gosec // G204: the kustomize the user named
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			msg := strings.ReplaceAll(firstLine(errb.String(), err), tmp, root)
			return nil, fail("%s build of spec.path %s (with the spec's patches, components, images and names merged in, as kustomize-controller builds it): %s", o.kustomize, rel, msg)
		}
		if !pb.Substitutes(vars) {
			return out.Bytes(), nil
		}
		s, err := fluxpin.Substitute(out.Bytes(), vars, true)
		if err != nil {
			return nil, fail("spec.postBuild: %s", err)
		}
		return s, nil
	}
	stream, err := run(ctx, b.Images)
	if err != nil {
		cleanup()
		return nil, err
	}
	after := "no images entry matches it"
	if pb.Substitutes(vars) {
		after = "spec.postBuild substitutes its variables after the images entries apply, and an images entry matches no name or tag with a ${VARIABLE} in it: write the image without one"
	}
	return &built{
		stream: stream,
		with: func(ctx context.Context, want []fluxpin.Image) ([]byte, string, error) {
			if len(want) == 0 {
				return stream, after, nil // the same build
			}
			out, err := run(ctx, append(b.Images[:len(b.Images):len(b.Images)], want...))
			return out, after, err
		},
		cleanup: cleanup,
	}, nil
}

// substituteVars are the variables of spec.postBuild: its
// substituteFrom ConfigMaps and Secrets found in FILE or beside it (as
// valuesFrom's are; an optional one may be missing), and its substitute.
func (o *fluxOptions) substituteVars(f *fluxpin.File, pb *fluxpin.PostBuild) (map[string]string, error) {
	if pb == nil {
		return nil, nil
	}
	var from []map[string]string
	for i, ref := range pb.From {
		obj := o.source(f, ref.Kind, ref.Name, f.Target.Namespace)
		if obj == nil {
			if ref.Optional {
				continue
			}
			return nil, fmt.Errorf("spec.postBuild.substituteFrom[%d]: no %s %s in %s or beside it, and digestpin reads no cluster: put the object beside the file, or mark it optional: true", i, ref.Kind, ref.Name, f.Path)
		}
		data, err := objectData(obj)
		if err != nil {
			return nil, fmt.Errorf("spec.postBuild.substituteFrom[%d]: %w", i, err)
		}
		from = append(from, data)
	}
	vars, err := pb.Vars(from)
	if err != nil {
		return nil, fmt.Errorf("spec.postBuild: %w", err)
	}
	return vars, nil
}

// objectData is a ConfigMap's data, or a Secret's data (decoded) with
// its stringData over it, as the API server stores it.
func objectData(obj *fluxpin.Object) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range obj.Data {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s %s (%s:%d): data.%s is not a string", obj.Kind, obj.Name, obj.Path, obj.Line, k)
		}
		if obj.Kind == "Secret" {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, fmt.Errorf("%s %s (%s:%d): data.%s is not base64: %w", obj.Kind, obj.Name, obj.Path, obj.Line, k, err)
			}
			s = string(b)
		}
		out[k] = s
	}
	if obj.Kind == "Secret" {
		for k, v := range obj.StringData {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s %s (%s:%d): stringData.%s is not a string", obj.Kind, obj.Name, obj.Path, obj.Line, k)
			}
			out[k] = s
		}
	}
	return out, nil
}

// kustomizationOf finds the kustomization of dir: its file, to write
// (the one dir has, else kustomization.yaml), and its content (nil when
// dir has none); with none, resources are what kustomize-controller
// lists: every YAML file under dir, and each folder under it with a
// kustomization of its own (not looked into), in lexical order.
func kustomizationOf(dir string) (kfile string, existing []byte, resources []string, err error) {
	for _, name := range kustomizationFiles {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			b, err := os.ReadFile(p) //nolint:gosec // G304: our own copy of the repository
			return p, b, nil, err
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel := "./" + filepath.ToSlash(strings.TrimPrefix(p, dir+string(filepath.Separator)))
		if d.IsDir() {
			for _, name := range kustomizationFiles {
				if st, err := os.Stat(filepath.Join(p, name)); err == nil && !st.IsDir() {
					resources = append(resources, rel)
					return filepath.SkipDir
				}
			}
			return nil
		}
		if ext := filepath.Ext(p); ext == ".yaml" || ext == ".yml" {
			resources = append(resources, rel)
		}
		return nil
	})
	return filepath.Join(dir, kustomizationFiles[0]), nil, resources, err
}

// copyTree copies the files and folders of src into dst as
// source-controller archives a source into the artifact the other
// controllers build from: no symbolic link (its archive holds regular
// files and folders only, so a link, inside the repository or out of
// it, is not there for kustomize-controller either), no .git folder,
// and, for a GitRepository's (git), none of what source-controller
// leaves out by default; everything is written through a root at dst,
// which nothing leaves.
func copyTree(src, dst string, git bool) error {
	to, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer to.Close()
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case git && p != src && gitExcluded(d):
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.IsDir():
			return to.MkdirAll(rel, 0o750)
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(p) //nolint:gosec // G122: a file of the repository the user named
		if err != nil {
			return err
		}
		return to.WriteFile(rel, b, 0o600)
	})
}

// gitExcluded says that source-controller leaves d out of a
// GitRepository's artifact by default, at any depth: its version
// control files, CI configurations, images and archives, and the
// .sourceignore patterns it always applies (.sops.yaml, .flux.yaml,
// .goreleaser.yml). A repository's own .sourceignore files are not read.
func gitExcluded(d fs.DirEntry) bool {
	name := d.Name()
	if d.IsDir() {
		return name == ".github" || name == ".circleci"
	}
	switch name {
	case ".gitignore", ".gitmodules", ".gitattributes", ".travis.yml", ".gitlab-ci.yml", "appveyor.yml", ".drone.yml",
		"cloudbuild.yaml", "codeship-services.yml", "codeship-steps.yml", ".goreleaser.yml", ".sops.yaml", ".flux.yaml":
		return true
	}
	for _, ext := range []string{".jpg", ".jpeg", ".gif", ".png", ".wmv", ".flv", ".tar.gz", ".zip"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// kustomizeMu keeps one kustomize build at a time in the process, as
// helm-controller does: kustomize's OpenAPI schema is global.
var kustomizeMu sync.Mutex

// postRender runs the HelmRelease's kustomize post-renderers rs over the
// rendered manifests as helm-controller does, each over what the one
// before gave (a kustomization of its own: its patches, then its images
// entries in order): through rs[at] when want is nil (the manifests
// whose images digestpin pins), else all of them with want after
// rs[at]'s images, or in a post-renderer of its own after them all when
// at is len(rs).
func postRender(manifests []byte, rs []fluxpin.Renderer, at int, want []fluxpin.Image) ([]byte, error) {
	if want != nil && at == len(rs) {
		rs = append(rs[:len(rs):len(rs)], fluxpin.Renderer{Index: -1})
	}
	last := len(rs) - 1
	if want == nil {
		last = min(at, last)
	}
	for i := 0; i <= last; i++ {
		images := rs[i].Images
		if i == at && want != nil {
			images = append(images[:len(images):len(images)], want...)
		}
		out, err := kustomizeRun(manifests, rs[i], images)
		if err != nil {
			return nil, err
		}
		manifests = out
	}
	return manifests, nil
}

// kustomizeRun is one post-renderer's kustomize build over manifests,
// in memory, with helm-controller's options: files from anywhere, no
// plugins.
func kustomizeRun(manifests []byte, r fluxpin.Renderer, images []fluxpin.Image) ([]byte, error) {
	name := fmt.Sprintf("spec.postRenderers[%d]", r.Index)
	if r.Index < 0 {
		name = "digestpin's post-renderer"
	}
	const input = "helm-output.yaml"
	k, err := fluxpin.RendererKustomization(input, r, images)
	if err != nil {
		return nil, err
	}
	mem := filesys.MakeFsInMemory()
	if err := mem.WriteFile(input, manifests); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := mem.WriteFile("kustomization.yaml", k); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	kustomizeMu.Lock()
	defer kustomizeMu.Unlock()
	out, err := func() (out []byte, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("kustomize panicked: %v", r)
			}
		}()
		m, err := krusty.MakeKustomizer(&krusty.Options{
			LoadRestrictions: kustypes.LoadRestrictionsNone,
			PluginConfig:     kustypes.DisabledPluginConfig(),
		}).Run(mem, ".")
		if err != nil {
			return nil, err
		}
		return m.AsYaml()
	}()
	if err != nil {
		return nil, fmt.Errorf("%s (kustomize, as helm-controller post-renders): %s", name, oneLine(err))
	}
	return out, nil
}
