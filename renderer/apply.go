package renderer

import (
	"fmt"
	"slices"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/renderer/stream"
)

// applier makes the changes that the finder found in one document once
// their digests are known: it pins the image fields, writes the
// checksums, and hands the changes to the stream layer to write.
type applier struct {
	r *Renderer
	d *document
	f *found
	// images and annotations are the changes to make, in stream order.
	images      []stream.Replacement
	annotations []stream.Annotation
	seen        map[*yaml.Node]bool  // image nodes (or aliases) with a change, once each
	aliasImages []stream.Replacement // image fields that are aliases, to change
	holders     map[*yaml.Node]bool  // holders annotated
}

// apply makes the changes that f found in parsed document p of d. It
// calls digest for each use; digest returns the digest to pin to ("" to
// keep the image as written) and false when it is not known yet. apply
// returns the document's output (its raw bytes when nothing changed), or
// a Piece not done when a digest is not known yet, and changes nothing
// then. The checksums that the walk met before a digest not known are
// checked all the same, and come before the error the finder stopped
// at, as the walk met them.
func (r *Renderer) apply(d *document, p *stream.Parsed, f *found, digest func(use) (string, bool)) (stream.Piece, error) {
	a := applier{r: r, d: d, f: f}
	known := a.pin(digest)
	for _, s := range f.sums {
		if s.uses > known {
			break // not all its lines are known yet
		}
		if err := a.checksum(s.holder, a.lines(s), s.w); err != nil {
			return stream.Piece{}, err
		}
	}
	if f.stopped != nil {
		return stream.Piece{}, f.stopped
	}
	if known < len(f.uses) {
		return stream.Piece{}, nil // changed nothing: f can be applied again
	}
	for i := range f.sites {
		a.change(&f.sites[i])
	}
	a.writeOutAliases()
	// The last pass over the document says what it kept, and what it
	// left as tags.
	d.notes = nil
	if len(f.kept) > 0 || len(f.unpinned) > 0 {
		d.notes = &notes{kept: f.kept, unpinned: f.unpinned}
	}
	if len(a.images) == 0 && len(a.annotations) == 0 {
		return stream.Unchanged(d.Document), nil
	}
	if err := f.routes.check(d, a.changed()); err != nil {
		return stream.Piece{}, err
	}
	return stream.Write(d.Document, p, a.images, a.annotations, r.annotation())
}

// pin asks digest for the digest of every use, so that the resolver
// starts on each, and sets the value of each site whose digest is known.
// It returns how many uses, from the first (an index of found.uses: the
// uses before the document's count as known), have their digests known.
func (a *applier) pin(digest func(use) (string, bool)) int {
	known, j := len(a.f.uses), 0
	for i := a.f.from; i < len(a.f.uses); i++ {
		dg, ok := digest(a.f.uses[i])
		if !ok {
			known = min(known, i)
			continue
		}
		for j < len(a.f.sites) && a.f.sites[j].use < i {
			j++
		}
		if j < len(a.f.sites) && a.f.sites[j].use == i {
			s := &a.f.sites[j]
			s.value = s.text
			if dg != "" {
				s.value = pinnedTo(s.text, dg, a.r.mode())
			}
		}
	}
	return known
}

// lines returns the checksum lines of s, spelt out, in a slice of their
// own.
func (a *applier) lines(s sum) []string {
	out := make([]string, 0, len(s.lines))
	for _, l := range s.lines {
		v := l.text
		if l.site >= 0 {
			v = a.f.sites[l.site].value
		}
		line := Workload{Container: l.container, Field: l.field}.line(v)
		if s.dedup && slices.Contains(out, line) {
			continue
		}
		out = append(out, line)
	}
	return out
}

