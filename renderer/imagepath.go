package renderer

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/renderer/stream"
)

// leaves reports whether the image field's value v is one to leave
// alone because p holds a reference only in a form v is not in (Tagged,
// Qualified).
func leaves(p kindpath.Image, v string) bool {
	if p.Tagged {
		if _, tag, digest := splitImage(v); tag == "" && digest == "" {
			return true
		}
	}
	return p.Qualified && !namesRegistry(v)
}

// namesRegistry reports whether reference v starts with a registry host:
// a first component with a "." or a ":", or "localhost", as Docker reads
// it.
func namesRegistry(v string) bool {
	host, _, ok := strings.Cut(v, "/")
	return ok && (strings.ContainsAny(host, ".:") || host == "localhost")
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
			kind, through := kindpath.FormatKind(c.Group, c.Kind), "the object"
			if len(c.Fields) > 0 {
				through = strings.Join(c.Fields, ".")
			}
			return fmt.Errorf("checksum path %s covers no image path: no image path of %s goes through %s to a field inside it (image paths of %s: %s), so it would write no checksum", c, kind, through, c.Kind, strings.Join(ofKind, ", "))
		}
	}
	return nil
}

// FieldPrefix starts the Workload.Container of an image field that an
// image path found, and its line in a checksum: "field/PATH=REF", where
// PATH is the field's path in the object, items numbered:
// "field/spec.templates[0].container.image".
const FieldPrefix = "field/"

// imageKeys returns the words that tell a document that may hold an
// image field of an image path (or a container image path) whose last
// field does not contain "image", the word that tells the others
// (mayHoldImage): its kind and
// its last field, or for a path with selectors the value of its last
// selector (an env var's name, a flag), which the document spells out
// unless it escapes it (mayHoldImage parses a document with a
// backslash). A word is what a document must hold; each list is one
// path's.
func (r *Renderer) imageKeys() [][]string {
	var keys [][]string
	for _, p := range slices.Concat(r.imagePaths(), r.containerImagePaths()) {
		f := p.Fields[len(p.Fields)-1]
		if strings.Contains(f, string(imageKey)) {
			continue
		}
		for _, g := range slices.Backward(p.Fields) {
			if sel, ok := kindpath.ParseSelector(g); ok {
				f = sel.Value
				break
			}
		}
		words := []string{f}
		if p.Kind != "*" && p.Kind != "" {
			words = append(words, p.Kind)
		}
		if !slices.ContainsFunc(keys, func(k []string) bool { return slices.Equal(k, words) }) {
			keys = append(keys, words)
		}
	}
	return keys
}

func (r *Renderer) imagePaths() []kindpath.Image {
	if r.ImagePaths == nil {
		return kindpath.DefaultImages
	}
	return r.ImagePaths
}

// imagePathsFor returns the image paths of a group and kind.
func (r *Renderer) imagePathsFor(group, kind string) []kindpath.Image {
	var paths []kindpath.Image
	for _, p := range r.imagePaths() {
		if p.Matches(group, kind) && len(p.Fields) > 0 {
			paths = append(paths, p)
		}
	}
	return paths
}

