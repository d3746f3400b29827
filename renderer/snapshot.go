package renderer

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/renderer/stream"
)

// Snapshot is what the objects of a stream hold that a later render of
// the same release may change while no image moves: each pod template,
// without what digestpin writes into it (the digests of its images and
// the checksum annotation), and the keys of each Secret. It holds
// SHA-256 hashes of the parts and values, never the values themselves,
// and tells nothing of them but which differ: Compare says that of two
// Snapshots.
type Snapshot struct {
	templates []snapObject
	secrets   []snapObject
}

// snapObject is a pod template or a Secret of a Snapshot: its parts (a
// template's fields, a Secret's keys) by path, with the hash of each.
type snapObject struct {
	key   snapKey
	parts map[string][sha256.Size]byte
	order []string // the paths in the order the document has them
	// groups are the containers the parts of a template are in, by path
	// ("spec.containers[web].env" → "spec.containers[web]"), so that a
	// container added or removed is named once.
	groups map[string]string
}

// snapKey is which object a snapObject is in: kind, namespace and name,
// where in the object for a pod template, and n, the number of objects
// of the stream with the same key before it (a stream may repeat one).
type snapKey struct {
	kind, namespace, name, path string
	n                           int
}

// TemplateChange is a pod template that differs between two Snapshots
// for another reason than its images' digests.
type TemplateChange struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Template is where the pod template is in the object:
	// "spec.template", "spec.jobTemplate.spec.template".
	Template string `json:"template"`
	// Change is ChangeChanged, or ChangeAdded or ChangeRemoved for a pod
	// template (an object) one of the Snapshots does not have.
	Change string `json:"change"`
	// Fields are the paths of the parts that differ, relative to the
	// template, in the order the later template has them (then the
	// parts it lacks): "metadata.annotations.checksum/config",
	// "spec.containers[web].env", "spec.volumes[data]". A part is an
	// annotation or a label, another field of the metadata, a field of a
	// container, a volume, or another field of the pod spec or the
	// template. Names that are not plain (letters, digits, '-', '_', '.',
	// '/') are quoted.
	Fields []string `json:"fields,omitempty"`
}

// SecretChange is a Secret whose keys differ between two Snapshots, named
// by key, never by value: the keys of data and stringData, which the API
// server merges (stringData wins), compared by the bytes they decode to.
type SecretChange struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Change is ChangeChanged, or ChangeAdded or ChangeRemoved for a
	// Secret one of the Snapshots does not have (all its keys are then
	// Added or Removed).
	Change string `json:"change"`
	// Changed, Added and Removed are the keys whose value differs, that
	// the earlier Secret lacks, and that the later one lacks, quoted as
	// TemplateChange.Fields are.
	Changed []string `json:"changed,omitempty"`
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
}

// The changes of a TemplateChange or a SecretChange.
const (
	ChangeChanged = "changed"
	ChangeAdded   = "added"
	ChangeRemoved = "removed"
)

// Snapshot reads the pod templates (found as Render finds them, through
// PodSpecPaths) and the Secrets of stream in, without a Resolver. It
// parses only the documents that may hold an image field or a Secret,
// one at a time, each within MaxNodes, and keeps a hash per part: time
// and memory grow linearly with the stream. It fails where Render would
// on the documents it reads, naming the document.
func (r *Renderer) Snapshot(in []byte) (*Snapshot, error) {
	docs, err := stream.Split(in)
	if err != nil {
		return nil, err
	}
	s := &snapshotter{r: r, keys: r.imageKeys(), seen: map[snapKey]int{}, snap: &Snapshot{}}
	for _, d := range docs {
		if err := s.document(d); err != nil {
			return nil, err
		}
	}
	return s.snap, nil
}

// snapshotter is the state of one Snapshot.
type snapshotter struct {
	r    *Renderer
	keys [][]string
	snap *Snapshot
	// seen counts the objects by key, for snapKey.n.
	seen map[snapKey]int
	// hashes are the hashes of the nodes of the document being read,
	// without pinned digests (in containers and volumes) and with.
	hashes map[hashKey][sha256.Size]byte
	// objects are the objects of the document read already: an alias
	// names one again (a List of aliases of Lists of aliases), and each
	// is read once, as Render walks it once.
	objects map[*yaml.Node]bool
	// bound is the document's fanOut: an alias that names a pod spec
	// again in many objects would make the reading grow with the
	// square of the document.
	bound *fanOut
}

