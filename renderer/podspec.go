package renderer

import (
	"errors"
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
// metadata.annotations, unless NoChecksum is set. For other paths no
// checksum is written.
type PodSpecPath struct {
	// Group is the API group of the kind ("" for the core group, "apps",
	// "argoproj.io"), or "*" for any group.
	Group string
	// Kind is the object kind, e.g. "Deployment".
	Kind string
	// Fields lead from the object's root to the pod spec.
	Fields []string
	// NoChecksum says that the mapping found is not a pod template but
	// containers for other pods (an OpenKruise SidecarSet): its images are
	// pinned, and no checksum annotation is written anywhere. The zero
	// value writes the checksum as described above. String and
	// ParsePodSpecPath do not carry it: a path given as a flag always
	// follows the rule on its last field.
	NoChecksum bool
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
// (in their current and deprecated API groups) and of the workload CRDs
// that people deploy with Helm: Argo Rollouts, Knative Serving,
// OpenKruise, KEDA's ScaledJob and OpenShift's DeploymentConfig. Each is
// matched by API group and kind, in every version of the group.
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
	// Knative Serving: a Service's or Configuration's template is the
	// next Revision; a new checksum makes a new Revision, as a new image
	// does.
	{Group: "serving.knative.dev", Kind: "Service", Fields: []string{"spec", "template", "spec"}},
	{Group: "serving.knative.dev", Kind: "Configuration", Fields: []string{"spec", "template", "spec"}},
	// OpenKruise: CloneSet, Advanced StatefulSet and Advanced DaemonSet
	// keep a pod template. A SidecarSet's containers are injected into
	// other pods: it has no pod template, so it gets no checksum (Kruise
	// hashes the sidecar containers itself to upgrade them).
	{Group: "apps.kruise.io", Kind: "CloneSet", Fields: []string{"spec", "template", "spec"}},
	{Group: "apps.kruise.io", Kind: "StatefulSet", Fields: []string{"spec", "template", "spec"}},
	{Group: "apps.kruise.io", Kind: "DaemonSet", Fields: []string{"spec", "template", "spec"}},
	{Group: "apps.kruise.io", Kind: "SidecarSet", Fields: []string{"spec"}, NoChecksum: true},
	// KEDA: a ScaledJob's jobTargetRef is a Job spec.
	{Group: "keda.sh", Kind: "ScaledJob", Fields: []string{"spec", "jobTargetRef", "template", "spec"}},
	{Group: "apps.openshift.io", Kind: "DeploymentConfig", Fields: []string{"spec", "template", "spec"}},
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

// findPodTemplates returns the pod specs of obj, a mapping node of the
// given API group and kind, according to every paths entry that matches
// them, in the order of paths. A pod spec that two entries lead to (a
// --pod-spec-path that repeats a default) is returned once, with a
// holder if either entry gives one. It calls step with each node it
// passes, as written.
func findPodTemplates(obj *yaml.Node, group, kind string, paths []PodSpecPath, step func(*yaml.Node)) ([]podTemplate, error) {
	var found []podTemplate
	at := map[*yaml.Node]int{} // pod spec → its index in found
	for _, p := range paths {
		if p.Kind != kind || (p.Group != "*" && p.Group != group) {
			continue
		}
		err := walk(obj, p.Fields, map[walkStep]bool{}, step, func(holder, spec *yaml.Node, last string) {
			if spec.Kind != yaml.MappingNode {
				return
			}
			t := podTemplate{spec: spec}
			if last == "spec" && !p.NoChecksum {
				t.holder = holder
			}
			if i, ok := at[spec]; ok {
				if found[i].holder == nil {
					found[i].holder = t.holder
				}
				return
			}
			at[spec] = len(found)
			found = append(found, t)
		})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// walkStep is a node reached with some fields left to follow.
type walkStep struct {
	n    *yaml.Node
	left int
}

// walk follows fields from n and calls fn with every node reached, the
// mapping that holds it and the last field name. It steps from a node
// with the same fields left once (seen remembers), so that "*" fields
// over aliases cannot make it exponential. It looks fields up with get,
// and returns get's error (or values' error for a "*" step, prefixed with
// the field stepped from).
func walk(n *yaml.Node, fields []string, seen map[walkStep]bool, step func(*yaml.Node), fn func(holder, node *yaml.Node, last string)) error {
	return walkFrom(n, "", fields, seen, step, fn)
}

// walkFrom is walk from node n, which the field named from led to.
func walkFrom(n *yaml.Node, from string, fields []string, seen map[walkStep]bool, step func(*yaml.Node), fn func(holder, node *yaml.Node, last string)) error {
	n = deref(n)
	if n == nil || len(fields) == 0 || seen[walkStep{n, len(fields)}] {
		return nil
	}
	seen[walkStep{n, len(fields)}] = true
	f, rest := fields[0], fields[1:]
	var next []*yaml.Node
	if f == "*" {
		vs, err := values(n)
		if ke := (*keyError)(nil); errors.As(err, &ke) {
			return &keyError{ke.line, strings.TrimSpace(from + " " + ke.msg)}
		}
		next = vs
	} else {
		e, err := get(n, f)
		if err != nil {
			return err
		}
		if e.value != nil {
			for _, v := range e.via[:len(e.via)-1] {
				step(v)
			}
			next = []*yaml.Node{e.via[len(e.via)-1]}
		}
	}
	for _, c := range next {
		step(c)
		if len(rest) == 0 {
			fn(n, deref(c), f)
		} else if err := walkFrom(c, f, rest, seen, step, fn); err != nil {
			return err
		}
	}
	return nil
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
