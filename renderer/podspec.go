package renderer

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// PodSpecPath names where objects of one kind keep a pod spec: the fields
// from the object's root to a mapping with `containers`. A "*" field steps
// into every item of a sequence (or every value of a mapping).
//
// When the last field is "spec", the pod spec's template is the mapping
// that holds it, and the checksum annotation is written to that mapping's
// metadata.annotations. For other paths no checksum is written.
type PodSpecPath struct {
	// Group is the API group of the kind ("" for the core group, "apps",
	// "argoproj.io"), or "*" for any group.
	Group string
	// Kind is the object kind, e.g. "Deployment".
	Kind string
	// Fields lead from the object's root to the pod spec.
	Fields []string
}

// String formats p as the --pod-spec-path flag takes it.
func (p PodSpecPath) String() string {
	kind := p.Kind
	if p.Group != "*" {
		kind = p.Group + "/" + p.Kind
	}
	return kind + "=" + strings.Join(p.Fields, ".")
}

// ParsePodSpecPath parses "KIND=FIELD.PATH" or "GROUP/KIND=FIELD.PATH",
// e.g. "example.com/Worker=spec.podTemplate.spec". Without a group the
// kind matches in every API group.
func ParsePodSpecPath(s string) (PodSpecPath, error) {
	kind, path, ok := strings.Cut(s, "=")
	if !ok || kind == "" || path == "" {
		return PodSpecPath{}, fmt.Errorf("parsing pod spec path %q: want KIND=FIELD.PATH or GROUP/KIND=FIELD.PATH", s)
	}
	p := PodSpecPath{Group: "*", Kind: kind}
	if g, k, ok := strings.Cut(kind, "/"); ok {
		p.Group, p.Kind = g, k
	}
	if p.Kind == "" || strings.Contains(p.Kind, "/") {
		return PodSpecPath{}, fmt.Errorf("parsing pod spec path %q: bad kind %q", s, kind)
	}
	p.Fields = strings.Split(path, ".")
	for _, f := range p.Fields {
		if f == "" {
			return PodSpecPath{}, fmt.Errorf("parsing pod spec path %q: empty field in %q", s, path)
		}
	}
	return p, nil
}

// DefaultPodSpecPaths are the pod specs of the Kubernetes workload kinds
// (in their current and deprecated API groups) and of Argo Rollouts.
var DefaultPodSpecPaths = []PodSpecPath{
	{Group: "", Kind: "Pod", Fields: []string{"spec"}},
	{Group: "", Kind: "PodTemplate", Fields: []string{"template", "spec"}},
	{Group: "", Kind: "ReplicationController", Fields: []string{"spec", "template", "spec"}},
	{Group: "apps", Kind: "Deployment", Fields: []string{"spec", "template", "spec"}},
	{Group: "apps", Kind: "ReplicaSet", Fields: []string{"spec", "template", "spec"}},
	{Group: "apps", Kind: "StatefulSet", Fields: []string{"spec", "template", "spec"}},
	{Group: "apps", Kind: "DaemonSet", Fields: []string{"spec", "template", "spec"}},
	{Group: "extensions", Kind: "Deployment", Fields: []string{"spec", "template", "spec"}},
	{Group: "extensions", Kind: "ReplicaSet", Fields: []string{"spec", "template", "spec"}},
	{Group: "extensions", Kind: "DaemonSet", Fields: []string{"spec", "template", "spec"}},
	{Group: "batch", Kind: "Job", Fields: []string{"spec", "template", "spec"}},
	{Group: "batch", Kind: "CronJob", Fields: []string{"spec", "jobTemplate", "spec", "template", "spec"}},
	{Group: "argoproj.io", Kind: "Rollout", Fields: []string{"spec", "template", "spec"}},
}

// containerFields are the fields of a pod spec that hold containers.
var containerFields = []string{"initContainers", "containers", "ephemeralContainers"}

