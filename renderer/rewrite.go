package renderer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/imageref"
	"github.com/digestpin/digestpin/renderer/stream"
)

// rewriteWaiting rewrites the documents of c that waited for a digest,
// on every core, from their kept parse or parsing them again. It returns
// the first document's error in stream order.
func (r *Renderer) rewriteWaiting(ctx context.Context, c *collection, digests map[string]string) error {
	known := func(u use) (string, bool) { return digests[u.ref.Name()], true }
	docErrs := make([]error, len(c.waiting))
	err := eachDoc(ctx, len(c.waiting), func(j int) {
		i := c.waiting[j]
		// Workers only read kept while this phase goes on.
		if p := c.kept[i]; p != nil {
			c.out[i], docErrs[j] = r.rewriteDoc(c.docs[i], p, known, nil)
			p.Release()
			return
		}
		defer c.budget.Give(takeFor(c.budget, c.docs[i], r.keys))
		c.out[i], docErrs[j] = r.edit(c.docs[i], known)
	})
	c.kept = nil // released, each by the worker that used it
	if err != nil {
		return err
	}
	for _, err := range docErrs {
		if err != nil {
			return err
		}
	}
	return nil
}

// edit parses document d and rewrites its image fields and checksums. It
// calls digest for each image field; digest returns the digest to pin to
// ("" to keep the image as written) and false when it is not known yet.
// edit returns the document's output (its raw bytes when nothing
// changed), or a piece with nil bytes when a digest is not known yet.
func (r *Renderer) edit(d *document, digest func(use) (string, bool)) (stream.Piece, error) {
	p, err := r.parse(d)
	if p == nil || err != nil {
		return stream.Unchanged(d.Document), err
	}
	defer p.Release()
	return r.rewriteDoc(d, p, digest, nil)
}

// rewriteDoc is rewrite, which it calls again on a full parse of d when p
// is a tree from quickParse that only the encoder can change; restart,
// when not nil, is called before that second pass, which calls digest
// again for every image field.
func (r *Renderer) rewriteDoc(d *document, p *stream.Parsed, digest func(use) (string, bool), restart func()) (stream.Piece, error) {
	b, err := r.rewrite(d, p, digest)
	if !errors.Is(err, stream.ErrEncode) {
		return b, err
	}
	if restart != nil {
		restart()
	}
	if p, err = stream.ParseFull(d.Document); p == nil || err != nil {
		// quickParse read it, so yaml.v3 reads it too: not reached.
		return stream.Piece{}, fmt.Errorf("%s: parsing again: %w", d.Where(), cmpOr(err, stream.ErrEncode))
	}
	return r.rewrite(d, p, digest)
}

// cmpOr returns err, or def when err is nil.
func cmpOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// rewrite rewrites the image fields and checksums of parsed document p, as
// edit does. When a digest is not known yet it returns nil and leaves p as
// it was, so that p can be rewritten again later.
func (r *Renderer) rewrite(d *document, p *stream.Parsed, digest func(use) (string, bool)) (stream.Piece, error) {
	e := editor{r: r, d: d, digest: digest, complete: true, routes: newRoutes(p.Aliases)}
	e.routes.step(p.Obj)
	if err := e.object(p.Obj, 0); err != nil {
		return stream.Piece{}, err
	}
	e.writeOutAliases()
	if e.complete {
		// The last pass over the document says what it kept, and what
		// it left as tags.
		d.notes = nil
		if len(e.kept) > 0 || len(e.unpinned) > 0 {
			d.notes = &notes{kept: e.kept, unpinned: e.unpinned}
		}
	}
	switch {
	case !e.complete:
		return stream.Piece{}, nil
	case len(e.images) == 0 && len(e.annotations) == 0:
		return stream.Unchanged(d.Document), nil
	}
	if err := e.routes.check(d, e.changed()); err != nil {
		return stream.Piece{}, err
	}
	return stream.Write(d.Document, p, e.images, e.annotations, e.r.annotation())
}

// maxListDepth bounds List objects nested in List objects.
const maxListDepth = 16

