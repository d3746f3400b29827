package kindpath

import (
	"fmt"
	"slices"
	"strings"
)

// Image names a field that holds an image reference as a string,
// outside the container lists of a pod spec: an Argo Workflows template's
// container.image, a Tekton step's image, a SparkApplication's
// spec.image. A "*" field steps into every item of a sequence (or every
// value of a mapping), as in a PodSpec; the last field is a name.
//
// The images found are pinned like containers' images. They go into no
// pod template's checksum: a Checksum of the kind says where their
// checksum goes, if anywhere.
type Image struct {
	// Group is the API group of the kind, or "*" for any group.
	Group string
	// Kind is the object kind, e.g. "Workflow".
	Kind string
	// Fields lead from the object's root to the image field.
	Fields []string
	// Tagged says that the field holds a reference only when it carries
	// a tag or a digest: without one the operator completes it (a base
	// image that it tags with a version) or reads it as a version
	// (Grafana's spec.version), and it is left alone. String and
	// ParseImage do not carry it, nor Qualified.
	Tagged bool
	// Qualified says that the field holds a reference to pin only when
	// it names its registry: the operator completes a name without one
	// with a default registry of its own, not Docker Hub's (Crossplane
	// packages).
	Qualified bool
	// Embedded, when not empty, leads to the image field inside the YAML
	// or JSON document that the string at Fields holds (a manifest in a
	// ConfigMap's data): the part of the path after "|". Each document
	// of the text is followed. nil for an image field of the object.
	Embedded []string
}

// String formats p as the --image-path flag takes it.
func (p Image) String() string {
	s := kindPath(p.Group, p.Kind, p.Fields)
	if len(p.Embedded) > 0 {
		s += "|" + joinPath(p.Embedded)
	}
	return s
}

// Matches reports whether p applies to an object of API group group ("" for
// the core group) and kind kind.
func (p Image) Matches(group, kind string) bool {
	return matchesKind(p.Group, p.Kind, group, kind)
}

// ParseImage parses "[GROUP/]KIND=FIELD.PATH", e.g.
// "argoproj.io/Workflow=spec.templates.*.container.image". Without a group
// the kind matches in every API group. The last field must be a name:
// the key of the image field in its mapping, or a flag's value in a
// list of arguments, "args[flag=--reloader-image]"; other fields may
// select items by a key, "containers.*.env[name=AGENT_IMAGE].value" (see
// Selector). A field with a selector holds an image only when its value
// reads as a reference with a tag or digest: a URL, a path or a name
// alone there is left alone. A backslash makes the character after it
// part of a field's name: "data.policy\\.yaml".
//
// "[GROUP/]KIND=FIELD.PATH|EMBEDDED.PATH" names an image field inside
// the YAML or JSON document that the string at FIELD.PATH holds:
// "ConfigMap=data.policy\\.yaml|spec.image" (Embedded). The path after
// "|" has the same syntax, without flags, and its last field must be a
// name; the string's last field too.
func ParseImage(s string) (Image, error) {
	outer, inner, embedded := cutEmbedded(s)
	group, kind, fields, err := parseKindPath("image path", outer)
	if err != nil {
		return Image{}, err
	}
	last := fields[len(fields)-1]
	if sel, ok := ParseSelector(last); last == "*" || (ok && !sel.IsFlag()) || (embedded && ok) {
		what := "the image field"
		if embedded {
			what = "the string that holds a document"
		}
		return Image{}, fmt.Errorf("parsing image path %q: the last field must name %s, not %q", s, what, last)
	}
	p := Image{Group: group, Kind: kind, Fields: fields}
	if !embedded {
		return p, nil
	}
	if inner == "" {
		return Image{}, fmt.Errorf("parsing image path %q: want a path after \"|\", in the document the string holds", s)
	}
	if _, _, again := cutEmbedded(inner); again {
		return Image{}, fmt.Errorf("parsing image path %q: one \"|\" at most: a document inside a string inside a string is not followed (write \\| for a key's \"|\")", s)
	}
	p.Embedded = splitPath(inner)
	for _, f := range p.Embedded {
		if err := checkField(f); err != nil {
			return Image{}, fmt.Errorf("parsing image path %q: %w in %q", s, err, inner)
		}
		if sel, ok := ParseSelector(f); ok && sel.IsFlag() {
			return Image{}, fmt.Errorf("parsing image path %q: %s selects a flag's value, which a path inside a string may not", s, f)
		}
	}
	if last := p.Embedded[len(p.Embedded)-1]; last == "*" || strings.ContainsAny(last, "[]") {
		return Image{}, fmt.Errorf("parsing image path %q: the last field after \"|\" must name the image field, not %q", s, last)
	}
	return p, nil
}

// templateImages are the image fields of an Argo Workflows template.
var templateImages = [][]string{
	{"container", "image"},
	{"script", "image"},
	{"initContainers", "*", "image"},
	{"sidecars", "*", "image"},
	{"containerSet", "containers", "*", "image"},
}

// workflowImages are the image fields of an Argo Workflows workflow spec:
// those of its templates, of the templates written inline in a DAG's
// tasks and in steps (one level: an inline template's own inline
// templates are not followed), of its template defaults, which every
// template inherits, and the sidecar container of each executor plugin.
var workflowImages = slices.Concat(
	under([]string{"templates", "*"}, templateImages),
	under([]string{"templates", "*", "dag", "tasks", "*", "inline"}, templateImages),
	under([]string{"templates", "*", "steps", "*", "*", "inline"}, templateImages),
	under([]string{"templateDefaults"}, templateImages),
	[][]string{{"executorPlugins", "*", "spec", "sidecar", "container", "image"}},
)

// taskImages are the image fields of a Tekton task spec.
var taskImages = [][]string{
	{"steps", "*", "image"},
	{"sidecars", "*", "image"},
	{"stepTemplate", "image"},
}

// pipelineImages are the image fields of a Tekton pipeline spec: those of
// the task specs embedded in its tasks and finally tasks, and of the
// pipeline specs embedded in them (pipelines in pipelines), two levels
// deep.
var pipelineImages = nestPipelines(nestPipelines(taskSpecImages(nil)))

// taskSpecImages are the image fields of the task specs embedded in a
// pipeline spec's tasks and finally tasks, and pipelines, the image
// fields of pipeline specs, embedded in them too.
func taskSpecImages(pipelines [][]string) [][]string {
	return slices.Concat(
		under([]string{"tasks", "*", "taskSpec"}, taskImages),
		under([]string{"finally", "*", "taskSpec"}, taskImages),
		under([]string{"tasks", "*", "pipelineSpec"}, pipelines),
		under([]string{"finally", "*", "pipelineSpec"}, pipelines),
	)
}

// nestPipelines returns the image fields of a pipeline spec whose tasks
// may embed pipeline specs with the image fields inner.
func nestPipelines(inner [][]string) [][]string { return taskSpecImages(inner) }

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

// DefaultImages are the image fields of the CRDs that run images
// without a pod spec of their own, and of operator resources
// (operatorImages), each matched by API group and kind:
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
var DefaultImages = slices.Concat(
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
	operatorImages,
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
func imagePaths(group, kind string, prefix []string, paths [][]string) []Image {
	out := make([]Image, len(paths))
	for i, p := range under(prefix, paths) {
		out[i] = Image{Group: group, Kind: kind, Fields: p}
	}
	return out
}
