package renderer

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/textlist"
	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/renderer/stream"
	"github.com/digestpin/digestpin/resolution"
)

// Unpinned is a value that looks like an image reference with a tag,
// left as it is because no image field of digestpin's leads to it: an
// argument or env var of a container, a field of a custom resource
// whose name says image, or such a field of a YAML or JSON document
// inside a string (a manifest in a ConfigMap). A lock file or report of
// the stream does not cover it; an --image-path that names its field
// pins it (for one inside a string, an image path with "|" into the
// string's text, kindpath.Image.Embedded).
type Unpinned struct {
	// Reference is the value as written.
	Reference string `json:"reference"`
	// Workload names the field: the container and Field for a
	// container's argument or variable ("args[2]",
	// "args[flag=--sidecar-image]", "env[name=SIDECAR].value"), or
	// FieldPrefix and the field's path in a custom resource; inside a
	// string, FieldPrefix and the string's path, and Field EmbeddedPrefix
	// and the path in its text.
	Workload Workload `json:"workload"`
	// Where is the document, its source and line.
	Where string `json:"-"`
}

// String formats u as "Deployment/ns/op container "manager" field
// env[name=SIDECAR].value "registry.example/sidecar:1"".
func (u Unpinned) String() string { return fmt.Sprintf("%s %q", u.Workload, u.Reference) }

// unpinnedError is the error of Strict: every image reference left as a
// tag, the first with where it is.
func unpinnedError(ctx context.Context, us []Unpinned) error {
	return fmt.Errorf("%s: %d image references are left as tags where digestpin knows no image field (%s): %s; %s", us[0].Where, len(us), resolution.OptionName(ctx, "Strict"), unpinnedList(us), unpinnedAdvice(ctx, us))
}

// unpinnedAdvice says how to pin us: name their fields with an image
// path, and, for an image inside a string, with an image path into the
// string's text where the string is a literal block scalar, or write the
// digest into the text where it is made.
func unpinnedAdvice(ctx context.Context, us []Unpinned) string {
	var fields, embedded bool
	for _, u := range us {
		if strings.HasPrefix(u.Workload.Field, EmbeddedPrefix) {
			embedded = true
		} else {
			fields = true
		}
	}
	var advice []string
	if fields {
		advice = append(advice, "name their fields with "+resolution.OptionName(ctx, "ImagePaths"))
	}
	if embedded {
		advice = append(advice, "an image inside a string (an embedded manifest) is pinned where the string is a literal block scalar (|) by naming it with "+resolution.OptionName(ctx, "ImagePaths")+` KIND=FIELD.PATH|PATH.IN.TEXT (ConfigMap=data.policy\.yaml|spec.image), else where the text is made, with a digest in the chart's values`)
	}
	return strings.Join(advice, "; ")
}

// maxPlaces is how many of the objects that hold one value in one field
// unpinnedList names: a stream that repeats a chart a hundred times
// repeats its values a hundred times.
const maxPlaces = 3

// unpinnedList lists us as the error of Strict and the warning without it
// do, joined with ", ": each distinct value in each field once, in stream
// order of its first place. A value in one place is named as String
// formats it; one in several, by the field without the object's
// namespace and name, then how many places and the first maxPlaces
// objects: `Deployment container "manager" field env[name=SIDECAR].value
// "registry.example/sidecar:1" in 100 places (Deployment/a/op,
// Deployment/b/op, Deployment/c/op and 97 more)`. An object that holds
// the value twice in the field is named once.
func unpinnedList(us []Unpinned) string {
	type group struct {
		u       Unpinned
		places  int
		objects []string
		seen    map[string]bool
	}
	// The field a value is in, whatever the object: its kind, container
	// (or field of the object) and field in the container.
	type key struct{ ref, kind, container, field string }
	var groups []*group
	at := map[key]*group{}
	for _, u := range us {
		k := key{u.Reference, u.Workload.Kind, u.Workload.Container, u.Workload.Field}
		g := at[k]
		if g == nil {
			g = &group{u: u, seen: map[string]bool{}}
			at[k] = g
			groups = append(groups, g)
		}
		g.places++
		if obj := u.Workload.object(); !g.seen[obj] {
			g.seen[obj] = true
			g.objects = append(g.objects, obj)
		}
	}
	list := make([]string, len(groups))
	for i, g := range groups {
		if g.places == 1 {
			list[i] = g.u.String()
			continue
		}
		list[i] = fmt.Sprintf("%s %q in %d places (%s)", g.u.Workload.describe(g.u.Workload.Kind), g.u.Reference, g.places, textlist.Some(g.objects, maxPlaces))
	}
	return strings.Join(list, ", ")
}

// handle records that an image path or container field reached the
// scalar n: whatever it holds, it is not one to list as unpinned.
func (e *finder) handle(n *yaml.Node) {
	if n = stream.Deref(n); n != nil {
		once(&e.handled, n)
	}
}

// containerAt is a container of a pod spec, to scan once the document's
// image fields are all found.
type containerAt struct {
	c *yaml.Node
	w Workload
}

