package renderer

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// ImagePath names a field that holds an image reference as a string,
// outside the container lists of a pod spec: an Argo Workflows template's
// container.image, a Tekton step's image, a SparkApplication's
// spec.image. A "*" field steps into every item of a sequence (or every
// value of a mapping), as in a PodSpecPath; the last field is a name.
//
// The images found are pinned like containers' images. They go into no
// pod template's checksum: a ChecksumPath of the kind says where their
// checksum goes, if anywhere.
type ImagePath struct {
	// Group is the API group of the kind, or "*" for any group.
	Group string
	// Kind is the object kind, e.g. "Workflow".
	Kind string
	// Fields lead from the object's root to the image field.
	Fields []string
}

// String formats p as the --image-path flag takes it.
func (p ImagePath) String() string { return kindPath(p.Group, p.Kind, p.Fields) }

// ParseImagePath parses "[GROUP/]KIND=FIELD.PATH", e.g.
// "argoproj.io/Workflow=spec.templates.*.container.image". Without a group
// the kind matches in every API group. The last field must be a name:
// the key of the image field in its mapping.
func ParseImagePath(s string) (ImagePath, error) {
	group, kind, fields, err := parseKindPath("image path", s)
	if err != nil {
		return ImagePath{}, err
	}
	if fields[len(fields)-1] == "*" {
		return ImagePath{}, fmt.Errorf("parsing image path %q: the last field must name the image field, not \"*\"", s)
	}
	return ImagePath{Group: group, Kind: kind, Fields: fields}, nil
}

// ChecksumPath says where an object of one kind gets the checksum of the
// image fields that its ImagePaths find: in the metadata.annotations of
// each mapping that Fields lead to (created when missing, as in a pod
// template), covering the image fields inside that mapping, i.e. those of
// the ImagePaths whose fields start with Fields. Fields may be empty: the
// object itself. An image path that two checksum paths cover belongs to
// the longer. Without a ChecksumPath a kind's image fields get no
// checksum.
type ChecksumPath struct {
	// Group is the API group of the kind, or "*" for any group.
	Group string
	// Kind is the object kind.
	Kind string
	// Fields lead from the object's root to the mapping that gets the
	// annotation.
	Fields []string
}

// String formats p as the --checksum-path flag takes it: "." for the
// object itself.
func (p ChecksumPath) String() string {
	if len(p.Fields) == 0 {
		return kindPath(p.Group, p.Kind, []string{"."})
	}
	return kindPath(p.Group, p.Kind, p.Fields)
}

// ParseChecksumPath parses "[GROUP/]KIND=FIELD.PATH", e.g.
// "example.com/Runner=spec.runTemplate", or "[GROUP/]KIND=." for the
// object's own metadata.
func ParseChecksumPath(s string) (ChecksumPath, error) {
	if k, ok := strings.CutSuffix(s, "=."); ok {
		group, kind, err := parseKind("checksum path", s, k)
		return ChecksumPath{Group: group, Kind: kind}, err
	}
	group, kind, fields, err := parseKindPath("checksum path", s)
	if err != nil {
		return ChecksumPath{}, err
	}
	return ChecksumPath{Group: group, Kind: kind, Fields: fields}, nil
}

// checkChecksumPaths refuses a checksum path that no image path goes
// through: it would write no checksum (a path that names an image field
// itself, a misspelt field, a kind without image paths), and in
// ModeAnnotate an image that moved would then change nothing at all. A
// checksum path covers the image paths of its kind (in a group both may
// match) whose fields start with its own and go further. Refusing breaks
// no chart: whether a path covers one depends on the paths alone.
func (r *Renderer) checkChecksumPaths() error {
	imagePaths := r.imagePaths()
	for _, c := range r.ChecksumPaths {
		var ofKind []string
		covers := false
		for _, p := range imagePaths {
			if p.Kind != c.Kind || (c.Group != "*" && p.Group != "*" && c.Group != p.Group) {
				continue
			}
			ofKind = append(ofKind, p.String())
			if len(c.Fields) < len(p.Fields) && slices.Equal(c.Fields, p.Fields[:len(c.Fields)]) {
				covers = true
				break
			}
		}
		switch {
		case covers:
		case len(ofKind) == 0:
			why := "there is no image path for " + c.Kind
			for _, p := range r.paths() {
				if p.Kind == c.Kind {
					why += "; its pod templates get a checksum of their own"
					break
				}
			}
			return fmt.Errorf("checksum path %s covers no image path: %s", c, why)
		default:
			kind, through := strings.TrimSuffix(kindPath(c.Group, c.Kind, nil), "="), "the object"
			if len(c.Fields) > 0 {
				through = strings.Join(c.Fields, ".")
			}
			return fmt.Errorf("checksum path %s covers no image path: no image path of %s goes through %s to a field inside it (image paths of %s: %s), so it would write no checksum", c, kind, through, c.Kind, strings.Join(ofKind, ", "))
		}
	}
	return nil
}