// podTemplate is one pod spec found in an object.
type podTemplate struct {
	// spec is the pod spec mapping.
	spec *yaml.Node
	// holder is the mapping whose metadata gets the checksum, or nil.
	holder *yaml.Node
}

// findPodTemplates returns the pod specs of obj, a mapping node, according
// to the first paths entry that matches its apiVersion and kind.
func findPodTemplates(obj *yaml.Node, paths []PodSpecPath) []podTemplate {
	group := apiGroup(scalar(lookup(obj, "apiVersion")))
	kind := scalar(lookup(obj, "kind"))
	var found []podTemplate
	for _, p := range paths {
		if p.Kind != kind || (p.Group != "*" && p.Group != group) {
			continue
		}
		walk(obj, p.Fields, map[walkStep]bool{}, func(holder, spec *yaml.Node, last string) {
			if spec.Kind != yaml.MappingNode {
				return
			}
			t := podTemplate{spec: spec}
			if last == "spec" {
				t.holder = holder
			}
			found = append(found, t)
		})
	}
	return found
}

// walkStep is a node reached with some fields left to follow.
type walkStep struct {
	n    *yaml.Node
	left int
}

// walk follows fields from n and calls fn with every node reached, the
// mapping that holds it and the last field name. It steps from a node
// with the same fields left once (seen remembers), so that "*" fields
// over aliases cannot make it exponential.
func walk(n *yaml.Node, fields []string, seen map[walkStep]bool, fn func(holder, node *yaml.Node, last string)) {
	n = deref(n)
	if n == nil || len(fields) == 0 || seen[walkStep{n, len(fields)}] {
		return
	}
	seen[walkStep{n, len(fields)}] = true
	f, rest := fields[0], fields[1:]
	var next []*yaml.Node
	switch {
	case f == "*" && n.Kind == yaml.SequenceNode:
		next = n.Content
	case f == "*" && n.Kind == yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			next = append(next, n.Content[i])
		}
	default:
		if v := lookup(n, f); v != nil {
			next = []*yaml.Node{v}
		}
	}
	for _, c := range next {
		if len(rest) == 0 {
			fn(n, deref(c), f)
		} else {
			walk(c, rest, seen, fn)
		}
	}
}

// apiGroup returns the group of an apiVersion: "apps" for "apps/v1", ""
// for the core "v1".
func apiGroup(apiVersion string) string {
	if g, _, ok := strings.Cut(apiVersion, "/"); ok {
		return g
	}
	return ""
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// lookup returns the value of key in mapping m, or nil. A key that m
// does not hold itself is looked up in the mappings that m merges ("<<:
// *base"), in order, as Kubernetes' YAML decoder does. checkAliases
// refused the documents whose merges are cyclic or too costly to follow.
func lookup(m *yaml.Node, key string) *yaml.Node {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	merges := false
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if isMergeKey(k) {
			merges = true
		} else if k.Kind == yaml.ScalarNode && k.Value == key {
			return deref(m.Content[i+1])
		}
	}
	if !merges {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if !isMergeKey(m.Content[i]) {
			continue
		}
		for _, src := range mergeSources(m.Content[i+1]) {
			if v := lookup(src, key); v != nil {
				return v
			}
		}
	}
	return nil
}

// isMergeKey reports whether a mapping key is the merge key "<<".
func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Tag == "!!merge"
}

// mergeSources returns the mappings a merge key's value names: one
// mapping, or a sequence of them.
func mergeSources(v *yaml.Node) []*yaml.Node {
	v = deref(v)
	switch {
	case v == nil:
		return nil
	case v.Kind == yaml.MappingNode:
		return []*yaml.Node{v}
	case v.Kind == yaml.SequenceNode:
		var out []*yaml.Node
		for _, c := range v.Content {
			if c = deref(c); c.Kind == yaml.MappingNode {
				out = append(out, c)
			}
		}
		return out
	}
	return nil
}

// scalar returns the value of a scalar node, or "".
func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}