// checksum sets the checksum annotation of holder (a pod template, or a
// mapping that a checksum path names) to the checksum of lines, the
// images of w in it; it does nothing for no lines. Each holder is
// annotated once.
func (a *applier) checksum(holder *yaml.Node, lines []string, w Workload) error {
	if len(lines) == 0 || !once(&a.holders, holder) {
		return nil
	}
	sum := checksum(lines) // lines are the applier's own
	meta, err := stream.Get(holder, "metadata")
	var ann, old stream.Entry
	if err == nil {
		ann, err = stream.Get(meta.Value, "annotations")
	}
	if err == nil {
		old, err = stream.Get(ann.Value, a.r.annotation())
	}
	if err != nil {
		return keyError(a.d, err, w.object())
	}
	// The API server refuses metadata or annotations that are not
	// mappings (or null); writing a mapping in their place would make an
	// object of what it refuses.
	for _, f := range []struct {
		name string
		v    *yaml.Node
	}{{"metadata", meta.Value}, {"annotations", ann.Value}} {
		// A null can become the mapping; "!" alone is the string "" to
		// the API server, though the parser reads null.
		if f.v != nil && f.v.Kind != yaml.MappingNode && (f.v.Kind != yaml.ScalarNode || f.v.Tag != "!!null" || stream.NonSpecific(a.d.Body(), f.v)) {
			what := stream.Describe(f.v)
			if f.v.Kind == yaml.ScalarNode && f.v.Tag == "!!null" {
				what = `the string "" (tagged "!")`
			}
			return fmt.Errorf("%s: %s: cannot write the %s annotation: %s is %s, want a mapping", a.d.At(f.v.Line), w.object(), a.r.annotation(), f.name, what)
		}
	}
	if old.Value != nil && old.Value.Kind == yaml.ScalarNode && old.Value.Value == sum {
		return nil
	}
	if old.Key != nil && old.Index < 0 {
		return fmt.Errorf("%s: %s: cannot write the %s annotation: it comes from a merge key (<<); write it out", a.d.At(old.Key.Line), w.object(), a.r.annotation())
	}
	if n, why := sharedMetadata(holder); n != nil {
		return fmt.Errorf("%s: %s: cannot write the %s annotation: the pod template's %s", a.d.At(n.Line), w.object(), a.r.annotation(), why)
	}
	a.annotations = append(a.annotations, stream.Annotation{Holder: holder, Value: sum})
	return nil
}

// change records that site s is to be written as its value; it changes
// nothing when that is what the field holds. An alias names the same
// node twice: it is changed once. An image field that is an alias is
// written out in its place, so that the node it names (a ConfigMap's
// value, say) stays as it was, unless that node is an image field
// changed to the same value anyway.
func (a *applier) change(s *site) {
	value := s.prefix + s.value
	if a.r.mode() == ModeAnnotate || value == s.image.Value.Value {
		return
	}
	via := s.image.Via
	if s.inner != nil {
		// Only the bytes of the image inside the string change.
		if s.value != s.text && once(&a.seen, s.inner) {
			a.images = append(a.images, stream.Replacement{Node: s.image.Value, Inner: s.inner, Value: s.value})
		}
		return
	}
	raw, parent := via[len(via)-1], stream.Deref(s.c)
	if len(via) >= 2 {
		parent = stream.Deref(via[len(via)-2])
	}
	if raw.Kind != yaml.AliasNode {
		if once(&a.seen, raw) {
			a.images = append(a.images, stream.Replacement{Node: raw, Value: value, Flow: parent.Style&yaml.FlowStyle != 0})
		}
		return
	}
	a.aliasImages = append(a.aliasImages, stream.Replacement{Node: s.image.Value, Alias: raw, Parent: parent, Value: value})
}

// writeOutAliases turns the changes of image fields that are aliases into
// changes of their own, but for those whose node changes anyway.
func (a *applier) writeOutAliases() {
	for _, c := range a.aliasImages {
		if !a.seen[c.Node] && once(&a.seen, c.Alias) {
			a.images = append(a.images, c)
		}
	}
}

// changed returns the nodes whose content the changes change.
func (a *applier) changed() []*yaml.Node {
	var out []*yaml.Node
	for _, c := range a.images {
		if c.Alias != nil {
			out = append(out, c.Parent)
		} else {
			out = append(out, c.Node)
		}
	}
	for _, an := range a.annotations {
		out = append(out, an.Holder)
	}
	return out
}

// sharedMetadata reports why the checksum annotation cannot be written
// into a pod template's own metadata.annotations: because the mapping it
// would go into is shared with other nodes through an anchor, an alias or
// a merge key, so writing it would change them too. It returns the node
// at fault and the reason, or nil.
func sharedMetadata(holder *yaml.Node) (*yaml.Node, string) {
	owner := holder
	for _, key := range []string{"metadata", "annotations"} {
		e, _ := stream.Get(owner, key) // the caller looked these up already
		var v *yaml.Node
		switch {
		case e.Key == nil:
			return nil, ""
		case e.Index < 0:
			return e.Key, key + " comes from a merge key (<<); write it out"
		}
		v = owner.Content[e.Index+1]
		switch {
		case v.Kind == yaml.AliasNode:
			return v, key + " is an alias (*" + v.Value + "); write it out"
		case v.Anchor != "":
			return v, key + " has an anchor (&" + v.Anchor + ") that other nodes may share; write it out"
		}
		owner = v
	}
	return nil, ""
}
