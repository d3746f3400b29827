package renderer

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
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
	// containers for other pods (an OpenKruise SidecarSet), or containers
	// that an operator merges into the pods it makes (a Prometheus): its
	// images are pinned, and no checksum annotation is written anywhere. The zero
	// value writes the checksum as described above. String and
	// ParsePodSpecPath do not carry it: a path given as a flag always
	// follows the rule on its last field.
	NoChecksum bool
}

// String formats p as the --pod-spec-path flag takes it.
func (p PodSpecPath) String() string { return kindPath(p.Group, p.Kind, p.Fields) }

// ParsePodSpecPath parses "KIND=FIELD.PATH" or "GROUP/KIND=FIELD.PATH",
// e.g. "example.com/Worker=spec.podTemplate.spec". Without a group the
// kind matches in every API group. A field may select the items of a
// list by a key, "spec.pools[name=gpu].template.spec" (see selector).
func ParsePodSpecPath(s string) (PodSpecPath, error) {
	group, kind, fields, err := parseKindPath("pod spec path", s)
	if err != nil {
		return PodSpecPath{}, err
	}
	return PodSpecPath{Group: group, Kind: kind, Fields: fields}, nil
}

// parseKindPath parses "[GROUP/]KIND=FIELD.PATH", the form of every path
// flag (what names the flag's value in errors). The group is "*" when
// none is given.
func parseKindPath(what, s string) (group, kind string, fields []string, err error) {
	k, path, ok := strings.Cut(s, "=")
	if !ok || k == "" || path == "" {
		return "", "", nil, fmt.Errorf("parsing %s %q: want KIND=FIELD.PATH or GROUP/KIND=FIELD.PATH", what, s)
	}
	if group, kind, err = parseKind(what, s, k); err != nil {
		return "", "", nil, err
	}
	fields = splitPath(path)
	for i, f := range fields {
		if err := checkField(f); err != nil {
			return "", "", nil, fmt.Errorf("parsing %s %q: %w in %q", what, s, err, path)
		}
		// A flag's value is a string, not a mapping to go on from: only
		// an image path may end in one.
		if sel, ok := parseSelector(f); ok && sel.isFlag() && (what != "image path" || i < len(fields)-1) {
			return "", "", nil, fmt.Errorf("parsing %s %q: %s selects a flag's value, which only an image path may end in", what, s, f)
		}
	}
	return group, kind, fields, nil
}

// parseKind parses the "[GROUP/]KIND" part k of path s.
func parseKind(what, s, k string) (group, kind string, err error) {
	group, kind = "*", k
	if g, kk, ok := strings.Cut(k, "/"); ok {
		group, kind = g, kk
	}
	if kind == "" || strings.Contains(kind, "/") {
		return "", "", fmt.Errorf("parsing %s %q: bad kind %q", what, s, k)
	}
	// "v1/Pod" reads as the group "v1", which no object has: the path
	// would match nothing, and its images would go unpinned.
	if apiVersionLike.MatchString(group) {
		return "", "", fmt.Errorf("parsing %s %q: %q is an API version, not a group: write %s=… for the kind in any group, or /%s=… for the core group", what, s, group, kind, kind)
	}
	return group, kind, nil
}

