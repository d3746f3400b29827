package steady

import (
	"fmt"
	"slices"
	"strings"

	"github.com/digestpin/digestpin/renderer"
)

// Options configure Diff and Keep. The zero value uses the renderer's
// defaults.
type Options struct {
	// ChecksumAnnotation is the pod-template annotation that digestpin
	// writes; "" means renderer.DefaultChecksumAnnotation. Like an image,
	// it always counts as a real difference.
	ChecksumAnnotation string
	// PodSpecPaths say where each kind keeps a pod spec, as for the
	// renderer; nil means renderer.DefaultPodSpecPaths. A volatile field
	// in the template of a pod spec restarts the workload.
	PodSpecPaths []renderer.PodSpecPath
}

func (o Options) checksumAnnotation() string {
	if o.ChecksumAnnotation == "" {
		return renderer.DefaultChecksumAnnotation
	}
	return o.ChecksumAnnotation
}

func (o Options) podSpecPaths() []renderer.PodSpecPath {
	if o.PodSpecPaths == nil {
		return renderer.DefaultPodSpecPaths
	}
	return o.PodSpecPaths
}

// object is a Kubernetes object inside a document: the document itself,
// or an item of a List.
type object struct {
	m map[string]any // nil when the document is not a mapping
}

func (o object) str(keys ...string) string {
	var v any = o.m
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

// name is Kind/namespace/name, or Kind/name without a namespace, or ""
// without a name.
func (o object) name() string {
	kind, ns, name := o.str("kind"), o.str("metadata", "namespace"), o.str("metadata", "name")
	switch {
	case name == "":
		return ""
	case ns != "":
		return kind + "/" + ns + "/" + name
	}
	return kind + "/" + name
}

// isList reports whether a document's value is a List of objects, as
// kubectl reads one: a kind ending in "List" and a list of items.
func isList(v any) ([]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	kind, _ := m["kind"].(string)
	items, ok := m["items"].([]any)
	return items, ok && strings.HasSuffix(kind, "List")
}

// restart describes, when p (a path in obj) lies in a pod template, the
// field that restarts the workload, e.g. "pod template annotation
// checksum/config"; otherwise "".
func (o Options) restart(obj object, p path) string {
	for _, ps := range o.podSpecPaths() {
		// A path without a checksum holds containers for other pods
		// (an OpenKruise SidecarSet), not a pod template.
		if !kindOf(ps, obj) || len(ps.Fields) == 0 || ps.NoChecksum {
			continue
		}
		// The template is the mapping that holds the pod spec "spec",
		// or the whole object for a Pod; other paths have no template
		// and their pod spec stands for it.
		tmpl, what := ps.Fields, "pod spec"
		if tmpl[len(tmpl)-1] == "spec" {
			tmpl, what = tmpl[:len(tmpl)-1], "pod template"
		}
		if len(tmpl) == 0 {
			what = "pod"
		}
		if !matches(p, tmpl) {
			continue
		}
		rel := p[len(tmpl):]
		switch {
		case what != "pod spec" && len(rel) == 3 && isKey(rel[0], "metadata") && isKey(rel[1], "annotations") && rel[2].kind == segKey:
			return what + " annotation " + rel[2].key
		case what != "pod spec" && len(rel) == 3 && isKey(rel[0], "metadata") && isKey(rel[1], "labels") && rel[2].kind == segKey:
			return what + " label " + rel[2].key
		case len(rel) == 0:
			return "the whole " + what
		}
		return what + " field " + rel.String()
	}
	return ""
}

// matches reports whether p starts with the fields of a pod spec path,
// where "*" matches any one step.
func matches(p path, fields []string) bool {
	if len(p) < len(fields) {
		return false
	}
	for i, f := range fields {
		if f != "*" && !isKey(p[i], f) {
			return false
		}
	}
	return true
}

func isKey(s seg, k string) bool { return s.kind == segKey && s.key == k }

// workload reports whether objects like obj have a pod spec.
func (o Options) workload(obj object) bool {
	return slices.ContainsFunc(o.podSpecPaths(), func(ps renderer.PodSpecPath) bool { return kindOf(ps, obj) && !ps.NoChecksum })
}

// kindOf reports whether ps applies to o's apiVersion and kind.
func kindOf(ps renderer.PodSpecPath, o object) bool {
	group := ""
	if g, _, ok := strings.Cut(o.str("apiVersion"), "/"); ok {
		group = g
	}
	return ps.Kind == o.str("kind") && (ps.Group == "*" || ps.Group == group)
}

// containerFields are the fields that hold containers, wherever they are.
var containerFields = []string{"containers", "initContainers", "ephemeralContainers"}

// imageField is an image field, or the checksum annotation, and its
// value.
type imageField struct {
	path  string
	value string // Go syntax, with types: an image is seldom a string twice
}

func newImageField(p path, v any) imageField { return imageField{p.String(), fmt.Sprintf("%#v", v)} }

// changedImage returns the path of the first image field (or checksum
// annotation) that differs between a and b, or "".
func (o Options) changedImage(a, b any) string {
	x, y := o.images(a), o.images(b)
	for i := range min(len(x), len(y)) {
		if x[i] != y[i] {
			if x[i].path != y[i].path {
				return min(x[i].path, y[i].path)
			}
			return x[i].path
		}
	}
	switch {
	case len(x) > len(y):
		return x[len(y)].path
	case len(y) > len(x):
		return y[len(x)].path
	}
	return ""
}

// images lists the image fields under v, and the checksum annotation, in
// a stable order. Any list under a container field, at any depth and in
// any kind, counts: a false alarm costs a render that is not kept, a
// missed image would keep a stale one.
func (o Options) images(v any) []imageField {
	var out, sums []imageField
	ann := o.checksumAnnotation()
	var walk func(p path, v any)
	walk = func(p path, v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(v) {
				c := v[k]
				switch {
				case slices.Contains(containerFields, k):
					if l, ok := c.([]any); ok {
						at := items(p.key(k), l)
						for i, it := range l {
							if m, ok := it.(map[string]any); ok {
								if im, ok := m["image"]; ok {
									out = append(out, newImageField(at(i).key("image"), im))
								}
							}
						}
					}
				case k == "volumes":
					if l, ok := c.([]any); ok {
						at := items(p.key(k), l)
						for i, it := range l {
							if m, ok := it.(map[string]any); ok {
								if im, ok := m["image"].(map[string]any); ok {
									out = append(out, newImageField(at(i).key("image").key("reference"), im["reference"]))
								}
							}
						}
					}
				case k == "annotations":
					if m, ok := c.(map[string]any); ok {
						if a, ok := m[ann]; ok {
							sums = append(sums, newImageField(p.key(k).key(ann), a))
						}
					}
				}
				walk(p.key(k), c)
			}
		case []any:
			for i, it := range v {
				walk(p.index(i), it)
			}
		}
	}
	walk(nil, v)
	// The images first, so that a message names the image rather than
	// its checksum.
	return append(out, sums...)
}

// items returns the path of each item of list l at p: by name when every
// item has a distinct one, as Diff writes it.
func items(p path, l []any) func(i int) path {
	if names(l) == nil {
		return p.index
	}
	return func(i int) path { return p.name(l[i].(map[string]any)["name"].(string)) }
}