// editor rewrites the image fields of one parsed document.
type editor struct {
	r        *Renderer
	d        *document
	digest   func(use) (string, bool)
	complete bool // every digest was known
	// images and annotations are the changes to make, in stream order.
	images      []stream.Replacement
	annotations []stream.Annotation
	seen        map[*yaml.Node]bool  // image nodes (or aliases) with a change, once each
	aliasImages []stream.Replacement // image fields that are aliases, to change
	routes      *routes              // how the editor reached nodes; nil: no alias
	// An alias names a node again. Objects, pod specs and templates are
	// edited once each, so that aliases can neither make the work grow
	// exponentially (a List of aliases of Lists of aliases) nor write a
	// template's annotation twice.
	objects   map[*yaml.Node]bool     // objects edited
	specLines map[*yaml.Node][]string // pod spec → its checksum lines
	specUses  map[*yaml.Node][]use    // pod spec → its image fields
	holders   map[*yaml.Node]bool     // templates annotated
	// podFields are the image fields of pod specs, each with the value
	// pinned ("" while its digest is not known): an image path that
	// leads to one finds a container's image, pinned already.
	podFields       map[fieldKey]string
	podFieldsWanted bool // the object being edited has image paths
	// kept are the warnings about image fields kept as written because
	// they hold no reference (KeepUnresolved).
	kept []string
	// handled are the scalars that image fields reached; containers the
	// containers of pod specs still to scan, scanned the nodes scanned;
	// unpinned the image-like values found that none reached.
	handled, scanned map[*yaml.Node]bool
	containers       []containerAt
	unpinned         []Unpinned
	// name is the copy of the last workload name that own made.
	name string
}

// own returns w.owned(), whose copy of the name the fields of one
// workload share: its containers and fields repeat it, and each field's
// Workload is kept for the whole Render (Image.Workloads).
func (e *editor) own(w Workload) Workload {
	if w.Name != e.name {
		e.name = strings.Clone(w.Name)
	}
	w.Name = ""
	w = w.owned()
	w.Name = e.name
	return w
}

// once reports whether n is not in seen yet, and adds it.
func once(seen *map[*yaml.Node]bool, n *yaml.Node) bool {
	if (*seen)[n] {
		return false
	}
	if *seen == nil {
		*seen = map[*yaml.Node]bool{}
	}
	(*seen)[n] = true
	return true
}

// object edits a Kubernetes object, or the items of a List.
func (e *editor) object(obj *yaml.Node, depth int) error {
	if !once(&e.objects, obj) {
		return nil
	}
	kind, err := stream.Str(obj, "kind")
	if err != nil {
		return e.keyError(err, "")
	}
	if strings.HasSuffix(kind, "List") {
		items, err := stream.Get(obj, "items")
		if err != nil {
			return e.keyError(err, kind)
		}
		if items.Value != nil && items.Value.Kind == yaml.SequenceNode {
			if depth >= maxListDepth {
				return fmt.Errorf("%s: List objects nested more than %d deep", e.d.At(obj.Line), maxListDepth)
			}
			e.routes.steps(items.Via)
			for _, item := range items.Value.Content {
				// Only an object is on the way to images: an item that
				// is an alias of a scalar (an image field) is not.
				if stream.Deref(item).Kind != yaml.MappingNode {
					continue
				}
				e.routes.step(item)
				if item = stream.Deref(item); item.Kind == yaml.MappingNode {
					if err := e.object(item, depth+1); err != nil {
						return err
					}
				}
			}
			return nil
		}
	}
	apiVersion, err := stream.Str(obj, "apiVersion")
	if err != nil {
		return e.keyError(err, kind)
	}
	w := Workload{Kind: kind}
	meta, err := stream.Get(obj, "metadata")
	if err == nil {
		w.Name, err = stream.Str(meta.Value, "name")
	}
	if err == nil {
		w.Namespace, err = stream.Str(meta.Value, "namespace")
	}
	if err != nil {
		return e.keyError(err, kind)
	}
	templates, err := findPodTemplates(obj, apiGroup(apiVersion), kind, e.r.paths(), e.routes.step)
	if err != nil {
		return e.keyError(err, w.object())
	}
	// The image fields of pod specs and the pod templates matter to the
	// image paths of the kind, which most kinds have none of.
	paths := e.r.imagePathsFor(apiGroup(apiVersion), kind)
	e.podFieldsWanted = len(paths) > 0
	var pods map[*yaml.Node]string
	for _, t := range templates {
		if err := e.template(t, w); err != nil {
			return err
		}
		if len(paths) == 0 {
			continue
		}
		if pods == nil {
			pods = map[*yaml.Node]string{}
		}
		pods[t.spec] = "pod spec"
		if t.holder != nil {
			pods[t.holder] = "pod template"
		}
	}
	if err := e.imageFields(obj, apiGroup(apiVersion), kind, paths, w, pods); err != nil {
		return err
	}
	// Last, what looks like an image and is left as a tag.
	e.scanUnpinned(obj, apiGroup(apiVersion), w)
	return nil
}