// FieldPrefix starts the Workload.Container of an image field that an
// ImagePath found, and its line in a checksum: "field/PATH=REF", where
// PATH is the field's path in the object, items numbered:
// "field/spec.templates[0].container.image".
const FieldPrefix = "field/"

// workflowImages are the image fields of an Argo Workflows workflow spec.
var workflowImages = [][]string{
	{"templates", "*", "container", "image"},
	{"templates", "*", "script", "image"},
	{"templates", "*", "initContainers", "*", "image"},
	{"templates", "*", "sidecars", "*", "image"},
	{"templates", "*", "containerSet", "containers", "*", "image"},
}

// taskImages are the image fields of a Tekton task spec.
var taskImages = [][]string{
	{"steps", "*", "image"},
	{"sidecars", "*", "image"},
	{"stepTemplate", "image"},
}

// pipelineImages are the image fields of a Tekton pipeline spec: those of
// the task specs embedded in its tasks and finally tasks.
var pipelineImages = slices.Concat(
	under([]string{"tasks", "*", "taskSpec"}, taskImages),
	under([]string{"finally", "*", "taskSpec"}, taskImages),
)

// sparkImages are the image fields of a Spark operator application spec.
var sparkImages = [][]string{
	{"image"},
	{"driver", "image"},
	{"driver", "initContainers", "*", "image"},
	{"driver", "sidecars", "*", "image"},
	{"executor", "image"},
	{"executor", "initContainers", "*", "image"},
	{"executor", "sidecars", "*", "image"},
}

// DefaultImagePaths are the image fields of the CRDs that run images
// without a pod spec of their own, each matched by API group and kind:
//
//   - Argo Workflows: the templates of a Workflow, WorkflowTemplate,
//     ClusterWorkflowTemplate and CronWorkflow (its spec.workflowSpec):
//     container, script, initContainers, sidecars and containerSet images;
//   - Tekton: the steps, sidecars and stepTemplate of a Task and
//     ClusterTask, of the task specs embedded in a Pipeline's tasks and
//     finally tasks, in a TaskRun and in a PipelineRun's pipeline spec;
//     a StepAction's image;
//   - the Spark operator: a SparkApplication's image, and the images,
//     initContainers and sidecars of its driver and executor, also in a
//     ScheduledSparkApplication's template.
//
// None of them has a checksum: a Workflow, TaskRun or PipelineRun runs
// once, and a template (WorkflowTemplate, CronWorkflow, Task, Pipeline)
// has no running pods to roll: the next run takes the pinned images. The
// Spark operator resubmits an application whose spec changes, which the
// pinned image does.
var DefaultImagePaths = slices.Concat(
	imagePaths("argoproj.io", "Workflow", []string{"spec"}, workflowImages),
	imagePaths("argoproj.io", "WorkflowTemplate", []string{"spec"}, workflowImages),
	imagePaths("argoproj.io", "ClusterWorkflowTemplate", []string{"spec"}, workflowImages),
	imagePaths("argoproj.io", "CronWorkflow", []string{"spec", "workflowSpec"}, workflowImages),
	imagePaths("tekton.dev", "Task", []string{"spec"}, taskImages),
	imagePaths("tekton.dev", "ClusterTask", []string{"spec"}, taskImages),
	imagePaths("tekton.dev", "Pipeline", []string{"spec"}, pipelineImages),
	imagePaths("tekton.dev", "TaskRun", []string{"spec", "taskSpec"}, taskImages),
	imagePaths("tekton.dev", "PipelineRun", []string{"spec", "pipelineSpec"}, pipelineImages),
	imagePaths("tekton.dev", "StepAction", []string{"spec"}, [][]string{{"image"}}),
	imagePaths("sparkoperator.k8s.io", "SparkApplication", []string{"spec"}, sparkImages),
	imagePaths("sparkoperator.k8s.io", "ScheduledSparkApplication", []string{"spec", "template"}, sparkImages),
)

// under puts each of paths under prefix.
func under(prefix []string, paths [][]string) [][]string {
	out := make([][]string, len(paths))
	for i, p := range paths {
		out[i] = slices.Concat(prefix, p)
	}
	return out
}

// imagePaths declares paths, under prefix, for one group and kind.
func imagePaths(group, kind string, prefix []string, paths [][]string) []ImagePath {
	out := make([]ImagePath, len(paths))
	for i, p := range under(prefix, paths) {
		out[i] = ImagePath{Group: group, Kind: kind, Fields: p}
	}
	return out
}

