package kindpath

import "slices"

// PodSpec names where objects of one kind keep a pod spec: the fields
// from the object's root to a mapping with `containers`. A "*" field steps
// into every item of a sequence (or every value of a mapping).
//
// When the last field is "spec", the pod spec's template is the mapping
// that holds it, and the checksum annotation is written to that mapping's
// metadata.annotations, unless NoChecksum is set. For other paths no
// checksum is written.
type PodSpec struct {
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
	// ParsePodSpec do not carry it: a path given as a flag always
	// follows the rule on its last field.
	NoChecksum bool
}

// String formats p as the --pod-spec-path flag takes it.
func (p PodSpec) String() string { return kindPath(p.Group, p.Kind, p.Fields) }

// Matches reports whether p applies to an object of API group group ("" for
// the core group) and kind kind.
func (p PodSpec) Matches(group, kind string) bool {
	return matchesKind(p.Group, p.Kind, group, kind)
}

// ParsePodSpec parses "KIND=FIELD.PATH" or "GROUP/KIND=FIELD.PATH",
// e.g. "example.com/Worker=spec.podTemplate.spec". Without a group the
// kind matches in every API group. A field may select the items of a
// list by a key, "spec.pools[name=gpu].template.spec" (see Selector).
func ParsePodSpec(s string) (PodSpec, error) {
	group, kind, fields, err := parseKindPath("pod spec path", s)
	if err != nil {
		return PodSpec{}, err
	}
	return PodSpec{Group: group, Kind: kind, Fields: fields}, nil
}

// DefaultPodSpecs are the pod specs of the Kubernetes workload kinds
// (in their current and deprecated API groups), of the workload CRDs
// that people deploy with Helm: Argo Rollouts, Knative Serving,
// OpenKruise, KEDA's ScaledJob and OpenShift's DeploymentConfig, and of
// operator resources (operatorPodSpecs). Each is matched by API group
// and kind, in every version of the group.
var DefaultPodSpecs = slices.Concat([]PodSpec{
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
}, operatorPodSpecs)