// apiVersionLike matches a Kubernetes API version: "v1", "v2beta1".
var apiVersionLike = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]*)?$`)

// kindPath formats a path of group and kind as the flags take it.
func kindPath(group, kind string, fields []string) string {
	if group != "*" {
		kind = group + "/" + kind
	}
	return kind + "=" + strings.Join(fields, ".")
}

// matchesKind reports whether a path declared for group and kind (group
// "*": any) applies to an object of objGroup and objKind.
func matchesKind(group, kind, objGroup, objKind string) bool {
	return kind == objKind && (group == "*" || group == objGroup)
}

// DefaultPodSpecPaths are the pod specs of the Kubernetes workload kinds
// (in their current and deprecated API groups), of the workload CRDs
// that people deploy with Helm: Argo Rollouts, Knative Serving,
// OpenKruise, KEDA's ScaledJob and OpenShift's DeploymentConfig, and of
// operator resources (operatorPodSpecPaths). Each is matched by API group
// and kind, in every version of the group.
var DefaultPodSpecPaths = slices.Concat([]PodSpecPath{
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
	// A BroadcastJob runs its template's pod on every node. A
	// UnitedDeployment keeps one workload template, of one of four kinds,
	// whose pods it spreads over subsets (zones).
	{Group: "apps.kruise.io", Kind: "BroadcastJob", Fields: []string{"spec", "template", "spec"}},
	{Group: "apps.kruise.io", Kind: "UnitedDeployment", Fields: []string{"spec", "template", "statefulSetTemplate", "spec", "template", "spec"}},
	{Group: "apps.kruise.io", Kind: "UnitedDeployment", Fields: []string{"spec", "template", "advancedStatefulSetTemplate", "spec", "template", "spec"}},
	{Group: "apps.kruise.io", Kind: "UnitedDeployment", Fields: []string{"spec", "template", "cloneSetTemplate", "spec", "template", "spec"}},
	{Group: "apps.kruise.io", Kind: "UnitedDeployment", Fields: []string{"spec", "template", "deploymentTemplate", "spec", "template", "spec"}},
	// An EphemeralJob adds its template's ephemeral containers to running
	// pods, which cannot restart them: no checksum. An AdvancedCronJob
	// keeps the template of a Job or a BroadcastJob, as a CronJob does.
	{Group: "apps.kruise.io", Kind: "EphemeralJob", Fields: []string{"spec", "template"}, NoChecksum: true},
	{Group: "apps.kruise.io", Kind: "AdvancedCronJob", Fields: []string{"spec", "template", "jobTemplate", "spec", "template", "spec"}},
	{Group: "apps.kruise.io", Kind: "AdvancedCronJob", Fields: []string{"spec", "template", "broadcastJobTemplate", "spec", "template", "spec"}},
	// KEDA: a ScaledJob's jobTargetRef is a Job spec.
	{Group: "keda.sh", Kind: "ScaledJob", Fields: []string{"spec", "jobTargetRef", "template", "spec"}},
	{Group: "apps.openshift.io", Kind: "DeploymentConfig", Fields: []string{"spec", "template", "spec"}},
}, operatorPodSpecPaths)

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
		if !matchesKind(p.Group, p.Kind, group, kind) {
			continue
		}
		err := walk(obj, p.Fields, step, func(holder, spec *yaml.Node, last string, _ []string) bool {
			if spec.Kind != yaml.MappingNode {
				return false
			}
			t := podTemplate{spec: spec}
			if last == "spec" && !p.NoChecksum {
				t.holder = holder
			}
			if i, ok := at[spec]; ok {
				if found[i].holder == nil {
					found[i].holder = t.holder
				}
				return true
			}
			at[spec] = len(found)
			found = append(found, t)
			return true
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
// mapping that holds it, the last field name, and the trail of steps
// taken from n (field names, and "[i]" or the key for a "*" step; fn
// must not keep it). fn says whether the node is one the caller uses (a
// pod spec, a mapping that holds the image field): then step is called
// with every node passed on the way to it, as written, so that a node
// that a "*" step passes on its way to nothing (an alias of a list that
// holds no such field) is not taken for one on the way to images. It
// steps from a node with the same fields left once, so that "*" fields
// over aliases cannot make it exponential; another way to a node
// stepped from already is stepped when the first led to a node used. It
// looks fields up with get, and returns get's error (or values' error
// for a "*" step, prefixed with the field stepped from).
func walk(n *yaml.Node, fields []string, step func(*yaml.Node), fn func(holder, node *yaml.Node, last string, trail []string) bool) error {
	w := walker{step: step, fn: fn, seen: map[walkStep]bool{}, used: map[walkStep]bool{}}
	_, err := w.from(n, "", fields, nil, nil)
	return err
}

// walker is the state of one walk.
type walker struct {
	step func(*yaml.Node)
	fn   func(holder, node *yaml.Node, last string, trail []string) bool
	// seen are the nodes stepped from, with the fields left; used those
	// of them that led to a node used.
	seen, used map[walkStep]bool
}

// from walks from node n, which the field named from led to, with trail
// the steps taken to it and passed the nodes passed on the way, and
// reports whether it led to a node used.
func (w *walker) from(n *yaml.Node, from string, fields, trail []string, passed []*yaml.Node) (bool, error) {
	n = deref(n)
	if n == nil || len(fields) == 0 {
		return false, nil
	}
	at := walkStep{n, len(fields)}
	if w.seen[at] {
		if w.used[at] {
			w.take(passed)
		}
		return w.used[at], nil
	}
	w.seen[at] = true
	f, rest := fields[0], fields[1:]
	var next, via []*yaml.Node
	if f == "*" {
		vs, err := values(n)
		if ke := (*keyError)(nil); errors.As(err, &ke) {
			return false, &keyError{ke.line, strings.TrimSpace(from + " " + ke.msg)}
		}
		next = vs
	} else if sel, ok := parseSelector(f); ok {
		vs, list, err := selectItems(n, sel)
		if err != nil {
			return false, err
		}
		next, via = vs, list
	} else {
		e, err := get(n, f)
		if err != nil {
			return false, err
		}
		if e.value != nil {
			next, via = e.via[len(e.via)-1:], e.via[:len(e.via)-1]
		}
	}
	used := false
	for i, c := range next {
		p := append(append(slices.Clip(passed), via...), c)
		t := append(trail, f)
		if f == "*" {
			t[len(t)-1] = itemLabel(n, i)
		}
		if len(rest) == 0 {
			if w.fn(n, deref(c), f, t) {
				w.take(p)
				used = true
			}
			continue
		}
		u, err := w.from(c, f, rest, t, p)
		if err != nil {
			return false, err
		}
		used = used || u
	}
	w.used[at] = used
	return used, nil
}

// take steps each of the nodes passed.
func (w *walker) take(passed []*yaml.Node) {
	for _, n := range passed {
		w.step(n)
	}
}

// itemLabel names the i-th value that values(n) returns, for a trail:
// "[i]" for an item of a sequence, the key for a value of a mapping.
func itemLabel(n *yaml.Node, i int) string {
	if n.Kind == yaml.SequenceNode {
		return "[" + strconv.Itoa(i) + "]"
	}
	return n.Content[2*i].Value
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