// imageFields finds the image fields that paths (the image paths of the
// object's group and kind) lead to in obj, used by w, and the checksums
// that its checksum paths ask for. pods are the pod templates and pod specs
// that the object's pod spec paths found, which a checksum path may not
// name: they have a checksum of their own, or no metadata.
func (e *finder) imageFields(obj *yaml.Node, group, kind string, paths []kindpath.Image, w Workload, pods map[*yaml.Node]string) error {
	if len(paths) == 0 {
		return nil
	}
	var checks []kindpath.Checksum
	for _, c := range e.r.ChecksumPaths {
		if c.Matches(group, kind) {
			checks = append(checks, c)
		}
	}
	// First, find every image field that the paths lead to, each once
	// however many paths lead to it, whatever the checksum paths say.
	fields := map[fieldKey][]sumLine{} // the checksum lines of each field
	if _, err := e.pinFields(obj, "", paths, 0, w, fields, nil); err != nil {
		return err
	}
	// Then the checksums: each image path belongs to the longest
	// checksum path that its fields start with, or to none.
	owner := checksumOwners(paths, checks)
	// A mapping that two checksum paths lead to gets one checksum, of
	// the fields of both, each line once (the applier drops repeats).
	var annotated []*yaml.Node
	linesOf := map[*yaml.Node][]sumLine{}
	var podNodes map[*yaml.Node]bool // the nodes inside pods, once asked
	for j, c := range checks {
		var own []kindpath.Image
		for i, p := range paths {
			if owner[i] == j {
				own = append(own, p)
			}
		}
		if len(own) == 0 {
			continue
		}
		holders, err := e.checksumHolders(obj, c, w)
		if err != nil {
			return err
		}
		annotates := map[*yaml.Node]bool{} // the holders with lines of c's image paths
		for _, h := range holders {
			what, ok := pods[h.node]
			if !ok && len(pods) > 0 {
				if podNodes == nil {
					// Pod specs that aliases share are read again for
					// each object.
					podNodes = nodesUnder(pods)
					if !e.bound.spend(len(podNodes)) {
						return e.keyError(e.bound.keyError(), w.object())
					}
				}
				if podNodes[h.node] {
					what, ok = "mapping inside a pod template", true
				}
			}
			if ok {
				// The annotation would be a second checksum of the same
				// images, or a field of a pod spec that the API server
				// drops.
				return fmt.Errorf("%s: %s: the checksum path %s leads to the %s at %s, whose images the pod template's own checksum covers; name a mapping outside the pod template", e.d.At(h.node.Line), w.object(), c, what, h.trail)
			}
			lines, err := e.pinFields(h.node, h.trail, own, len(c.Fields), w, fields, nil)
			if err != nil {
				return err
			}
			if _, ok := linesOf[h.node]; !ok {
				annotated = append(annotated, h.node)
			}
			if len(lines) > 0 {
				linesOf[h.node] = append(linesOf[h.node], lines...)
				annotates[h.node] = true
			}
		}
		// Last, the way to each mapping that gets a checksum of c's
		// images is on the way to images; the way to one without is not
		// (an alias of a list of env vars, say, that c's image paths
		// find nothing in), or its other places would change unseen.
		e.stepTo(obj, c.Fields, annotates)
	}
	for _, h := range annotated {
		e.checksum(h, linesOf[h], w, true)
	}
	return nil
}

// checksumOwners returns, for each image path, the index in checks of
// the longest checksum path that its fields start with, or -1 for none.
func checksumOwners(paths []kindpath.Image, checks []kindpath.Checksum) []int {
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
	return owner
}

// checksumHolder is a mapping that a checksum path leads to, and the
// field path it was found at.
type checksumHolder struct {
	node  *yaml.Node
	trail string
}

// checksumHolders returns the mappings that the checksum path c leads to
// in obj (obj itself for a path without fields). A path that reaches
// anything but a mapping or null would leave the images under it out of
// every checksum: it is refused.
func (e *finder) checksumHolders(obj *yaml.Node, c kindpath.Checksum, w Workload) ([]checksumHolder, error) {
	var holders []checksumHolder
	var bad error
	if len(c.Fields) == 0 {
		holders = append(holders, checksumHolder{node: obj})
	}
	// The walk steps no route: imageFields steps those to the holders
	// that get a checksum, once it knows which do.
	err := walkWithin(e.bound, obj, c.Fields, func(*yaml.Node) {}, func(_, node *yaml.Node, _ string, trail []string) bool {
		switch at := fieldPath(trail); {
		case bad != nil || (node.Kind == yaml.ScalarNode && node.Tag == "!!null"):
		case node.Kind != yaml.MappingNode:
			bad = fmt.Errorf("%s: %s: the checksum path %s leads to %s at %s, want a mapping", e.d.At(node.Line), w.object(), c, stream.KindName(node), at)
		default:
			holders = append(holders, checksumHolder{node, at})
		}
		return false
	})
	if err != nil {
		return nil, e.keyError(err, w.object())
	}
	if bad != nil {
		return nil, bad
	}
	return holders, nil
}