// imageKeys returns the last fields of the image paths that do not
// contain "image", the word that tells a document that may hold an image
// field (mayHoldImage); usually none.
func (r *Renderer) imageKeys() []string {
	var keys []string
	for _, p := range r.imagePaths() {
		if f := p.Fields[len(p.Fields)-1]; !strings.Contains(f, string(imageKey)) && !slices.Contains(keys, f) {
			keys = append(keys, f)
		}
	}
	return keys
}

func (r *Renderer) imagePaths() []ImagePath {
	if r.ImagePaths == nil {
		return DefaultImagePaths
	}
	return r.ImagePaths
}

// imagePathsFor returns the image paths of a group and kind.
func (r *Renderer) imagePathsFor(group, kind string) []ImagePath {
	var paths []ImagePath
	for _, p := range r.imagePaths() {
		if matchesKind(p.Group, p.Kind, group, kind) && len(p.Fields) > 0 {
			paths = append(paths, p)
		}
	}
	return paths
}

// imageFields pins the image fields that paths (the image paths of the
// object's group and kind) find in obj, used by w, and writes the checksums that
// its checksum paths ask for. pods are the pod templates and pod specs
// that the object's pod spec paths found, which a checksum path may not
// name: they have a checksum of their own, or no metadata.
func (e *editor) imageFields(obj *yaml.Node, group, kind string, paths []ImagePath, w Workload, pods map[*yaml.Node]string) error {
	if len(paths) == 0 {
		return nil
	}
	var checks []ChecksumPath
	for _, c := range e.r.ChecksumPaths {
		if matchesKind(c.Group, c.Kind, group, kind) {
			checks = append(checks, c)
		}
	}
	// First, pin every image field that the paths find, each once
	// however many paths lead to it, whatever the checksum paths say.
	fields := map[fieldKey]string{} // the checksum line of each field
	if _, err := e.pinFields(obj, "", paths, 0, w, fields); err != nil {
		return err
	}
	// Then the checksums: each image path belongs to the longest
	// checksum path that its fields start with, or to none.
	owner := make([]int, len(paths))
	for i, p := range paths {
		owner[i] = -1
		for j, c := range checks {
			if len(c.Fields) < len(p.Fields) && slices.Equal(c.Fields, p.Fields[:len(c.Fields)]) &&
				(owner[i] < 0 || len(c.Fields) > len(checks[owner[i]].Fields)) {
				owner[i] = j
			}
		}
	}
	// A mapping that two checksum paths lead to gets one checksum, of
	// the fields of both.
	var annotated []*yaml.Node
	linesOf := map[*yaml.Node][]string{}
	var podNodes map[*yaml.Node]bool // the nodes inside pods, once asked
	for j, c := range checks {
		var own []ImagePath
		for i, p := range paths {
			if owner[i] == j {
				own = append(own, p)
			}
		}
		if len(own) == 0 {
			continue
		}
		type holder struct {
			node  *yaml.Node
			trail string
		}
		var holders []holder
		var bad error
		if len(c.Fields) == 0 {
			holders = append(holders, holder{node: obj})
		}
		err := walk(obj, c.Fields, map[walkStep]bool{}, e.routes.step, func(_, node *yaml.Node, _ string, trail []string) {
			// A checksum path that misses its mapping would leave the
			// images under it out of every checksum: refuse it.
			switch at := fieldPath(trail); {
			case bad != nil || (node.Kind == yaml.ScalarNode && node.Tag == "!!null"):
			case node.Kind != yaml.MappingNode:
				bad = fmt.Errorf("%s: %s: the checksum path %s leads to %s at %s, want a mapping", e.d.at(node.Line), w.object(), c, kindName(node), at)
			default:
				holders = append(holders, holder{node, at})
			}
		})
		if err != nil {
			return e.keyError(err, w.object())
		}
		if bad != nil {
			return bad
		}
		for _, h := range holders {
			what, ok := pods[h.node]
			if !ok && len(pods) > 0 {
				if podNodes == nil {
					podNodes = nodesUnder(pods)
				}
				if podNodes[h.node] {
					what, ok = "mapping inside a pod template", true
				}
			}
			if ok {
				// The annotation would be a second checksum of the same
				// images, or a field of a pod spec that the API server
				// drops.
				return fmt.Errorf("%s: %s: the checksum path %s leads to the %s at %s, whose images the pod template's own checksum covers; name a mapping outside the pod template", e.d.at(h.node.Line), w.object(), c, what, h.trail)
			}
			lines, err := e.pinFields(h.node, h.trail, own, len(c.Fields), w, fields)
			if err != nil {
				return err
			}
			if _, ok := linesOf[h.node]; !ok {
				annotated = append(annotated, h.node)
			}
			for _, l := range lines {
				if !slices.Contains(linesOf[h.node], l) {
					linesOf[h.node] = append(linesOf[h.node], l)
				}
			}
		}
	}
	for _, h := range annotated {
		if err := e.checksum(h, linesOf[h], w); err != nil {
			return err
		}
	}
	return nil
}