// scanUnpinned lists, in e.unpinned, the values that look like tagged
// image references and that no image field reached: in the args,
// command and env of the containers of obj's pod specs, and, when obj is
// a custom resource, in its fields whose name says image (outside its
// metadata, status, labels and annotations).
func (e *finder) scanUnpinned(obj *yaml.Node, group string, w Workload) {
	for _, c := range e.containers {
		if !once(&e.scanned, c.c) {
			continue
		}
		e.scanContainer(c.c, c.w)
	}
	e.containers = e.containers[:0]
	if !isCustomGroup(group) || !once(&e.scanned, obj) {
		return
	}
	// Fields named image that name no image the cluster pulls.
	for _, p := range notPulled {
		if p.Matches(group, w.Kind) {
			_ = walk(obj, p.Fields[:len(p.Fields)-1], func(*yaml.Node) {}, func(_, m *yaml.Node, _ string, _ []string) bool {
				if v, _ := stream.Get(m, p.Fields[len(p.Fields)-1]); v.Value != nil {
					e.handle(v.Value)
				}
				return false
			})
		}
	}
	for i := 0; i+1 < len(obj.Content); i += 2 {
		if k := obj.Content[i].Value; k != "metadata" && k != "status" {
			e.scanFields(obj.Content[i+1], k, k, w, 0)
		}
	}
}

// notPulled are fields of custom resources named image that name no
// image to pull as written: Strimzi pushes the image it builds for a
// KafkaConnect to spec.build.output.image.
var notPulled = []kindpath.Image{
	{Group: "kafka.strimzi.io", Kind: "KafkaConnect", Fields: []string{"spec", "build", "output", "image"}},
}

// maxScanDepth bounds how deep scanFields looks into a custom resource.
const maxScanDepth = 64

// scanFields scans node n of a custom resource, the value of field key
// at path, for image-like values under keys whose name says image.
func (e *finder) scanFields(n *yaml.Node, key, path string, w Workload, depth int) {
	n = stream.Deref(n)
	if n == nil || depth > maxScanDepth || !once(&e.scanned, n) {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if k == "annotations" || k == "labels" {
				continue
			}
			e.scanFields(n.Content[i+1], k, path+"."+k, w, depth+1)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			e.scanFields(c, key, path+"["+strconv.Itoa(i)+"]", w, depth+1)
		}
	case yaml.ScalarNode:
		if mentionsImage(key) {
			w.Container = FieldPrefix + path
			e.unpinnedValue(n, n.Value, w)
		}
	}
}

// scanContainer scans a container's args, command and env.
func (e *finder) scanContainer(c *yaml.Node, w Workload) {
	for _, list := range []string{"args", "command"} {
		l, _ := stream.Get(c, list)
		if l.Value == nil || l.Value.Kind != yaml.SequenceNode {
			continue
		}
		flag := "" // the flag an item follows, if it takes a value
		for i, item := range l.Value.Content {
			arg := stream.Deref(item)
			if arg.Kind != yaml.ScalarNode || arg.Tag != "!!str" {
				flag = ""
				continue
			}
			w.Field = list + "[" + strconv.Itoa(i) + "]"
			switch f, v, ok := strings.Cut(arg.Value, "="); {
			case strings.HasPrefix(arg.Value, "-") && ok:
				w.Field = list + "[" + kindpath.FlagKey + "=" + f + "]"
				e.unpinnedText(arg, v, f, w)
				flag = ""
			case strings.HasPrefix(arg.Value, "-"):
				flag = arg.Value
			default:
				if flag != "" {
					w.Field = list + "[" + kindpath.FlagKey + "=" + flag + "]"
				}
				e.unpinnedText(arg, arg.Value, flag, w)
				flag = ""
			}
		}
	}
	env, _ := stream.Get(c, "env")
	if env.Value == nil || env.Value.Kind != yaml.SequenceNode {
		return
	}
	for _, item := range env.Value.Content {
		nm, _ := stream.Get(item, "name")
		v, _ := stream.Get(item, "value")
		if nm.Value == nil || v.Value == nil || nm.Value.Kind != yaml.ScalarNode || v.Value.Kind != yaml.ScalarNode {
			continue
		}
		w.Field = "env[name=" + nm.Value.Value + "].value"
		e.unpinnedText(v.Value, v.Value.Value, nm.Value.Value, w)
	}
}

// unpinnedText lists text, the value of scalar n (or the part after a
// flag), named by the flag or variable name, when it looks like an
// image: a tagged reference whose name says image, or that names its
// registry.
func (e *finder) unpinnedText(n *yaml.Node, text, name string, w Workload) {
	if mentionsImage(name) || namesRegistry(text) {
		e.unpinnedValue(n, text, w)
	}
}

// unpinnedValue lists text, the value of scalar n, used by w, when n is
// a string that no image field reached and text reads as a reference
// with a tag and no digest.
func (e *finder) unpinnedValue(n *yaml.Node, text string, w Workload) {
	if e.handled[n] || n.Tag != "!!str" || !looksPinnable(text) {
		return
	}
	e.unpinned = append(e.unpinned, Unpinned{Reference: strings.Clone(text), Workload: e.own(w), Where: e.d.At(n.Line)})
}

// looksPinnable reports whether s reads as an image reference with a
// tag and without a digest, and has a repository path ("/"): a
// "host:port" or "name:value" alone is too often something else.
func looksPinnable(s string) bool {
	if !readsAsReference(s) || !strings.Contains(s, "/") || strings.ContainsAny(s, "@,;=") {
		return false
	}
	if _, tag, _ := splitImage(s); tag == "" {
		return false
	}
	_, err := name.NewTag(s, name.StrictValidation)
	return err == nil
}

// mentionsImage reports whether a field, flag or variable name says
// image: "image", "sidecarImage", "--engine-image", "AGENT_IMAGE".
func mentionsImage(s string) bool { return strings.Contains(strings.ToLower(s), "image") }

// isCustomGroup reports whether an API group is a custom resource's: one
// with a dot that is not one of Kubernetes' own (….k8s.io). The groups
// of built-in kinds without a dot (apps, batch, policy) are not.
func isCustomGroup(group string) bool {
	return strings.Contains(group, ".") && !strings.HasSuffix(group, ".k8s.io") && group != "k8s.io"
}