// stepTo steps the routes from n along fields to each of the mappings
// used, which the finder changes or reaches an image field through: a
// walk that finds first and pins later steps none while it finds, as a
// way to a mapping that holds nothing to pin (a field that does not read
// as a reference, a checksum path's mapping without image fields) is
// not one on the way to images.
func (e *finder) stepTo(n *yaml.Node, fields []string, used map[*yaml.Node]bool) {
	if len(fields) == 0 || len(used) == 0 || e.routes == nil {
		return
	}
	// The first walk went through without an error.
	_ = walk(n, fields, e.routes.step, func(_, node *yaml.Node, _ string, _ []string) bool { return used[node] })
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
		m := stream.Deref(stack[len(stack)-1])
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

// pinFields finds the image fields of paths in mapping from, which the
// path base (fieldPath) leads to from the object, following each path's
// fields after the first skip. spec is the pod spec when from is one of
// its containers (ContainerImagePaths), else nil. It finds each field
// once: fields holds the checksum lines of each field found (none: a
// field left unset), and a field that a pod spec path found is its
// container's, found and reported as such.
// It returns the checksum lines of the fields found, each once.
func (e *finder) pinFields(from *yaml.Node, base string, paths []kindpath.Image, skip int, w Workload, fields map[fieldKey][]sumLine, spec *yaml.Node) ([]sumLine, error) {
	type field struct {
		m    *yaml.Node // the mapping that holds the image field
		path string
	}
	var lines []sumLine
	listed := map[fieldKey]bool{}
	var used map[*yaml.Node]bool // the mappings of p whose fields have lines
	for _, p := range paths {
		key := p.Fields[len(p.Fields)-1]
		var found []field
		if mid := p.Fields[skip : len(p.Fields)-1]; len(mid) == 0 {
			found = append(found, field{from, joinPath(base, key)})
		} else {
			// The walk steps no route: stepTo steps those to the
			// mappings whose fields get pinned, below.
			err := walkWithin(e.bound, from, mid, func(*yaml.Node) {}, func(_, node *yaml.Node, _ string, trail []string) bool {
				if node.Kind != yaml.MappingNode {
					return false
				}
				found = append(found, field{node, joinPath(joinPath(base, fieldPath(trail)), key)})
				return false
			})
			if err != nil {
				return nil, e.keyError(err, w.object())
			}
		}
		for _, f := range found {
			k := fieldKey{stream.Deref(f.m), key}
			if len(p.Embedded) > 0 {
				// Each path inside a string is a field of its own.
				k.key += "|" + p.String()
			}
			got, done := fields[k]
			if !done {
				var err error
				if got, err = e.pinField(f.m, key, f.path, w, p, spec); err != nil {
					return nil, err
				}
				fields[k] = got
			}
			if len(got) > 0 && !listed[k] {
				listed[k] = true
				lines = append(lines, got...)
			}
			if len(got) > 0 {
				if used == nil {
					used = map[*yaml.Node]bool{}
				}
				used[stream.Deref(f.m)] = true
			}
		}
		e.stepTo(from, p.Fields[skip:len(p.Fields)-1], used)
		clear(used)
	}
	return lines, nil
}

// pinField finds image field key of mapping m, at path in the object (in
// the container, for a spec), which image path p found, and returns its
// checksum lines: none, or one for each value a flag has. A field that a
// pod spec path found already is not found again: it is the
// container's (or image volume's), and its line names the field with the
// value pinned.
func (e *finder) pinField(m *yaml.Node, key, path string, w Workload, p kindpath.Image, spec *yaml.Node) ([]sumLine, error) {
	if spec == nil {
		w.Container = FieldPrefix + path
	} else {
		w.Field = path
	}
	if values, ok := e.podFields[fieldKey{stream.Deref(m), key}]; ok {
		var lines []sumLine
		for _, v := range values {
			if v.site >= 0 || v.text != "" {
				lines = append(lines, sumLine{w.Container, w.Field, v})
			}
		}
		return lines, nil
	}
	if len(p.Embedded) > 0 && spec == nil { // Validate refuses it in a container
		return e.pinEmbedded(m, key, path, w, p)
	}
	if sel, ok := kindpath.ParseSelector(key); ok && sel.IsFlag() {
		return e.pinFlag(m, key, sel, w, p, spec)
	}
	image, err := stream.Get(m, key)
	if err != nil {
		return nil, e.keyError(err, w.String())
	}
	if unset(image.Value) || (image.Value.Kind == yaml.ScalarNode && leaves(p, image.Value.Value)) {
		e.handle(image.Value)
		return nil, nil
	}
	if hasSelector(p.Fields) {
		// An env var's value, say: a reference only when it reads as one.
		if v := stream.Deref(image.Value); ownTag(v) {
			return nil, e.ownTagError(v, key, w)
		}
		v, ok := e.pinText(spec, m, image, "", w, p)
		if !ok {
			if spec != nil {
				e.podValues(m, key, nil)
			}
			return nil, nil
		}
		if spec != nil {
			e.podField(m, key, v)
		}
		return []sumLine{{w.Container, w.Field, v}}, nil
	}
	line, ok, err := e.pinImage(nil, m, key, w)
	if !ok {
		return nil, err
	}
	return []sumLine{line}, nil
}

// pinFlag finds the values of the flag sel.Value in the list of arguments
// sel.Field of mapping m (key is the selector as written): the rest of
// each item "FLAG=VALUE", and each item after an item "FLAG", when it
// reads as a reference (a URL, a path or another flag does not).
func (e *finder) pinFlag(m *yaml.Node, key string, sel kindpath.Selector, w Workload, p kindpath.Image, spec *yaml.Node) ([]sumLine, error) {
	list, err := stream.Get(m, sel.Field)
	if err != nil {
		return nil, e.keyError(err, w.String())
	}
	if list.Value == nil || list.Value.Kind != yaml.SequenceNode {
		return nil, nil
	}
	var lines []sumLine
	var values []fieldValue
	items := list.Value.Content
	for i := 0; i < len(items); i++ {
		arg := stream.Deref(items[i])
		flag := arg.Kind == yaml.ScalarNode && (arg.Value == sel.Value || strings.HasPrefix(arg.Value, sel.Value+"="))
		if flag && ownTag(arg) {
			return nil, e.ownTagError(arg, "an argument", w)
		}
		if flag && arg.Value == sel.Value && i+1 < len(items) && ownTag(stream.Deref(items[i+1])) {
			return nil, e.ownTagError(stream.Deref(items[i+1]), "an argument", w)
		}
		if arg.Kind != yaml.ScalarNode || arg.Tag != "!!str" {
			continue
		}
		var raw *yaml.Node
		prefix := sel.Value + "="
		switch {
		case strings.HasPrefix(arg.Value, prefix):
			raw = items[i]
		case arg.Value == sel.Value && i+1 < len(items):
			i++
			raw, prefix = items[i], ""
		default:
			continue
		}
		if v, ok := e.pinText(spec, list.Value, stream.Entry{Value: stream.Deref(raw), Via: []*yaml.Node{raw}}, prefix, w, p); ok {
			// The list is on the way to an image only when one of its
			// values is pinned.
			e.routes.steps(list.Via)
			lines = append(lines, sumLine{w.Container, w.Field, v})
			values = append(values, v)
		}
	}
	if spec != nil {
		e.podValues(m, key, values)
	}
	return lines, nil
}

// ownTagError refuses what, the scalar n at an image path of w, for its
// tag of the chart's own ("!x --flag"): the API server reads the plain
// string, this parser a value of that tag.
func (e *finder) ownTagError(n *yaml.Node, what string, w Workload) error {
	return e.keyError(&stream.KeyError{Line: n.Line, Msg: fmt.Sprintf("%s is tagged %s (%s), which the API server reads as the string; write it as a plain string", what, n.Tag, n.Value)}, w.String())
}

// ownTag says whether the scalar n has a tag of the document's own (not
// one of YAML's "!!" tags, nor the non-specific "!").
func ownTag(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") && n.Tag != "!"
}

// pinText finds the reference in the string scalar image (found in c, a
// mapping or a list of arguments) after prefix, used by w in pod spec
// spec (nil for none), when it reads as a reference with a tag or a
// digest that image path p holds; anything else (a URL, a path, a
// number, a name alone) is left alone without an error. It returns the
// field's value to be, and false for none.
func (e *finder) pinText(spec, c *yaml.Node, image stream.Entry, prefix string, w Workload, p kindpath.Image) (fieldValue, bool) {
	img := image.Value
	if img == nil || img.Kind != yaml.ScalarNode || img.Tag != "!!str" {
		return fieldValue{}, false
	}
	e.handle(img)
	if _, ok := yaml11Reading(img); ok {
		return fieldValue{}, false
	}
	// A name without a tag or digest may be one that the program
	// completes (with a version, a registry of its own): not pinned.
	text, ok := strings.CutPrefix(img.Value, prefix)
	if _, tag, digest := splitImage(text); !ok || !readsAsReference(text) || leaves(p, text) || (tag == "" && digest == "") {
		return fieldValue{}, false
	}
	ref, err := name.ParseReference(text)
	if err != nil {
		return fieldValue{}, false
	}
	u := use{image: intern(text), ref: ref, workload: e.own(w), doc: e.d, line: img.Line}
	if spec != nil {
		if e.specUses == nil {
			e.specUses = map[*yaml.Node][]use{}
		}
		e.specUses[spec] = append(e.specUses[spec], u)
	}
	return e.site(u, c, image, text, prefix), true
}

// readsAsReference reports whether s, a value of a field that may hold
// other things than references (an env var, an argument), reads as an
// image reference: not a URL, a path, a flag, a placeholder or words.
func readsAsReference(s string) bool {
	switch {
	case s == "", strings.Contains(s, "://"), strings.ContainsAny(s[:1], "/.-$~"),
		strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }),
		strings.Contains(s, "{{"), strings.Contains(s, "$("):
		return false
	}
	return true
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
