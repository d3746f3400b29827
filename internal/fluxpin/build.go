package fluxpin

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// What Flux's controllers do to the manifests before they apply them,
// read from the object, so that digestpin reads the images that run:
//
// kustomize-controller v1.9 (its generator, fluxcd/pkg/kustomize) merges
// the Kustomization's spec.targetNamespace, namePrefix, nameSuffix,
// patches, components and images into the kustomization of spec.path
// (one it writes when the folder has none, listing the folder's
// manifests), builds that, then substitutes spec.postBuild's variables
// object by object.
//
// helm-controller v1.6 runs each kustomize post-renderer of a
// HelmRelease in order over what the one before gave, each a
// kustomization of its own: its patches, then its images entries in
// order.
//
// digestpin's own images entries (Mark) are left out of what it applies
// before reading the images: they are what it writes.

// Patch is one kustomize patch as a Flux object writes it: the patch
// (strategic merge or JSON 6902) and, optionally, the objects it targets.
type Patch struct {
	Patch  string
	Target map[string]any
}

// Build is what kustomize-controller merges into spec.path's
// kustomization, read from a Kustomization.
type Build struct {
	// Path is spec.path.
	Path string
	// TargetNamespace, NamePrefix and NameSuffix are nil when the spec has
	// no such field (kustomize-controller sets each that is there, even
	// empty).
	TargetNamespace, NamePrefix, NameSuffix *string
	Patches                                 []Patch
	// Components are spec.components, paths relative to spec.path.
	Components              []string
	IgnoreMissingComponents bool
	// Images are the hand-written spec.images entries, in order.
	Images []Image
}

// Renderer is one kustomize post-renderer of a HelmRelease.
type Renderer struct {
	// Index is its place in spec.postRenderers.
	Index   int
	Patches []Patch
	// Images are its hand-written images entries, in order.
	Images []Image
}

// Build reads what kustomize-controller merges into the kustomization of
// the Kustomization f.Target.
func (f *File) Build() (*Build, error) {
	t := f.Target
	at := func(field string) string {
		return fmt.Sprintf("%s:%d: %s: spec.%s", f.Path, t.Line, t.Describe(), field)
	}
	b := &Build{Path: str(t.Spec["path"])}
	for field, p := range map[string]**string{"targetNamespace": &b.TargetNamespace, "namePrefix": &b.NamePrefix, "nameSuffix": &b.NameSuffix} {
		v, ok := t.Spec[field]
		if !ok {
			continue
		}
		s, isStr := v.(string)
		if !isStr && v != nil {
			return nil, fmt.Errorf("%s is not a string", at(field))
		}
		*p = &s
	}
	var err error
	if b.Patches, err = patches(t.Spec["patches"], at("patches")); err != nil {
		return nil, err
	}
	if comps, ok := t.Spec["components"]; ok && comps != nil {
		list, isList := comps.([]any)
		if !isList {
			return nil, fmt.Errorf("%s is not a list", at("components"))
		}
		for i, c := range list {
			s, isStr := c.(string)
			if !isStr {
				return nil, fmt.Errorf("%s[%d] is not a string", at("components"), i)
			}
			if !LocalPath(s) {
				return nil, fmt.Errorf("%s[%d] %q is not a local, relative path: kustomize-controller refuses it too (component path must be local and relative), and digestpin fetches no remote component", at("components"), i, s)
			}
			b.Components = append(b.Components, s)
		}
	}
	b.IgnoreMissingComponents, _ = t.Spec["ignoreMissingComponents"].(bool)
	_, spec := get(t.node, "spec")
	l, err := f.listIn(spec, "spec")
	if err != nil {
		return nil, err
	}
	b.Images = handWritten(l)
	return b, nil
}