// secretWord is the cheap test for a document that may hold a Secret.
var secretWord = []byte("Secret")

// document reads one document.
func (s *snapshotter) document(d *stream.Document) error {
	body := d.Body()
	if !mayHoldImage(body, s.keys) && !bytes.Contains(body, secretWord) {
		return nil
	}
	p, err := stream.Parse(d, true)
	if p == nil || err != nil {
		return err
	}
	defer p.Release()
	if s.hashes == nil {
		s.hashes = map[hashKey][sha256.Size]byte{}
	}
	clear(s.hashes)
	clear(s.objects)
	s.bound = newFanOut(d, "its pod templates and Secrets")
	if err := s.object(d, p.Obj, 0); err != nil {
		return err
	}
	if s.bound.over() {
		return keyError(&document{Document: d}, s.bound.keyError(), "")
	}
	return nil
}

// object reads a Kubernetes object, or the items of a List.
func (s *snapshotter) object(d *stream.Document, obj *yaml.Node, depth int) error {
	if !once(&s.objects, obj) {
		return nil
	}
	s.bound.at = obj.Line
	kind, err := stream.Str(obj, "kind")
	if err != nil {
		return keyError(&document{Document: d}, err, "")
	}
	if strings.HasSuffix(kind, "List") {
		items, err := stream.Get(obj, "items")
		if err != nil {
			return keyError(&document{Document: d}, err, kind)
		}
		if items.Value != nil && items.Value.Kind == yaml.SequenceNode {
			if depth >= maxListDepth {
				return fmt.Errorf("%s: List objects nested more than %d deep", d.At(obj.Line), maxListDepth)
			}
			for _, item := range items.Value.Content {
				if item = stream.Deref(item); item.Kind == yaml.MappingNode {
					if err := s.object(d, item, depth+1); err != nil {
						return err
					}
				}
			}
			return nil
		}
	}
	apiVersion, w, err := identify(obj, kind)
	if err != nil {
		return keyError(&document{Document: d}, err, kind)
	}
	if kind == "Secret" && apiVersion == "v1" {
		return s.secret(d, obj, w)
	}
	templates, err := findPodTemplates(obj, apiGroup(apiVersion), kind, s.r.paths(), func(*yaml.Node) {}, s.bound)
	if err != nil {
		return keyError(&document{Document: d}, err, w.object())
	}
	for _, t := range templates {
		o := snapObject{key: s.key(snapKey{kind: w.Kind, namespace: w.Namespace, name: w.Name, path: t.path}), parts: map[string][sha256.Size]byte{}}
		if t.holder == nil {
			s.podSpec(&o, "", t.spec)
		} else {
			s.template(&o, t)
		}
		if s.bound.over() {
			return keyError(&document{Document: d}, s.bound.keyError(), w.object())
		}
		s.snap.templates = append(s.snap.templates, o)
	}
	return nil
}

// key returns k with its n: the number of objects before it with the
// same key.
func (s *snapshotter) key(k snapKey) snapKey {
	k.n = s.seen[k]
	s.seen[k]++
	return k
}

// template reads the parts of a pod template with a holder: its
// annotations (the checksum annotation left out) and labels, each other
// field of its metadata, the parts of its pod spec, and each other field.
func (s *snapshotter) template(o *snapObject, t podTemplate) {
	s.each(t.holder, func(k string, v *yaml.Node) {
		switch {
		case k == "metadata":
			s.each(v, func(mk string, mv *yaml.Node) {
				if mk != "annotations" && mk != "labels" {
					s.part(o, "metadata."+plain(mk), mv, false)
					return
				}
				m := stream.Deref(mv)
				if m == nil || m.Kind != yaml.MappingNode {
					s.part(o, "metadata."+mk, mv, false)
					return
				}
				s.each(m, func(ak string, av *yaml.Node) {
					if mk == "annotations" && ak == s.r.annotation() {
						return
					}
					s.part(o, "metadata."+mk+"."+plain(ak), av, false)
				})
			})
		case k == "spec" && stream.Deref(v) == t.spec:
			s.podSpec(o, "spec.", t.spec)
		default:
			s.part(o, plain(k), v, false)
		}
	})
}

