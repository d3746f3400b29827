package steady

import (
	"fmt"
	"slices"
	"strings"
)

// Volatility is what Diff found: the fields that differ between two
// renders of the same chart and values. A nil *Volatility means that no
// second render was made, and nothing is known to be volatile. It is not
// changed after Diff, so Keep may use it from several goroutines.
type Volatility struct {
	// Volatile lists each object with volatile fields, and each object
	// that only one render holds: those of the input in its order, then
	// those only in the second render in its order.
	Volatile []Volatile
	// lines are the warnings about each entry of Volatile.
	lines []string
	// fields are the volatile paths of each document, by document key.
	fields map[string]pathSet
}

// Volatile is one object whose fields differ between two renders of the
// same input, as the JSON report shows it.
type Volatile struct {
	// Object is Kind/namespace/name (Kind/name without a namespace) as
	// the render that holds it names it; without a name, "Kind in
	// document N" or "document N".
	Object string `json:"object"`
	// Source is the Helm template file of the document, if known.
	Source string `json:"source,omitempty"`
	// Document is the 1-based number of the document in its stream: the
	// input, or the second render when OnlyIn is "second".
	Document int `json:"document"`
	// Fields are the paths of the volatile fields, relative to the
	// object, in the syntax of the package documentation.
	Fields []string `json:"fields,omitempty"`
	// OnlyIn is "input" or "second" when only that render holds the
	// object (or this item of a List); "" when both do.
	OnlyIn string `json:"onlyIn,omitempty"`
	// Restarts is true when a volatile field lies in a pod template, or
	// a workload is in one render only: the workload restarts on every
	// render.
	Restarts bool `json:"restarts"`
	// RestartBy describes the volatile fields in a pod template, e.g.
	// "pod template annotation checksum/config".
	RestartBy []string `json:"restartBy,omitempty"`
}

// maxFields bounds the fields a warning names; the report has them all.
const maxFields = 8

// warning is the one line that tells a person about x, whose fields are
// named by labels, e.g.
//
//	Deployment/ns/k8tz (k8tz/templates/deployment.yaml): pod template annotation checksum/config differs between two renders of the same input: this workload restarts on every render
func warning(x Volatile, labels []string) string {
	var b strings.Builder
	b.WriteString(x.Object)
	if x.Source != "" {
		fmt.Fprintf(&b, " (%s)", x.Source)
	}
	switch x.OnlyIn {
	case "input":
		b.WriteString(": in the input, but not in a second render of the same input")
	case "second":
		b.WriteString(": in a second render of the same input, but not in the input")
	default:
		b.WriteString(": " + list(labels))
		if len(labels) == 1 {
			b.WriteString(" differs")
		} else {
			b.WriteString(" differ")
		}
		b.WriteString(" between two renders of the same input")
	}
	if x.Restarts {
		b.WriteString(": this workload restarts on every render")
	}
	return b.String()
}

// list joins at most maxFields items with commas.
func list(items []string) string {
	if len(items) <= maxFields {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxFields], ", "), len(items)-maxFields)
}

// Warnings returns one line for each entry of v.Volatile, naming the
// object, its volatile fields and, when they restart a workload, saying
// so; nil when there is none, or v is nil. A volatile field in a pod
// template is named by what it is ("pod template annotation
// checksum/config"), others by their path.
func (v *Volatility) Warnings() []string {
	if v == nil || len(v.lines) == 0 {
		return nil
	}
	return slices.Clone(v.lines)
}

// add appends x to the report, its fields named by labels.
func (v *Volatility) add(x Volatile, labels []string) {
	v.Volatile = append(v.Volatile, x)
	v.lines = append(v.lines, warning(x, labels))
}

// Diff compares input, the stream digestpin is given, with second, another
// render of the same chart and values as Helm wrote it, and returns the
// volatile fields. Documents are matched by "# Source:" file and position
// (see the package documentation). It fails on a document that is not
// YAML, except where both renders hold the same bytes: those are not
// decoded at all, and the renderer reads every document of the input. It
// is safe for concurrent use.
func Diff(input, second []byte, o Options) (*Volatility, error) {
	a, err := parse(input, "the input")
	if err != nil {
		return nil, err
	}
	b, err := parse(second, "the second render")
	if err != nil {
		return nil, err
	}
	if err := matchByKind(a, b); err != nil {
		return nil, err
	}
	v := &Volatility{fields: map[string]pathSet{}}
	groups := sameCounts(a, b)
	for _, d := range a.docs {
		e, ok := b.byKey[d.key]
		if !ok {
			x, err := d.value()
			if err != nil {
				return nil, err
			}
			v.add(o.only(d, x, "input"), nil)
			continue
		}
		x, y, equal, err := compare(d, e)
		if err != nil {
			return nil, err
		}
		if equal {
			continue
		}
		// Documents paired with another kind of object mean the second
		// file is not a render of the same input: every field would look
		// volatile and hide a real change.
		if ka, kb, ok := sameKinds(x, y); !ok {
			return nil, fmt.Errorf("%s: %s in the input, %s in the second render: not two renders of the same chart and values", d.where(), ka, kb)
		}
		df := newDiffer()
		df.diff(nil, x, y)
		// A file whose number of documents differs between the renders
		// pairs its documents by a position that shifts: what differs
		// between two of them says nothing about the next render's.
		if groups[group(d.key)] {
			v.fields[d.key] = newPathSet(df)
		}
		report := &differ{byIndex: true}
		report.diff(nil, x, y)
		o.volatile(v, d, x, y, report.paths)
	}
	for _, e := range b.docs {
		if _, ok := a.byKey[e.key]; !ok {
			y, err := e.value()
			if err != nil {
				return nil, err
			}
			v.add(o.only(e, y, "second"), nil)
		}
	}
	return v, nil
}

