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
			p.release()
			return
		}
		defer c.budget.give(c.budget.takeFor(c.docs[i], r.keys))
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
func (r *Renderer) edit(d *document, digest func(use) (string, bool)) (piece, error) {
	p, err := r.parse(d)
	if p == nil || err != nil {
		return piece{b: d.raw}, err
	}
	defer p.release()
	return r.rewriteDoc(d, p, digest, nil)
}

// errEncode is rewrite's answer for a document that quickParse read and
// that only the encoder can change: rewriteDoc parses it again in full.
var errEncode = errors.New("the document needs its comments to be encoded")

// rewriteDoc is rewrite, which it calls again on a full parse of d when p
// is a tree from quickParse that only the encoder can change; restart,
// when not nil, is called before that second pass, which calls digest
// again for every image field.
func (r *Renderer) rewriteDoc(d *document, p *parsed, digest func(use) (string, bool), restart func()) (piece, error) {
	b, err := r.rewrite(d, p, digest)
	if !errors.Is(err, errEncode) {
		return b, err
	}
	if restart != nil {
		restart()
	}
	if p, err = r.parseFull(d); p == nil || err != nil {
		// quickParse read it, so yaml.v3 reads it too: not reached.
		return piece{}, fmt.Errorf("%s: parsing again: %w", d.where(), cmpOr(err, errEncode))
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
func (r *Renderer) rewrite(d *document, p *parsed, digest func(use) (string, bool)) (piece, error) {
	e := editor{r: r, d: d, digest: digest, complete: true, routes: newRoutes(p.aliases)}
	e.routes.step(p.obj)
	if err := e.object(p.obj, 0); err != nil {
		return piece{}, err
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
		return piece{}, nil
	case len(e.images) == 0 && len(e.annotations) == 0:
		return piece{b: d.raw}, nil
	}
	if err := e.routes.check(d, e.changed()); err != nil {
		return piece{}, err
	}
	// Splice the new values into the document's own bytes, which keeps
	// every other byte as it was and costs no encoding. Where the syntax is
	// too unusual for that (flow style, block scalars, anchors), change the
	// nodes and encode the document instead.
	if b, ok := splice(d, e.images, e.annotations, e.r.annotation()); ok {
		return b, nil
	}
	if p.quick {
		return piece{}, errEncode // the tree has no comments to encode
	}
	for _, c := range e.images {
		if c.alias == nil {
			c.node.Value = c.value
			continue
		}
		for i, n := range c.parent.Content {
			if n == c.alias {
				c.parent.Content[i] = newScalar(c.value)
			}
		}
	}
	for _, a := range e.annotations {
		setAnnotation(a.holder, e.r.annotation(), a.value)
	}
	var b []byte
	var err error
	if start := jsonStart(d.body()); start >= 0 {
		b, err = encodeJSON(d, &p.root, start, p.crlf)
	} else {
		b, err = encode(d, &p.root, p.crlf)
	}
	return piece{b: b}, err
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
	images      []imageChange
	annotations []annotationChange
	seen        map[*yaml.Node]bool // image nodes (or aliases) with a change, once each
	aliasImages []imageChange       // image fields that are aliases, to change
	routes      *routes             // how the editor reached nodes; nil: no alias
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

// imageChange sets an image scalar to a new value, or replaces an alias
// in a mapping with a scalar of that value.
type imageChange struct {
	node  *yaml.Node // the scalar (for an alias: the scalar it names)
	value string
	// alias is the image field's alias, which is replaced by a scalar in
	// parent (a container, or a mapping it merges); or nil.
	alias, parent *yaml.Node
	// flow says that the scalar is an item or value of a collection in
	// flow style ("[…]", "{…}"), where a plain scalar also ends before
	// ",", "]" or "}".
	flow bool
}

// annotationChange sets the checksum annotation of a pod template.
type annotationChange struct {
	holder *yaml.Node // the template: the mapping with metadata and spec
	value  string
}

// object edits a Kubernetes object, or the items of a List.
func (e *editor) object(obj *yaml.Node, depth int) error {
	if !once(&e.objects, obj) {
		return nil
	}
	kind, err := str(obj, "kind")
	if err != nil {
		return e.keyError(err, "")
	}
	if strings.HasSuffix(kind, "List") {
		items, err := get(obj, "items")
		if err != nil {
			return e.keyError(err, kind)
		}
		if items.value != nil && items.value.Kind == yaml.SequenceNode {
			if depth >= maxListDepth {
				return fmt.Errorf("%s: List objects nested more than %d deep", e.d.at(obj.Line), maxListDepth)
			}
			e.routes.steps(items.via)
			for _, item := range items.value.Content {
				// Only an object is on the way to images: an item that
				// is an alias of a scalar (an image field) is not.
				if deref(item).Kind != yaml.MappingNode {
					continue
				}
				e.routes.step(item)
				if item = deref(item); item.Kind == yaml.MappingNode {
					if err := e.object(item, depth+1); err != nil {
						return err
					}
				}
			}
			return nil
		}
	}
	apiVersion, err := str(obj, "apiVersion")
	if err != nil {
		return e.keyError(err, kind)
	}
	w := Workload{Kind: kind}
	meta, err := get(obj, "metadata")
	if err == nil {
		w.Name, err = str(meta.value, "name")
	}
	if err == nil {
		w.Namespace, err = str(meta.value, "namespace")
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
	meta, err := get(holder, "metadata")
	var ann, old entry
	if err == nil {
		ann, err = get(meta.value, "annotations")
	}
	if err == nil {
		old, err = get(ann.value, e.r.annotation())
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
	}{{"metadata", meta.value}, {"annotations", ann.value}} {
		// A null can become the mapping; "!" alone is the string "" to
		// the API server, though the parser reads null.
		if f.v != nil && f.v.Kind != yaml.MappingNode && (f.v.Kind != yaml.ScalarNode || f.v.Tag != "!!null" || (&spliceState{body: e.d.body()}).nonSpecific(f.v)) {
			what := describe(f.v)
			if f.v.Kind == yaml.ScalarNode && f.v.Tag == "!!null" {
				what = `the string "" (tagged "!")`
			}
			return fmt.Errorf("%s: %s: cannot write the %s annotation: %s is %s, want a mapping", e.d.at(f.v.Line), w.object(), e.r.annotation(), f.name, what)
		}
	}
	if old.value != nil && old.value.Kind == yaml.ScalarNode && old.value.Value == sum {
		return nil
	}
	if old.key != nil && old.index < 0 {
		return fmt.Errorf("%s: %s: cannot write the %s annotation: it comes from a merge key (<<); write it out", e.d.at(old.key.Line), w.object(), e.r.annotation())
	}
	if n, why := sharedMetadata(holder); n != nil {
		return fmt.Errorf("%s: %s: cannot write the %s annotation: the pod template's %s", e.d.at(n.Line), w.object(), e.r.annotation(), why)
	}
	e.annotations = append(e.annotations, annotationChange{holder: holder, value: sum})
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
		list, err := get(spec, field)
		if err != nil {
			return nil, e.keyError(err, w.object())
		}
		if list.value == nil || list.value.Kind != yaml.SequenceNode {
			continue
		}
		e.routes.steps(list.via)
		for i, c := range list.value.Content {
			// A container that is not a mapping (an alias of an image
			// field, say) holds no image and is not on the way to one;
			// the API server refuses it.
			if deref(c).Kind != yaml.MappingNode {
				continue
			}
			e.routes.step(c)
			// YAML decoders disagree on which of two equal keys wins:
			// pinning one could leave the other in force. get refuses
			// what the API server could read otherwise.
			w.Container, err = str(c, "name")
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
			e.containers = append(e.containers, containerAt{deref(c), w})
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
	vols, err := get(spec, "volumes")
	if err != nil {
		return nil, e.keyError(err, w.object())
	}
	if vols.value == nil || vols.value.Kind != yaml.SequenceNode {
		return lines, nil
	}
	e.routes.steps(vols.via)
	for i, v := range vols.value.Content {
		img, err := get(v, "image")
		if err != nil {
			return nil, e.keyError(err, fmt.Sprintf("%s volumes[%d]", w.object(), i))
		}
		if img.value == nil || img.value.Kind != yaml.MappingNode {
			continue // not an image volume (or one the API server refuses)
		}
		// Only an image volume is on the way to an image: a volume
		// that is an alias of a container, say, is not.
		e.routes.step(v)
		name, err := str(v, "name")
		if err != nil {
			return nil, e.keyError(err, fmt.Sprintf("%s volumes[%d]", w.object(), i))
		}
		w.Container = VolumePrefix + name
		e.routes.steps(img.via)
		line, err := e.pinImage(spec, img.value, "reference", w)
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
	image, err := get(m, key)
	if err != nil {
		return "", e.keyError(err, w.String())
	}
	img := image.value
	if img == nil {
		return "", nil // no image: nothing to pin
	}
	e.handle(img)
	// Where the field is goes into messages only: spelt out when needed.
	where := func() string { return e.d.at(img.Line) }
	if img.Kind != yaml.ScalarNode || img.Tag != "!!str" {
		return "", fmt.Errorf("%s: %s: %s is %s, want a reference such as registry/name:tag", where(), w, key, describe(img))
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
	e.podFields[fieldKey{deref(m), key}] = value
}

// parseReference parses the value of image field key (a string scalar),
// or says why it holds no reference.
func (r *Renderer) parseReference(key string, img *yaml.Node) (name.Reference, error) {
	switch {
	case strings.TrimSpace(img.Value) == "":
		return nil, fmt.Errorf("%s is %s, want a reference such as registry/name:tag", key, describe(img))
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
func (e *editor) changeImage(c *yaml.Node, image entry, value string) {
	raw := image.via[len(image.via)-1]
	e.routes.steps(image.via[:len(image.via)-1])
	if raw.Kind == yaml.AliasNode {
		e.routes.take(raw)
	} else {
		e.routes.step(raw)
	}
	if e.r.mode() == ModeAnnotate || value == image.value.Value {
		return
	}
	parent := deref(c)
	if len(image.via) >= 2 {
		parent = deref(image.via[len(image.via)-2])
	}
	if raw.Kind != yaml.AliasNode {
		if once(&e.seen, raw) {
			e.images = append(e.images, imageChange{node: raw, value: value, flow: parent.Style&yaml.FlowStyle != 0})
		}
		return
	}
	e.aliasImages = append(e.aliasImages, imageChange{node: image.value, alias: raw, parent: parent, value: value})
}

// writeOutAliases turns the changes of image fields that are aliases into
// changes of their own, but for those whose node changes anyway.
func (e *editor) writeOutAliases() {
	for _, c := range e.aliasImages {
		if !e.seen[c.node] && once(&e.seen, c.alias) {
			e.images = append(e.images, c)
		}
	}
}

// changed returns the nodes whose content the changes change.
func (e *editor) changed() []*yaml.Node {
	var out []*yaml.Node
	for _, c := range e.images {
		if c.alias != nil {
			out = append(out, c.parent)
		} else {
			out = append(out, c.node)
		}
	}
	for _, a := range e.annotations {
		out = append(out, a.holder)
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
		e, _ := get(owner, key) // the caller looked these up already
		var v *yaml.Node
		switch {
		case e.key == nil:
			return nil, ""
		case e.index < 0:
			return e.key, key + " comes from a merge key (<<); write it out"
		}
		v = owner.Content[e.index+1]
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
