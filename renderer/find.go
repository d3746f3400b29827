package renderer

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/imageref"
	"github.com/digestpin/digestpin/renderer/stream"
)

// maxListDepth bounds List objects nested in List objects.
const maxListDepth = 16

// found is what the finder found in one parsed document: every use of an
// image, the fields to write once their digests are known, and the
// checksums to write over them, each in the order the walk met it.
// Nothing in the document has changed: the applier (apply.go) makes the
// changes, and the first phase of a Render finds before any digest is
// known.
type found struct {
	// uses are the image fields with a reference, and again the fields
	// of a pod spec shared through an alias for each workload that
	// shares it: the collection's uses, in stream order. The document's
	// are uses[from:], after those of the documents before it in the
	// slice the finder was given to append to.
	uses []use
	from int
	// sites are the image fields to write, each once.
	sites []site
	// sums are the checksums to write: a pod template's, or a mapping's
	// that a checksum path names.
	sums []sum
	// routes are how the walk reached the nodes (nil: no alias), for
	// the applier to check its changes against.
	routes *routes
	// kept are the warnings about image fields kept as written because
	// they hold no reference (KeepUnresolved); unpinned the image-like
	// values that no image field reached.
	kept     []string
	unpinned []Unpinned
	// stopped is the error the walk stopped at, or nil: what it found
	// is what came before it. The applier returns it after the errors
	// of the checksums that came before it.
	stopped error
}

// site is an image field to write: text, the reference that the scalar
// of image holds after prefix, in c (a container, an image volume's
// image, another mapping, a list of arguments).
type site struct {
	use          int // its use, an index of found.uses, whose digest pins it
	image        stream.Entry
	c            *yaml.Node
	text, prefix string
	// inner is, for an image inside a string (pinEmbedded), the scalar
	// of the string's text that holds it; image is then the string.
	inner *yaml.Node
	// value is the reference pinned, which the applier sets once the
	// digest is known.
	value string
}

// fieldValue is what an image field holds, to go into a checksum: the
// value pinned of site, or text as written when site < 0.
type fieldValue struct {
	site int
	text string
}

// sumLine is a checksum line to be: "CONTAINER=VALUE", or
// "CONTAINER/FIELD=VALUE" for a field of a container.
type sumLine struct {
	container, field string
	fieldValue
}

// sum is a checksum to write into holder's annotation, of lines, the
// images of w in it. It is written once the digests of the uses found
// before it (found.uses[:uses]) are known; dedup drops repeated lines.
type sum struct {
	holder *yaml.Node
	lines  []sumLine
	w      Workload
	uses   int
	dedup  bool
}

// finder walks one parsed document and finds its image fields, changing
// nothing.
type finder struct {
	*found
	r *Renderer
	d *document
	// An alias names a node again. Objects and pod specs are walked
	// once each, so that aliases cannot make the work grow
	// exponentially (a List of aliases of Lists of aliases).
	objects   map[*yaml.Node]bool      // objects walked
	specLines map[*yaml.Node][]sumLine // pod spec → its checksum lines
	specUses  map[*yaml.Node][]use     // pod spec → its image fields
	// podFields are the values of the image fields of pod specs: an
	// image path that leads to one finds a container's image, pinned
	// already.
	podFields       map[fieldKey][]fieldValue
	podFieldsWanted bool // the object being walked has image paths
	// handled are the scalars that image fields reached; containers the
	// containers of pod specs still to scan, scanned the nodes scanned.
	handled, scanned map[*yaml.Node]bool
	containers       []containerAt
	// embed says that the document may hold strings with line breaks
	// (mayEmbed), to scan for embedded images; embedSeen are the
	// anchored nodes that scan stepped into.
	embed     bool
	embedSeen map[*yaml.Node]bool
	// embedded finds the bytes of images inside strings in the
	// document, once one is asked for; embedPinned are the places, in
	// the text of each string, of the images an image path pinned there,
	// which scanEmbedded does not list.
	embedded    *stream.Embedded
	embedPinned map[*yaml.Node]map[textPlace]bool
	// name is the copy of the last workload name that own made.
	name string
	// bound is what the walks may read in the document (fanOut; nil
	// without an alias): an object reached again is walked once, but a
	// pod spec or another node that aliases name in many objects is
	// read for each.
	bound *fanOut
}