// only reports a document that one render holds and the other does not.
func (o Options) only(d *document, v any, in string) Volatile {
	obj := objectOf(v)
	return Volatile{
		Object:   nameOr(obj, d),
		Source:   d.source,
		Document: d.index,
		OnlyIn:   in,
		Restarts: o.workload(obj),
	}
}

// volatile adds to v the volatile paths of document d, whose values are
// x in the input and y in the second render: one entry for the document
// or, for a List, one for each item with volatile fields and one for the
// List itself if it has any.
func (o Options) volatile(v *Volatility, d *document, x, y any, paths []path) {
	xs, xl := isList(x)
	ys, yl := isList(y)
	if !xl || !yl {
		v.add(o.entry(d, objectOf(x), paths))
		return
	}
	// Group the paths by List item, in item order; the List's own paths
	// first.
	var (
		own    []path
		groups = map[int][]path{}
		order  []int
	)
	for _, p := range paths {
		if len(p) < 2 || !isKey(p[0], "items") || p[1].kind != segIndex {
			own = append(own, p)
			continue
		}
		i := p[1].index
		if _, ok := groups[i]; !ok {
			order = append(order, i)
		}
		groups[i] = append(groups[i], p[2:])
	}
	if len(own) > 0 {
		v.add(o.entry(d, objectOf(x), own))
	}
	for _, i := range order {
		rel := groups[i]
		if len(rel) == 1 && len(rel[0]) == 0 {
			// The item is in one render only.
			if i < len(xs) {
				v.add(o.only(d, xs[i], "input"), nil)
			} else {
				v.add(o.only(d, ys[i], "second"), nil)
			}
			continue
		}
		v.add(o.entry(d, objectOf(xs[i]), rel))
	}
}

// entry reports the volatile paths of one object, and the label of each
// path in a warning.
func (o Options) entry(d *document, obj object, paths []path) (Volatile, []string) {
	v := Volatile{Object: nameOr(obj, d), Source: d.source, Document: d.index}
	labels := make([]string, len(paths))
	for i, p := range paths {
		v.Fields = append(v.Fields, p.String())
		labels[i] = v.Fields[i]
		if r := o.restart(obj, p); r != "" {
			v.Restarts = true
			v.RestartBy = append(v.RestartBy, r)
			labels[i] = r
		}
	}
	return v, labels
}

func objectOf(v any) object {
	m, _ := v.(map[string]any)
	return object{m: m}
}

// nameOr names obj, or without a name (a List, a document that is not
// an object) the document that holds it: "List in document 3",
// "document 3".
func nameOr(obj object, d *document) string {
	if n := obj.name(); n != "" {
		return n
	}
	if k := obj.str("kind"); k != "" {
		return fmt.Sprintf("%s in document %d", k, d.index)
	}
	return fmt.Sprintf("document %d", d.index)
}

// sameKinds reports whether x and y are the same kind of object (by
// apiVersion and kind), item by item for Lists, and otherwise the two
// kinds that differ. Documents without a kind (not Kubernetes objects)
// are not compared.
func sameKinds(x, y any) (string, string, bool) {
	kind := func(v any) string {
		obj := objectOf(v)
		if obj.str("kind") == "" {
			return ""
		}
		return strings.TrimSpace(obj.str("apiVersion") + " " + obj.str("kind"))
	}
	if kx, ky := kind(x), kind(y); kx != "" && ky != "" && kx != ky {
		return kx, ky, false
	}
	xs, xl := isList(x)
	ys, yl := isList(y)
	if xl && yl {
		for i := range min(len(xs), len(ys)) {
			if kx, ky, ok := sameKinds(xs[i], ys[i]); !ok {
				return kx, ky, false
			}
		}
	}
	return "", "", true
}

// group returns the part of a document key that names its file (and, in
// a Helm 4 stream, its kind): the key without the position.
func group(key string) string {
	return key[:strings.LastIndexByte(key, 0)]
}

// sameCounts returns the groups (see group) that hold as many documents
// in a as in b, each true.
func sameCounts(a, b *stream) map[string]bool {
	count := func(s *stream) map[string]int {
		n := map[string]int{}
		for _, d := range s.docs {
			n[group(d.key)]++
		}
		return n
	}
	na, nb := count(a), count(b)
	same := make(map[string]bool, len(na))
	for g, n := range na {
		if nb[g] == n {
			same[g] = true
		}
	}
	return same
}