// PostRenderers reads the kustomize post-renderers of the HelmRelease
// f.Target, in order, and at: the one of them that holds (or will hold)
// digestpin's images entries, as Pin chooses it; len(rs) when Pin adds
// a post-renderer of its own, after the others.
func (f *File) PostRenderers() (rs []Renderer, at int, err error) {
	t := f.Target
	_, spec := get(t.node, "spec")
	_, pr := get(spec, "postRenderers")
	at = -1
	if pr != nil && pr.Kind == yaml.SequenceNode {
		for i, item := range pr.Content {
			_, k := get(item, "kustomize")
			if k == nil || k.Kind != yaml.MappingNode {
				continue
			}
			path := fmt.Sprintf("spec.postRenderers[%d].kustomize", i)
			l, err := f.listIn(k, path)
			if err != nil {
				return nil, 0, err
			}
			var raw struct {
				Patches any `yaml:"patches"`
			}
			if err := k.Decode(&raw); err != nil {
				return nil, 0, fmt.Errorf("%s:%d: %s: %w", f.Path, k.Line, path, err)
			}
			r := Renderer{Index: i, Images: handWritten(l)}
			if r.Patches, err = patches(raw.Patches, fmt.Sprintf("%s:%d: %s: %s.patches", f.Path, k.Line, t.Describe(), path)); err != nil {
				return nil, 0, err
			}
			if at < 0 && l != nil && owns(l) {
				at = len(rs)
			}
			rs = append(rs, r)
		}
	}
	switch {
	case at >= 0:
	case len(rs) > 0:
		at = 0
	default:
		at = len(rs)
	}
	return rs, at, nil
}

// owns says that l holds an entry of digestpin's.
func owns(l *list) bool {
	for _, en := range l.entries {
		if en.owned {
			return true
		}
	}
	return false
}

// handWritten are l's entries that are not digestpin's, in order.
func handWritten(l *list) []Image {
	if l == nil {
		return nil
	}
	var out []Image
	for _, en := range l.entries {
		if !en.owned {
			out = append(out, en.im)
		}
	}
	return out
}

// patches reads a list of Flux patches (v, at field for messages).
func patches(v any, field string) ([]Patch, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is not a list", field)
	}
	out := make([]Patch, 0, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s[%d] is not a mapping", field, i)
		}
		p, ok := m["patch"].(string)
		if !ok || strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("%s[%d] has no patch", field, i)
		}
		var target map[string]any
		if tv, ok := m["target"]; ok && tv != nil {
			if target, ok = tv.(map[string]any); !ok {
				return nil, fmt.Errorf("%s[%d].target is not a mapping", field, i)
			}
		}
		out = append(out, Patch{Patch: p, Target: selector(target)})
	}
	return out, nil
}

// selector is the fields of a Flux patch target that kustomize's own
// selector has (the ones Flux copies), nil when none.
func selector(t map[string]any) map[string]any {
	var out map[string]any
	for _, k := range []string{"group", "version", "kind", "name", "namespace", "labelSelector", "annotationSelector"} {
		if s, ok := t[k].(string); ok && s != "" {
			if out == nil {
				out = map[string]any{}
			}
			out[k] = s
		}
	}
	return out
}

// LocalPath says that a component path is local and relative, as
// kustomize-controller requires: no URL or git address, not absolute.
func LocalPath(p string) bool {
	lower := strings.ToLower(p)
	for _, prefix := range []string{"git::", "gh:", "ssh://", "https://", "http://", "git@", "github.com:", "github.com/"} {
		if len(prefix) < len(p) && strings.HasPrefix(lower, prefix) {
			return false
		}
	}
	return !strings.HasPrefix(p, "/") && !strings.HasPrefix(strings.TrimPrefix(lower, "file://"), "/")
}