// podSpec reads the parts of a pod spec, its paths after prefix: each
// field of each container ("containers[NAME].env"), each volume
// ("volumes[NAME]"), and each other field.
func (s *snapshotter) podSpec(o *snapObject, prefix string, spec *yaml.Node) {
	s.each(spec, func(k string, v *yaml.Node) {
		list := stream.Deref(v)
		isList := list != nil && list.Kind == yaml.SequenceNode
		switch {
		case isList && slices.Contains(containerFields, k):
			if !s.bound.spend(len(list.Content)) {
				return
			}
			for i, c := range list.Content {
				at := prefix + k + "[" + itemName(c, i) + "]"
				if m := stream.Deref(c); m == nil || m.Kind != yaml.MappingNode {
					s.part(o, at, c, true)
					continue
				}
				s.each(c, func(ck string, cv *yaml.Node) {
					path := at + "." + plain(ck)
					s.part(o, path, cv, true)
					if o.groups == nil {
						o.groups = map[string]string{}
					}
					o.groups[path] = at
				})
			}
		case isList && k == "volumes":
			if !s.bound.spend(len(list.Content)) {
				return
			}
			for i, vol := range list.Content {
				s.part(o, prefix+k+"["+itemName(vol, i)+"]", vol, true)
			}
		default:
			s.part(o, prefix+plain(k), v, false)
		}
	})
}

// itemName names item i of a list of containers or volumes by its name,
// or by its index when it has none.
func itemName(item *yaml.Node, i int) string {
	if name, err := stream.Str(item, "name"); err == nil && name != "" {
		return plain(name)
	}
	return strconv.Itoa(i)
}

// part adds the part at path, the hash of v; a path given again (a
// repeated key, two containers of one name) hashes every value given.
// pinned says that v is where digestpin pins images (a container, a
// volume), whose digests do not count.
func (s *snapshotter) part(o *snapObject, path string, v *yaml.Node, pinned bool) {
	h := s.hash(v, pinned)
	if prev, ok := o.parts[path]; ok {
		h = sha256.Sum256(append(prev[:], h[:]...))
	} else {
		o.order = append(o.order, path)
	}
	o.parts[path] = h
}

// secret reads the keys of a Secret: data values decoded from base64 (as
// the API server decodes them; a value it could not decode is kept as
// written), then stringData's, which win.
func (s *snapshotter) secret(d *stream.Document, obj *yaml.Node, w Workload) error {
	o := snapObject{key: s.key(snapKey{kind: w.Kind, namespace: w.Namespace, name: w.Name}), parts: map[string][sha256.Size]byte{}}
	values := map[string][]byte{} // key → what its value hashes
	for _, field := range []string{"data", "stringData"} {
		e, err := stream.Get(obj, field)
		if err != nil {
			return keyError(&document{Document: d}, err, w.object())
		}
		dup := map[string]bool{}
		s.each(e.Value, func(k string, v *yaml.Node) {
			v = stream.Deref(v)
			var b []byte
			switch {
			case v == nil || v.Kind != yaml.ScalarNode || v.Tag != "!!str":
				h := s.hash(v, false)
				b = append([]byte("node\x00"), h[:]...)
			case field == "data":
				dec, err := base64.StdEncoding.DecodeString(strings.NewReplacer("\r", "", "\n", "").Replace(v.Value))
				if err != nil {
					dec = append([]byte("undecodable\x00"), v.Value...)
				} else {
					dec = append([]byte("bytes\x00"), dec...)
				}
				b = dec
			default:
				b = append([]byte("bytes\x00"), v.Value...)
			}
			if dup[k] {
				// Written twice in one field: every value counts, so
				// that no change hides behind the other.
				b = append(append(values[k], 0), b...)
			}
			dup[k] = true
			if _, ok := values[k]; !ok {
				o.order = append(o.order, plain(k))
			}
			values[k] = b
		})
	}
	for k, b := range values {
		o.parts[plain(k)] = sha256.Sum256(b)
		clear(b)
	}
	s.snap.secrets = append(s.snap.secrets, o)
	return nil
}

