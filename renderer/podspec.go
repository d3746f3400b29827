package renderer

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/renderer/stream"
)

// containerFields are the fields of a pod spec that hold containers.
var containerFields = []string{"initContainers", "containers", "ephemeralContainers"}

// podTemplate is one pod spec found in an object.
type podTemplate struct {
	// spec is the pod spec mapping.
	spec *yaml.Node
	// holder is the mapping whose metadata gets the checksum, or nil.
	holder *yaml.Node
	// path is where the pod template is in the object: the holder's
	// path ("spec.template"), or the pod spec's when there is no holder.
	path string
}

// findPodTemplates returns the pod specs of obj, a mapping node of the
// given API group and kind, according to every paths entry that matches
// them, in the order of paths. A pod spec that two entries lead to (a
// --pod-spec-path that repeats a default) is returned once, with a
// holder if either entry gives one. It calls step with each node it
// passes, as written, and spends what it reads from bound (walkWithin).
func findPodTemplates(obj *yaml.Node, group, kind string, paths []kindpath.PodSpec, step func(*yaml.Node), bound *fanOut) ([]podTemplate, error) {
	var found []podTemplate
	at := map[*yaml.Node]int{} // pod spec → its index in found
	for _, p := range paths {
		if !p.Matches(group, kind) {
			continue
		}
		err := walkWithin(bound, obj, p.Fields, step, func(holder, spec *yaml.Node, last string, trail []string) bool {
			if spec.Kind != yaml.MappingNode {
				return false
			}
			t := podTemplate{spec: spec}
			if last == "spec" && !p.NoChecksum {
				t.holder = holder
				trail = trail[:len(trail)-1]
			}
			t.path = fieldPath(trail)
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
// looks fields up with stream.Get, and returns its error (or stream.Values' error
// for a "*" step, prefixed with the field stepped from).
func walk(n *yaml.Node, fields []string, step func(*yaml.Node), fn func(holder, node *yaml.Node, last string, trail []string) bool) error {
	return walkWithin(nil, n, fields, step, fn)
}

// walkWithin is walk, spending from bound each node it steps from and
// each node it reaches: a walk that follows "*" or a selector over a
// node that aliases name in many objects is paid for each time. Once
// bound runs out, it stops with the bound's error (fanOut.keyError).
func walkWithin(bound *fanOut, n *yaml.Node, fields []string, step func(*yaml.Node), fn func(holder, node *yaml.Node, last string, trail []string) bool) error {
	w := walker{step: step, fn: fn, seen: map[walkStep]bool{}, used: map[walkStep]bool{}, bound: bound}
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
	// bound is what the walk may read (nil: no bound).
	bound *fanOut
}

// from walks from node n, which the field named from led to, with trail
// the steps taken to it and passed the nodes passed on the way, and
// reports whether it led to a node used.
func (w *walker) from(n *yaml.Node, from string, fields, trail []string, passed []*yaml.Node) (bool, error) {
	n = stream.Deref(n)
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
		vs, err := stream.Values(n)
		if ke := (*stream.KeyError)(nil); errors.As(err, &ke) {
			return false, &stream.KeyError{Line: ke.Line, Msg: strings.TrimSpace(from + " " + ke.Msg)}
		}
		next = vs
	} else if sel, ok := kindpath.ParseSelector(f); ok {
		vs, list, err := selectItems(n, sel)
		if err != nil {
			return false, err
		}
		next, via = vs, list
	} else {
		e, err := stream.Get(n, f)
		if err != nil {
			return false, err
		}
		if e.Value != nil {
			next, via = e.Via[len(e.Via)-1:], e.Via[:len(e.Via)-1]
		}
	}
	if w.bound != nil && !w.bound.spend(1+len(next)) {
		return false, w.bound.keyError()
	}
	used := false
	for i, c := range next {
		p := append(append(slices.Clip(passed), via...), c)
		t := append(trail, f)
		if f == "*" {
			t[len(t)-1] = itemLabel(n, i)
		}
		if len(rest) == 0 {
			if w.fn(n, stream.Deref(c), f, t) {
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