// Kustomization is the kustomization kustomize-controller builds: the
// folder's own (existing; nil when the folder has none, and resources
// then lists its manifests, as the controller's generator finds them),
// with b merged in as the generator merges it: namespace, namePrefix and
// nameSuffix set, patches and components added after the folder's own,
// and images merged by name (an entry of the same name takes the
// entry's newName when it has one, and its newTag and digest together
// when it has either) or added after. images are the entries to merge:
// b.Images, and digestpin's own after them to check what runs.
func (b *Build) Kustomization(existing []byte, resources []string, images []Image) ([]byte, error) {
	k := map[string]any{}
	if existing != nil {
		if err := yaml.Unmarshal(existing, &k); err != nil {
			return nil, fmt.Errorf("reading the kustomization of %s: %w", b.Path, err)
		}
		if k == nil {
			k = map[string]any{}
		}
		for key, v := range map[string]string{"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"} {
			if _, ok := k[key]; !ok {
				k[key] = v
			}
		}
		if rs, _ := k["resources"].([]any); len(rs) == 0 {
			// As the controller: an empty kustomization builds.
			k["buildMetadata"] = []any{"originAnnotations"}
		}
	} else {
		k["apiVersion"], k["kind"] = "kustomize.config.k8s.io/v1beta1", "Kustomization"
		if len(resources) == 0 {
			k["namespace"] = "_placeholder"
		} else {
			rs := make([]any, len(resources))
			for i, r := range resources {
				rs[i] = r
			}
			k["resources"] = rs
		}
	}
	for key, v := range map[string]*string{"namespace": b.TargetNamespace, "namePrefix": b.NamePrefix, "nameSuffix": b.NameSuffix} {
		switch {
		case v == nil:
		case *v == "":
			delete(k, key)
		default:
			k[key] = *v
		}
	}
	for _, p := range b.Patches {
		m := map[string]any{"patch": p.Patch}
		if p.Target != nil {
			m["target"] = p.Target
		}
		k["patches"] = append(asList(k["patches"]), m)
	}
	for _, c := range b.Components {
		k["components"] = append(asList(k["components"]), c)
	}
	list := asList(k["images"])
	for _, im := range images {
		i := -1
		for j, e := range list {
			if m, ok := e.(map[string]any); ok && m["name"] == im.Name {
				i = j
				break
			}
		}
		if i < 0 {
			list = append(list, entryMap(im))
			continue
		}
		m := list[i].(map[string]any)
		if im.NewName != "" {
			m["newName"] = im.NewName
		}
		if im.NewTag != "" || im.Digest != "" {
			delete(m, "newTag")
			delete(m, "digest")
			maps(m, im)
		}
	}
	if len(list) > 0 {
		k["images"] = list
	}
	out, err := yaml.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("writing the kustomization of %s: %w", b.Path, err)
	}
	return out, nil
}

// RendererKustomization is the kustomization helm-controller builds for
// the post-renderer r over the manifests in the file input: its patches
// and images (r.Images, and digestpin's own after them to check what
// runs).
func RendererKustomization(input string, r Renderer, images []Image) ([]byte, error) {
	k := map[string]any{"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": []any{input}}
	var ps []any
	for _, p := range r.Patches {
		m := map[string]any{"patch": p.Patch}
		if p.Target != nil {
			m["target"] = p.Target
		}
		ps = append(ps, m)
	}
	if ps != nil {
		k["patches"] = ps
	}
	var list []any
	for _, im := range images {
		list = append(list, entryMap(im))
	}
	if list != nil {
		k["images"] = list
	}
	out, err := yaml.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("writing the kustomization of spec.postRenderers[%d]: %w", r.Index, err)
	}
	return out, nil
}

// entryMap is im as a kustomize images entry.
func entryMap(im Image) map[string]any {
	m := map[string]any{"name": im.Name}
	if im.NewName != "" {
		m["newName"] = im.NewName
	}
	maps(m, im)
	return m
}

// maps sets m's newTag and digest from im's, where it has them.
func maps(m map[string]any, im Image) {
	if im.NewTag != "" {
		m["newTag"] = im.NewTag
	}
	if im.Digest != "" {
		m["digest"] = im.Digest
	}
}

// asList is v as a list; nil when it is none.
func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// str is v as a string; "" when it is none.
func str(v any) string {
	s, _ := v.(string)
	return s
}