// find walks parsed document p of d and puts what it found into f: its
// uses are appended to f.uses, and the rest replaced (the memory of the
// sites and sums reused: a worker finds in one document after another).
// On error f holds what the walk found before it, with the error as
// f.stopped.
func (r *Renderer) find(d *document, p *stream.Parsed, f *found) {
	*f = found{uses: f.uses, from: len(f.uses), sites: f.sites[:0], sums: f.sums[:0]}
	e := finder{found: f, r: r, d: d, embed: mayEmbed(d.Body())}
	if p.Aliases != nil {
		// Without an alias each node has one place, and the walks
		// cost what the paths followed through the document do.
		e.bound = newFanOut(d.Document, "its pod templates and image fields")
	}
	e.routes = newRoutes(p.Aliases)
	e.routes.step(p.Obj)
	e.stopped = e.object(p.Obj, 0)
}

// own returns w.owned(), whose copy of the name the fields of one
// workload share: its containers and fields repeat it, and each field's
// Workload is kept for the whole Render (Image.Workloads).
func (e *finder) own(w Workload) Workload {
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

// object walks a Kubernetes object, or the items of a List.
func (e *finder) object(obj *yaml.Node, depth int) error {
	if !once(&e.objects, obj) {
		return nil
	}
	if e.bound != nil {
		e.bound.at = obj.Line
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
	apiVersion, w, err := identify(obj, kind)
	if err != nil {
		return e.keyError(err, kind)
	}
	// The walk steps no route: the way to a pod spec is on the way to
	// images only when the spec holds some (below).
	templates, err := findPodTemplates(obj, apiGroup(apiVersion), kind, e.r.paths(), func(*yaml.Node) {}, e.bound)
	if err != nil {
		return e.keyError(err, w.object())
	}
	// The image fields of pod specs and the pod templates matter to the
	// image paths of the kind, which most kinds have none of.
	paths := e.r.imagePathsFor(apiGroup(apiVersion), kind)
	e.podFieldsWanted = len(paths) > 0
	var pods map[*yaml.Node]string
	var withImages map[*yaml.Node]bool // the pod specs with image fields
	for _, t := range templates {
		if err := e.template(t, w); err != nil {
			return err
		}
		if len(e.specLines[t.spec]) > 0 {
			if withImages == nil {
				withImages = map[*yaml.Node]bool{}
			}
			withImages[t.spec] = true
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
	for _, p := range e.r.paths() {
		if p.Matches(apiGroup(apiVersion), kind) {
			e.stepTo(obj, p.Fields, withImages)
		}
	}
	if err := e.imageFields(obj, apiGroup(apiVersion), kind, paths, w, pods); err != nil {
		return err
	}
	// Last, what looks like an image and is left as a tag.
	e.scanUnpinned(obj, apiGroup(apiVersion), w)
	if e.embed {
		e.scanEmbedded(obj, w)
	}
	return nil
}

// template finds the images of one pod template and its checksum.
func (e *finder) template(t podTemplate, w Workload) error {
	lines, done := e.specLines[t.spec]
	if done {
		// A pod spec shared through an alias is walked once, but each
		// workload that shares it uses its images, and its pod
		// template gets their checksum: a spec that aliases name in
		// many objects is paid for each.
		if !e.bound.spend(len(e.specUses[t.spec]) + len(lines)) {
			return e.keyError(e.bound.keyError(), w.object())
		}
		for _, u := range e.specUses[t.spec] {
			u.workload.Kind, u.workload.Namespace, u.workload.Name = w.Kind, w.Namespace, w.Name
			u.workload = e.own(u.workload)
			e.uses = append(e.uses, u)
		}
	}
	if !done {
		var err error
		if lines, err = e.podSpecImages(t.spec, w); err != nil {
			return err
		}
		if e.specLines == nil {
			e.specLines = map[*yaml.Node][]sumLine{}
		}
		e.specLines[t.spec] = lines
	}
	e.checksum(t.holder, lines, w, false)
	return nil
}

// checksum records that holder (a pod template, or a mapping that a
// checksum path names; nil for none) is to get the checksum of lines, the
// images of w in it, once the digests of the uses found so far are
// known; dedup drops repeated lines.
func (e *finder) checksum(holder *yaml.Node, lines []sumLine, w Workload, dedup bool) {
	if holder != nil {
		e.sums = append(e.sums, sum{holder: holder, lines: lines, w: w, uses: len(e.uses), dedup: dedup})
	}
}

// podSpecImages finds the images of a pod spec used by w: those of its
// containers, then those of its image volumes. It returns their checksum
// lines: "NAME=REF" for a
// container, "volume/NAME=REF" for an image volume. A container name is
// a DNS label, without "/", so the two cannot collide, and a pod spec
// without image volumes keeps the checksum it had before digestpin knew
// them.
func (e *finder) podSpecImages(spec *yaml.Node, w Workload) ([]sumLine, error) {
	var lines []sumLine
	for _, field := range containerFields {
		list, err := stream.Get(spec, field)
		if err != nil {
			return nil, e.keyError(err, w.object())
		}
		if list.Value == nil || list.Value.Kind != yaml.SequenceNode {
			continue
		}
		for i, c := range list.Value.Content {
			// A container that is not a mapping (an alias of an image
			// field, say) holds no image and is not on the way to one;
			// the API server refuses it.
			if stream.Deref(c).Kind != yaml.MappingNode {
				continue
			}
			// YAML decoders disagree on which of two equal keys wins:
			// pinning one could leave the other in force. get refuses
			// what the API server could read otherwise.
			w.Container, err = stream.Str(c, "name")
			if err != nil {
				return nil, e.keyError(err, fmt.Sprintf("%s %s[%d]", w.object(), field, i))
			}
			had := len(lines)
			line, ok, err := e.pinImage(spec, c, "image", w)
			if err != nil {
				return nil, err
			}
			if ok {
				lines = append(lines, line)
			}
			e.containers = append(e.containers, containerAt{stream.Deref(c), w})
			// Then the images in its args and env.
			if paths := containerPathsFor(c, e.r.containerImagePaths(), e.r.containerSelectors()); len(paths) > 0 {
				more, err := e.pinFields(c, "", paths, 0, w, map[fieldKey][]sumLine{}, spec)
				if err != nil {
					return nil, err
				}
				lines = append(lines, more...)
			}
			// The container, and the list, are on the way to images
			// only when it holds some.
			if len(lines) > had {
				e.routes.steps(list.Via)
				e.routes.step(c)
			}
		}
	}
	more, err := e.imageVolumes(spec, w)
	if err != nil {
		return nil, err
	}
	return append(lines, more...), nil
}

// imageVolumes finds the image volumes of pod spec spec (Kubernetes
// 1.31+: volumes[].image.reference is pulled like a container's image)
// and returns their checksum lines, "volume/NAME=REF".
func (e *finder) imageVolumes(spec *yaml.Node, w Workload) ([]sumLine, error) {
	var lines []sumLine
	vols, err := stream.Get(spec, "volumes")
	if err != nil {
		return nil, e.keyError(err, w.object())
	}
	if vols.Value == nil || vols.Value.Kind != yaml.SequenceNode {
		return lines, nil
	}
	for i, v := range vols.Value.Content {
		img, err := stream.Get(v, "image")
		if err != nil {
			return nil, e.keyError(err, fmt.Sprintf("%s volumes[%d]", w.object(), i))
		}
		if img.Value == nil || img.Value.Kind != yaml.MappingNode {
			continue // not an image volume (or one the API server refuses)
		}
		name, err := stream.Str(v, "name")
		if err != nil {
			return nil, e.keyError(err, fmt.Sprintf("%s volumes[%d]", w.object(), i))
		}
		w.Container = VolumePrefix + name
		line, ok, err := e.pinImage(spec, img.Value, "reference", w)
		if err != nil {
			return nil, err
		}
		if ok {
			// Only an image volume with an image is on the way to
			// it: a volume that is an alias of a container, say, is
			// not.
			e.routes.steps(vols.Via)
			e.routes.step(v)
			e.routes.steps(img.Via)
			lines = append(lines, line)
		}
	}
	return lines, nil
}

// pinImage finds the image field key of mapping m (a container's
// "image", an image volume's "reference", a field an image path names),
// which w uses in pod spec spec (nil for an image path's field). It
// returns the field's checksum line, and false when m has no such field.
func (e *finder) pinImage(spec, m *yaml.Node, key string, w Workload) (sumLine, bool, error) {
	image, err := stream.Get(m, key)
	if err != nil {
		return sumLine{}, false, e.keyError(err, w.String())
	}
	img := image.Value
	if img == nil {
		return sumLine{}, false, nil // no image: nothing to pin
	}
	e.handle(img)
	// Where the field is goes into messages only: spelt out when needed.
	where := func() string { return e.d.At(img.Line) }
	if img.Kind != yaml.ScalarNode || img.Tag != "!!str" {
		return sumLine{}, false, fmt.Errorf("%s: %s: %s is %s, want a reference such as registry/name:tag", where(), w, key, stream.Describe(img))
	}
	if v, ok := yaml11Reading(img); ok {
		return sumLine{}, false, fmt.Errorf("%s: %s: %s is %s, which the API server reads as %s: quote it (%q) if it is a reference", where(), w, key, img.Value, v, img.Value)
	}
	ref, err := e.r.parseReference(key, img)
	if err != nil {
		err = fmt.Errorf("%s: %s: %w", where(), w, err)
		if !e.r.KeepUnresolved {
			return sumLine{}, false, err
		}
		// A blank image is a pattern (OpenShift's image triggers fill it
		// in); keep it as written, in the checksum as written, and say so
		// once the document is done.
		e.kept = append(e.kept, fmt.Sprintf("keeping %s %q unpinned: %v", key, img.Value, err))
		v := fieldValue{site: -1, text: img.Value}
		if spec != nil {
			e.podField(m, key, v)
		}
		return sumLine{container: w.Container, fieldValue: v}, true, nil
	}
	u := use{image: intern(img.Value), ref: ref, workload: e.own(w), doc: e.d, line: img.Line}
	if spec != nil {
		if e.specUses == nil {
			e.specUses = map[*yaml.Node][]use{}
		}
		e.specUses[spec] = append(e.specUses[spec], u)
	}
	v := e.site(u, m, image, img.Value, "")
	if spec != nil {
		e.podField(m, key, v)
	}
	return sumLine{container: w.Container, fieldValue: v}, true, nil
}

// site records use u of image field image, found in c (a mapping, or a
// list of arguments) with the reference text after prefix, as a field to
// write once its digest is known, and returns its value to be. The way
// to the field goes into the routes; an image field that is an alias is
// written out in its place, so the node it names is not on the way.
func (e *finder) site(u use, c *yaml.Node, image stream.Entry, text, prefix string) fieldValue {
	e.uses = append(e.uses, u)
	raw := image.Via[len(image.Via)-1]
	e.routes.steps(image.Via[:len(image.Via)-1])
	if raw.Kind == yaml.AliasNode {
		e.routes.take(raw)
	} else {
		e.routes.step(raw)
	}
	e.sites = append(e.sites, site{use: len(e.uses) - 1, image: image, c: c, text: text, prefix: prefix})
	return fieldValue{site: len(e.sites) - 1}
}

// podField records v, the value of image field key of mapping m of a pod
// spec, for an image path that leads to it.
func (e *finder) podField(m *yaml.Node, key string, v fieldValue) {
	if e.podFieldsWanted { // most kinds have no image path
		e.podValues(m, key, []fieldValue{v})
	}
}

// podValues records the values of image field key of mapping m of a pod
// spec (none: it holds no reference), as podField does.
func (e *finder) podValues(m *yaml.Node, key string, values []fieldValue) {
	if !e.podFieldsWanted {
		return
	}
	if e.podFields == nil {
		e.podFields = map[fieldKey][]fieldValue{}
	}
	e.podFields[fieldKey{stream.Deref(m), key}] = values
}

// keyError is keyError of the finder's document.
func (e *finder) keyError(err error, who string) error { return keyError(e.d, err, who) }

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

// identify reads the apiVersion of object obj of kind, and its kind,
// namespace and name as a Workload (without a container).
func identify(obj *yaml.Node, kind string) (apiVersion string, w Workload, err error) {
	if apiVersion, err = stream.Str(obj, "apiVersion"); err != nil {
		return "", Workload{}, err
	}
	w = Workload{Kind: kind}
	meta, err := stream.Get(obj, "metadata")
	if err == nil {
		w.Name, err = stream.Str(meta.Value, "name")
	}
	if err == nil {
		w.Namespace, err = stream.Str(meta.Value, "namespace")
	}
	if err != nil {
		return "", Workload{}, err
	}
	return apiVersion, w, nil
}