// each calls fn with each key of mapping m (aliases followed) and its
// value, in order, a key decoded as stream.DecodedKey decodes it; merge
// keys are spelt "<<". A nil or non-mapping m holds nothing. It spends
// the entries, and calls fn with none when too few are left.
func (s *snapshotter) each(m *yaml.Node, fn func(k string, v *yaml.Node)) {
	m = stream.Deref(m)
	if m == nil || m.Kind != yaml.MappingNode || !s.bound.spend(len(m.Content)/2) {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := stream.Deref(m.Content[i])
		if k == nil || k.Kind != yaml.ScalarNode {
			fn("?", m.Content[i+1])
			continue
		}
		fn(stream.DecodedKey(k), m.Content[i+1])
	}
}

// pinnedDigest is a digest that follows a reference, as digestpin pins it
// into image fields and into the arguments and variables its image paths
// name (ContainerImagePaths).
var pinnedDigest = regexp.MustCompile(`@sha(256:[0-9a-f]{64}|384:[0-9a-f]{96}|512:[0-9a-f]{128})`)

// hashKey is a node and whether pinned digests count in its hash.
type hashKey struct {
	n      *yaml.Node
	pinned bool
}

// hash returns the hash of node n in a canonical form, in which neither
// the order of a mapping's keys, nor a scalar's quoting style, nor
// aliases count, nor, where pinned, the digests digestpin pins
// (pinnedDigest). Each node is hashed once per document: aliases cannot
// make it exponential.
func (s *snapshotter) hash(n *yaml.Node, pinned bool) [sha256.Size]byte {
	n = stream.Deref(n)
	if n == nil {
		return sha256.Sum256([]byte("nil"))
	}
	k := hashKey{n, pinned}
	if h, ok := s.hashes[k]; ok {
		return h
	}
	s.hashes[k] = sha256.Sum256([]byte("cycle")) // checkAliases refused cycles; this bounds them anyway
	var b []byte
	switch n.Kind {
	case yaml.ScalarNode:
		b = append(b, "scalar\x00"...)
		b = append(b, scalarText(n, pinned)...)
	case yaml.SequenceNode:
		b = append(b, "seq\x00"...)
		for _, c := range n.Content {
			h := s.hash(c, pinned)
			b = append(b, h[:]...)
		}
	case yaml.MappingNode:
		type kv struct{ k, v [sha256.Size]byte }
		pairs := make([]kv, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			pairs = append(pairs, kv{s.hash(n.Content[i], false), s.hash(n.Content[i+1], pinned)})
		}
		slices.SortFunc(pairs, func(a, b kv) int { return bytes.Compare(a.k[:], b.k[:]) })
		b = append(b, "map\x00"...)
		for _, p := range pairs {
			b = append(append(b, p.k[:]...), p.v[:]...)
		}
	default:
		b = append(b, "other\x00"...)
	}
	h := sha256.Sum256(b)
	s.hashes[k] = h
	return h
}

// scalarText is a scalar's canonical text: its resolved tag and value,
// nulls and booleans in one spelling, a string without pinned digests
// where pinned.
func scalarText(n *yaml.Node, pinned bool) string {
	tag := n.ShortTag()
	switch tag {
	case "!!null":
		return tag
	case "!!bool":
		return tag + "\x00" + strings.ToLower(n.Value)
	case "!!str":
		if !pinned || !strings.Contains(n.Value, "@sha") {
			return tag + "\x00" + n.Value
		}
		return tag + "\x00" + pinnedDigest.ReplaceAllString(n.Value, "")
	}
	return tag + "\x00" + n.Value
}

// plain is name as a path shows it: as it is, or quoted when it holds
// anything but letters, digits, '-', '_', '.' and '/' (a line break, a
// space, markup).
func plain(name string) string {
	isPlain := func(c rune) bool {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '/' || c == '-'
	}
	if name != "" && !strings.ContainsFunc(name, func(c rune) bool { return !isPlain(c) }) {
		return name
	}
	return strconv.Quote(name)
}