// template pins the images of one pod template and sets its checksum.
func (e *editor) template(t podTemplate, w Workload) error {
	lines, done := e.specLines[t.spec]
	if done {
		// A pod spec shared through an alias is edited once, but each
		// workload that shares it uses its images.
		for _, u := range e.specUses[t.spec] {
			u.workload.Kind, u.workload.Namespace, u.workload.Name = w.Kind, w.Namespace, w.Name
			u.workload = e.own(u.workload)
			if _, ok := e.digest(u); !ok {
				e.complete = false
			}
		}
	}
	if !done {
		var err error
		if lines, err = e.podSpecImages(t.spec, w); err != nil {
			return err
		}
		if e.specLines == nil {
			e.specLines = map[*yaml.Node][]string{}
		}
		e.specLines[t.spec] = lines
	}
	return e.checksum(t.holder, lines, w)
}

// checksum sets the checksum annotation of holder (a pod template, or a
// mapping that a checksum path names) to the checksum of lines, the images
// of w in it; it does nothing for a nil holder, no lines, or a document
// whose digests are not all known yet. Each holder is annotated once.
func (e *editor) checksum(holder *yaml.Node, lines []string, w Workload) error {
	if holder == nil || len(lines) == 0 || !e.complete || !once(&e.holders, holder) {
		return nil
	}
	sum := Checksum(lines)
	meta, err := stream.Get(holder, "metadata")
	var ann, old stream.Entry
	if err == nil {
		ann, err = stream.Get(meta.Value, "annotations")
	}
	if err == nil {
		old, err = stream.Get(ann.Value, e.r.annotation())
	}
	if err != nil {
		return e.keyError(err, w.object())
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
		if f.v != nil && f.v.Kind != yaml.MappingNode && (f.v.Kind != yaml.ScalarNode || f.v.Tag != "!!null" || stream.NonSpecific(e.d.Body(), f.v)) {
			what := stream.Describe(f.v)
			if f.v.Kind == yaml.ScalarNode && f.v.Tag == "!!null" {
				what = `the string "" (tagged "!")`
			}
			return fmt.Errorf("%s: %s: cannot write the %s annotation: %s is %s, want a mapping", e.d.At(f.v.Line), w.object(), e.r.annotation(), f.name, what)
		}
	}
	if old.Value != nil && old.Value.Kind == yaml.ScalarNode && old.Value.Value == sum {
		return nil
	}
	if old.Key != nil && old.Index < 0 {
		return fmt.Errorf("%s: %s: cannot write the %s annotation: it comes from a merge key (<<); write it out", e.d.At(old.Key.Line), w.object(), e.r.annotation())
	}
	if n, why := sharedMetadata(holder); n != nil {
		return fmt.Errorf("%s: %s: cannot write the %s annotation: the pod template's %s", e.d.At(n.Line), w.object(), e.r.annotation(), why)
	}
	e.annotations = append(e.annotations, stream.Annotation{Holder: holder, Value: sum})
	return nil
}

// podSpecImages pins the images of a pod spec used by w: those of its
// containers, then those of its image volumes. It returns the checksum
// lines of the images whose digests are known: "NAME=REF" for a
// container, "volume/NAME=REF" for an image volume. A container name is
// a DNS label, without "/", so the two cannot collide, and a pod spec
// without image volumes keeps the checksum it had before digestpin knew
// them.
func (e *editor) podSpecImages(spec *yaml.Node, w Workload) ([]string, error) {
	var lines []string
	for _, field := range containerFields {
		list, err := stream.Get(spec, field)
		if err != nil {
			return nil, e.keyError(err, w.object())
		}
		if list.Value == nil || list.Value.Kind != yaml.SequenceNode {
			continue
		}
		e.routes.steps(list.Via)
		for i, c := range list.Value.Content {
			// A container that is not a mapping (an alias of an image
			// field, say) holds no image and is not on the way to one;
			// the API server refuses it.
			if stream.Deref(c).Kind != yaml.MappingNode {
				continue
			}
			e.routes.step(c)
			// YAML decoders disagree on which of two equal keys wins:
			// pinning one could leave the other in force. get refuses
			// what the API server could read otherwise.
			w.Container, err = stream.Str(c, "name")
			if err != nil {
				return nil, e.keyError(err, fmt.Sprintf("%s %s[%d]", w.object(), field, i))
			}
			line, err := e.pinImage(spec, c, "image", w)
			if err != nil {
				return nil, err
			}
			if line != "" {
				lines = append(lines, line)
			}
			e.containers = append(e.containers, containerAt{stream.Deref(c), w})
			// Then the images in its args and env.
			if paths := containerPathsFor(c, e.r.containerImagePaths(), e.r.containerSelectors()); len(paths) > 0 {
				more, err := e.pinFields(c, "", paths, 0, w, map[fieldKey][]string{}, spec)
				if err != nil {
					return nil, err
				}
				lines = append(lines, more...)
			}
		}
	}
	more, err := e.imageVolumes(spec, w)
	if err != nil {
		return nil, err
	}
	return append(lines, more...), nil
}