// nodesUnder returns the nodes inside the nodes of pods (aliases
// followed), each visited once.
func nodesUnder(pods map[*yaml.Node]string) map[*yaml.Node]bool {
	seen := map[*yaml.Node]bool{}
	var stack []*yaml.Node
	for p := range pods {
		stack = append(stack, p)
	}
	for len(stack) > 0 {
		m := deref(stack[len(stack)-1])
		stack = stack[:len(stack)-1]
		if m == nil || seen[m] {
			continue
		}
		seen[m] = true
		stack = append(stack, m.Content...)
	}
	return seen
}

// fieldKey is an image field: key in mapping m.
type fieldKey struct {
	m   *yaml.Node
	key string
}

// pinFields pins the image fields of paths in mapping from, which the
// path base (fieldPath) leads to from the object, following each path's
// fields after the first skip. It pins each field once: fields holds the
// checksum line of each field pinned ("" for none: a field left unset,
// or whose digest is not known yet), and a field that a pod spec path
// found is its container's, pinned and reported as such. It returns the
// checksum lines of the fields found, each once.
func (e *editor) pinFields(from *yaml.Node, base string, paths []ImagePath, skip int, w Workload, fields map[fieldKey]string) ([]string, error) {
	type field struct {
		m    *yaml.Node // the mapping that holds the image field
		path string
	}
	var lines []string
	listed := map[fieldKey]bool{}
	for _, p := range paths {
		key := p.Fields[len(p.Fields)-1]
		var found []field
		if mid := p.Fields[skip : len(p.Fields)-1]; len(mid) == 0 {
			found = append(found, field{from, joinPath(base, key)})
		} else {
			err := walk(from, mid, map[walkStep]bool{}, e.routes.step, func(_, node *yaml.Node, _ string, trail []string) {
				if node.Kind == yaml.MappingNode {
					found = append(found, field{node, joinPath(joinPath(base, fieldPath(trail)), key)})
				}
			})
			if err != nil {
				return nil, e.keyError(err, w.object())
			}
		}
		for _, f := range found {
			k := fieldKey{deref(f.m), key}
			line, done := fields[k]
			if !done {
				var err error
				if line, err = e.pinField(f.m, key, f.path, w); err != nil {
					return nil, err
				}
				fields[k] = line
			}
			if line != "" && !listed[k] {
				listed[k] = true
				lines = append(lines, line)
			}
		}
	}
	return lines, nil
}

// pinField pins image field key of mapping m, at path in the object, and
// returns its checksum line ("" for none). A field that a pod spec path
// found already is not pinned again: it is the container's (or image
// volume's), and its line names the field with the value pinned.
func (e *editor) pinField(m *yaml.Node, key, path string, w Workload) (string, error) {
	w.Container = FieldPrefix + path
	if value, ok := e.podFields[fieldKey{deref(m), key}]; ok {
		if value == "" {
			return "", nil
		}
		return w.Container + "=" + value, nil
	}
	image, err := get(m, key)
	if err != nil {
		return "", e.keyError(err, w.String())
	}
	if unset(image.value) {
		return "", nil
	}
	return e.pinImage(nil, m, key, w)
}

// unset reports whether an image field found by an image path is one to
// leave alone: absent, null or "" (the operators read an optional image
// left empty as unset: a Spark driver without its own image runs
// spec.image), or a placeholder that the workflow engine fills in when
// it runs: Argo Workflows' "{{inputs.parameters.image}}", Tekton's
// "$(params.image)". Neither "{{" nor "$(" can be part of a reference.
func unset(n *yaml.Node) bool {
	switch {
	case n == nil:
		return true
	case n.Kind != yaml.ScalarNode:
		return false // pinImage refuses it
	}
	return n.Tag == "!!null" || (n.Tag == "!!str" && (n.Value == "" || strings.Contains(n.Value, "{{") || strings.Contains(n.Value, "$(")))
}

// fieldPath joins a walk's trail into a field path: "spec.templates[0]".
func fieldPath(trail []string) string {
	var b strings.Builder
	for _, t := range trail {
		if b.Len() > 0 && !strings.HasPrefix(t, "[") {
			b.WriteByte('.')
		}
		b.WriteString(t)
	}
	return b.String()
}

// joinPath appends field path rest to path base.
func joinPath(base, rest string) string {
	if base == "" || strings.HasPrefix(rest, "[") {
		return base + rest
	}
	return base + "." + rest
}