// Compare returns the pod templates and the Secrets that differ from
// before to now, each in the order now has them, then those only before
// has. Objects are matched by kind, namespace and name (and, for a pod
// template, its place in the object), the n-th of a key repeated in a
// stream with the n-th. A nil Snapshot has no object.
func Compare(before, now *Snapshot) ([]TemplateChange, []SecretChange) {
	if before == nil {
		before = &Snapshot{}
	}
	if now == nil {
		now = &Snapshot{}
	}
	var templates []TemplateChange
	diff(before.templates, now.templates, func(b, n *snapObject, change string) {
		o := n
		if o == nil {
			o = b
		}
		tc := TemplateChange{Kind: o.key.kind, Namespace: o.key.namespace, Name: o.key.name, Template: o.key.path, Change: change}
		if b != nil && n != nil {
			changed, added, removed := diffParts(b, n)
			tc.Fields = slices.Concat(changed, whole(added, n, b), whole(removed, b, n))
			pos := positions(n, b)
			slices.SortStableFunc(tc.Fields, func(x, y string) int { return pos[x] - pos[y] })
		}
		templates = append(templates, tc)
	})
	var secrets []SecretChange
	diff(before.secrets, now.secrets, func(b, n *snapObject, change string) {
		o := n
		if o == nil {
			o = b
		}
		sc := SecretChange{Namespace: o.key.namespace, Name: o.key.name, Change: change}
		switch {
		case b == nil:
			sc.Added = slices.Clone(n.order)
		case n == nil:
			sc.Removed = slices.Clone(b.order)
		default:
			sc.Changed, sc.Added, sc.Removed = diffParts(b, n)
		}
		secrets = append(secrets, sc)
	})
	return templates, secrets
}

// whole returns paths, parts of o that other lacks, with the parts of a
// container that other lacks entirely named once, by the container.
func whole(paths []string, o, other *snapObject) []string {
	has := map[string]bool{}
	for _, g := range other.groups {
		has[g] = true
	}
	var out []string
	done := map[string]bool{}
	for _, p := range paths {
		g, ok := o.groups[p]
		switch {
		case !ok || has[g]:
			out = append(out, p)
		case !done[g]:
			done[g] = true
			out = append(out, g)
		}
	}
	return out
}

// positions returns the place of each path and container of now, then
// of before's that now lacks, to sort the paths of a TemplateChange.
func positions(now, before *snapObject) map[string]int {
	pos := map[string]int{}
	for _, o := range []*snapObject{now, before} {
		for _, p := range o.order {
			for _, k := range []string{o.groups[p], p} {
				if _, ok := pos[k]; !ok && k != "" {
					pos[k] = len(pos)
				}
			}
		}
	}
	return pos
}

// diff calls fn with each object of now that differs from its match in
// before (ChangeChanged) or has none (ChangeAdded, b nil), then each
// object of before that now lacks (ChangeRemoved, n nil).
func diff(before, now []snapObject, fn func(b, n *snapObject, change string)) {
	at := make(map[snapKey]int, len(before))
	for i, o := range before {
		at[o.key] = i
	}
	matched := make([]bool, len(before))
	for i := range now {
		n := &now[i]
		j, ok := at[n.key]
		if !ok {
			fn(nil, n, ChangeAdded)
			continue
		}
		matched[j] = true
		if b := &before[j]; !sameParts(b, n) {
			fn(b, n, ChangeChanged)
		}
	}
	for j := range before {
		if !matched[j] {
			fn(&before[j], nil, ChangeRemoved)
		}
	}
}

// sameParts reports whether a and b have the same parts and hashes.
func sameParts(a, b *snapObject) bool {
	if len(a.parts) != len(b.parts) {
		return false
	}
	for p, h := range a.parts {
		if g, ok := b.parts[p]; !ok || g != h {
			return false
		}
	}
	return true
}

// diffParts returns the parts of now whose hash differs from before's,
// those before lacks and those now lacks, each in the order of its
// object.
func diffParts(before, now *snapObject) (changed, added, removed []string) {
	for _, p := range now.order {
		switch h, ok := before.parts[p]; {
		case !ok:
			added = append(added, p)
		case h != now.parts[p]:
			changed = append(changed, p)
		}
	}
	for _, p := range before.order {
		if _, ok := now.parts[p]; !ok {
			removed = append(removed, p)
		}
	}
	return changed, added, removed
}