// imageVolumes pins the image volumes of pod spec spec (Kubernetes
// 1.31+: volumes[].image.reference is pulled like a container's image)
// and returns their checksum lines, "volume/NAME=REF".
func (e *editor) imageVolumes(spec *yaml.Node, w Workload) ([]string, error) {
	var lines []string
	vols, err := stream.Get(spec, "volumes")
	if err != nil {
		return nil, e.keyError(err, w.object())
	}
	if vols.Value == nil || vols.Value.Kind != yaml.SequenceNode {
		return lines, nil
	}
	e.routes.steps(vols.Via)
	for i, v := range vols.Value.Content {
		img, err := stream.Get(v, "image")
		if err != nil {
			return nil, e.keyError(err, fmt.Sprintf("%s volumes[%d]", w.object(), i))
		}
		if img.Value == nil || img.Value.Kind != yaml.MappingNode {
			continue // not an image volume (or one the API server refuses)
		}
		// Only an image volume is on the way to an image: a volume
		// that is an alias of a container, say, is not.
		e.routes.step(v)
		name, err := stream.Str(v, "name")
		if err != nil {
			return nil, e.keyError(err, fmt.Sprintf("%s volumes[%d]", w.object(), i))
		}
		w.Container = VolumePrefix + name
		e.routes.steps(img.Via)
		line, err := e.pinImage(spec, img.Value, "reference", w)
		if err != nil {
			return nil, err
		}
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines, nil
}

// pinImage pins the image field key of mapping m (a container's "image",
// an image volume's "reference", a field an image path names), which w
// uses in pod spec spec (nil for an image path's field). It
// returns the field's checksum line, or "" when m has no such field or
// its digest is not known yet.
func (e *editor) pinImage(spec, m *yaml.Node, key string, w Workload) (string, error) {
	image, err := stream.Get(m, key)
	if err != nil {
		return "", e.keyError(err, w.String())
	}
	img := image.Value
	if img == nil {
		return "", nil // no image: nothing to pin
	}
	e.handle(img)
	// Where the field is goes into messages only: spelt out when needed.
	where := func() string { return e.d.At(img.Line) }
	if img.Kind != yaml.ScalarNode || img.Tag != "!!str" {
		return "", fmt.Errorf("%s: %s: %s is %s, want a reference such as registry/name:tag", where(), w, key, stream.Describe(img))
	}
	if v, ok := yaml11Reading(img); ok {
		return "", fmt.Errorf("%s: %s: %s is %s, which the API server reads as %s: quote it (%q) if it is a reference", where(), w, key, img.Value, v, img.Value)
	}
	ref, err := e.r.parseReference(key, img)
	if err != nil {
		err = fmt.Errorf("%s: %s: %w", where(), w, err)
		if !e.r.KeepUnresolved {
			return "", err
		}
		// A blank image is a pattern (OpenShift's image triggers fill it
		// in); keep it as written, in the checksum as written, and say so
		// once the document is done.
		e.kept = append(e.kept, fmt.Sprintf("keeping %s %q unpinned: %v", key, img.Value, err))
		if spec != nil {
			e.podField(m, key, img.Value)
		}
		return w.Container + "=" + img.Value, nil
	}
	u := use{image: intern(img.Value), ref: ref, workload: e.own(w), doc: e.d, line: img.Line}
	if spec != nil {
		if e.specUses == nil {
			e.specUses = map[*yaml.Node][]use{}
		}
		e.specUses[spec] = append(e.specUses[spec], u)
		e.podField(m, key, "")
	}
	dg, ok := e.digest(u)
	if !ok {
		e.complete = false
		return "", nil
	}
	value := img.Value
	if dg != "" {
		value = pinnedTo(img.Value, dg, e.r.mode())
	}
	e.changeImage(m, image, value)
	if spec != nil {
		e.podField(m, key, value)
	}
	return w.Container + "=" + value, nil
}

// podField records the value of image field key of mapping m of a pod
// spec: "" while its digest is not known.
func (e *editor) podField(m *yaml.Node, key, value string) {
	if !e.podFieldsWanted {
		return
	}
	if e.podFields == nil {
		e.podFields = map[fieldKey]string{}
	}
	e.podFields[fieldKey{stream.Deref(m), key}] = value
}

// parseReference parses the value of image field key (a string scalar),
// or says why it holds no reference.
func (r *Renderer) parseReference(key string, img *yaml.Node) (name.Reference, error) {
	switch {
	case strings.TrimSpace(img.Value) == "":
		return nil, fmt.Errorf("%s is %s, want a reference such as registry/name:tag", key, stream.Describe(img))
	case strings.ContainsFunc(img.Value, unicode.IsControl):
		// go-containerregistry's error would repeat it raw.
		return nil, fmt.Errorf("%s %q holds a control character, want a reference such as registry/name:tag", key, img.Value)
	}
	// A stream repeats a few references in thousands of fields: each
	// value is parsed once (a name.Reference is immutable).
	if r.refs != nil {
		if ref, ok := r.refs.Load(img.Value); ok {
			return ref.(name.Reference), nil
		}
	}
	ref, err := name.ParseReference(img.Value)
	if err != nil {
		return nil, fmt.Errorf("parsing %s %q: %w", key, img.Value, err)
	}
	// go-containerregistry's parser, which the registry client asks
	// with, accepts references that no node can pull ("a..b", "-foo", a
	// tag "-bad"): the kubelet's grammar decides.
	if err := r.checkImage(img.Value); err != nil {
		return nil, fmt.Errorf("%s %q: the kubelet refuses it (InvalidImageName): %w", key, img.Value, err)
	}
	if r.refs != nil {
		r.refs.Store(img.Value, ref)
	}
	return ref, nil
}

// checkImage is imageref.Check of image, once per Render for each value.
func (r *Renderer) checkImage(image string) error {
	if r.checked == nil {
		return imageref.Check(image)
	}
	if err, ok := r.checked.Load(image); ok {
		e, _ := err.(error)
		return e
	}
	err := imageref.Check(image)
	r.checked.Store(image, err)
	return err
}

// changeImage records that an image field, found as image in mapping c
// (a container, or an image volume's image), is to be written as value; it changes nothing when value is what the
// field holds. An alias names the same node twice: it is changed once.
// An image field that is an alias is written out in its place, so that
// the node it names (a ConfigMap's value, say) stays as it was, unless
// that node is an image field changed to the same value anyway.
func (e *editor) changeImage(c *yaml.Node, image stream.Entry, value string) {
	raw := image.Via[len(image.Via)-1]
	e.routes.steps(image.Via[:len(image.Via)-1])
	if raw.Kind == yaml.AliasNode {
		e.routes.take(raw)
	} else {
		e.routes.step(raw)
	}
	if e.r.mode() == ModeAnnotate || value == image.Value.Value {
		return
	}
	parent := stream.Deref(c)
	if len(image.Via) >= 2 {
		parent = stream.Deref(image.Via[len(image.Via)-2])
	}
	if raw.Kind != yaml.AliasNode {
		if once(&e.seen, raw) {
			e.images = append(e.images, stream.Replacement{Node: raw, Value: value, Flow: parent.Style&yaml.FlowStyle != 0})
		}
		return
	}
	e.aliasImages = append(e.aliasImages, stream.Replacement{Node: image.Value, Alias: raw, Parent: parent, Value: value})
}

// writeOutAliases turns the changes of image fields that are aliases into
// changes of their own, but for those whose node changes anyway.
func (e *editor) writeOutAliases() {
	for _, c := range e.aliasImages {
		if !e.seen[c.Node] && once(&e.seen, c.Alias) {
			e.images = append(e.images, c)
		}
	}
}

// changed returns the nodes whose content the changes change.
func (e *editor) changed() []*yaml.Node {
	var out []*yaml.Node
	for _, c := range e.images {
		if c.Alias != nil {
			out = append(out, c.Parent)
		} else {
			out = append(out, c.Node)
		}
	}
	for _, a := range e.annotations {
		out = append(out, a.Holder)
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
