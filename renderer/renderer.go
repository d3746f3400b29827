package renderer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// DefaultChecksumAnnotation is the pod-template annotation that holds the
// checksum of the template's pinned images, after Helm's checksum/config
// idiom.
const DefaultChecksumAnnotation = "checksum/images"

// Resolver turns an image reference into the digest its registry serves for
// it now. The renderer calls Resolve concurrently, once for each distinct
// reference without a digest, so implementations must be safe for
// concurrent use and should bound their own concurrency. An error names the
// reference (as os.Open names its file): the renderer adds only where the
// image is used.
type Resolver interface {
	Resolve(ctx context.Context, ref name.Reference) (v1.Hash, error)
}

// SourcedResolver is a Resolver that also says where each digest came from
// ("registry", "lock", "cache", …). When the Renderer's Resolver implements
// it, Render calls ResolveSource instead of Resolve and records the source
// in Image.Source; otherwise the source is SourceResolver. The same
// concurrency rules apply.
type SourcedResolver interface {
	Resolver
	ResolveSource(ctx context.Context, ref name.Reference) (v1.Hash, string, error)
}

// Renderer pins the images of a manifest stream. Its fields are read-only
// during Render, so one Renderer may serve concurrent calls.
type Renderer struct {
	// Resolver resolves references without a digest. It may be nil when
	// every image already carries a digest.
	Resolver Resolver
	// Mode is the form images are written in; "" means ModePin.
	Mode Mode
	// ChecksumAnnotation names the pod-template annotation; "" means
	// DefaultChecksumAnnotation.
	ChecksumAnnotation string
	// PodSpecPaths says where each kind keeps its pod specs; nil means
	// DefaultPodSpecPaths. The first entry that matches a kind wins.
	PodSpecPaths []PodSpecPath
	// KeepUnresolved keeps an image that cannot be resolved as it is,
	// with a warning, instead of failing the render.
	KeepUnresolved bool
	// Warnf receives warnings; nil discards them.
	Warnf func(format string, args ...any)
}

// Source says where an image's digest came from.
type Source string

// The sources of an Image's digest.
const (
	SourceResolver Source = "resolver"
	SourcePinned   Source = "pinned"
	SourceNone     Source = "unresolved"
)

// Workload is one container that uses an image.
type Workload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Container string `json:"container"`
}

// Image is one distinct image reference of a stream.
type Image struct {
	// Reference is the fully qualified reference, e.g.
	// "index.docker.io/library/nginx:1.27".
	Reference string
	// Written is the reference as the stream first spells it, e.g.
	// "nginx:1.27".
	Written string
	// Digest is the resolved digest, or "" when it could not be resolved.
	Digest string
	// Source says where Digest came from.
	Source Source
	// Err is why the image could not be resolved, when KeepUnresolved
	// kept it.
	Err error
	// Workloads are the containers that use the image, in stream order.
	Workloads []Workload
}

// Result is the outcome of a Render.
type Result struct {
	// Output is the rewritten stream.
	Output []byte
	// Images lists every distinct image, sorted by Reference.
	Images []Image
}

// use is one image field found in a document.
type use struct {
	image    string // as written
	ref      name.Reference
	workload Workload
	where    string
}

// Render rewrites the stream in. On error the Result is empty: no partial
// output is ever returned.
func (r *Renderer) Render(ctx context.Context, in []byte) (Result, error) {
	docs := splitStream(in)
	out := make([][]byte, len(docs))

	// First, walk every document and collect its images. A document whose
	// images all carry digests is final already; the others wait for the
	// resolver. Every reference is validated before any network call.
	// Documents are independent, so they are parsed on every core; the
	// results are merged in stream order.
	uses := make([][]use, len(docs))
	docErrs := make([]error, len(docs))
	eachDoc(len(docs), func(i int) {
		out[i], docErrs[i] = r.edit(docs[i], func(u use) (string, bool) {
			uses[i] = append(uses[i], u)
			if dg, ok := u.ref.(name.Digest); ok {
				return dg.DigestStr(), true
			}
			return "", false
		})
	})
	pending := map[string][]use{} // by ref.Name()
	var order []string
	var errs []error
	var waiting []int
	for i, b := range out {
		if docErrs[i] != nil {
			errs = append(errs, docErrs[i])
			continue
		}
		for _, u := range uses[i] {
			k := u.ref.Name()
			if _, seen := pending[k]; !seen {
				order = append(order, k)
			}
			pending[k] = append(pending[k], u)
		}
		if b == nil {
			waiting = append(waiting, i)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}

	// Next, resolve the distinct references without a digest concurrently.
	// Results land in a slice by index; no goroutine touches a node.
	images := make([]Image, len(order))
	var wg sync.WaitGroup
	for i, k := range order {
		u := pending[k][0]
		images[i] = Image{Reference: k, Written: u.image}
		if d, ok := u.ref.(name.Digest); ok {
			images[i].Digest, images[i].Source = d.DigestStr(), SourcePinned
			continue
		}
		if r.Resolver == nil {
			images[i].Source, images[i].Err = SourceNone, errors.New("no resolver")
			continue
		}
		wg.Go(func() {
			h, src, err := resolveSource(ctx, r.Resolver, u.ref)
			if err != nil {
				images[i].Source, images[i].Err = SourceNone, err
				return
			}
			images[i].Digest, images[i].Source = h.String(), src
		})
	}
	wg.Wait()
	digests := make(map[string]string, len(order))
	for i, k := range order {
		for _, u := range pending[k] {
			images[i].Workloads = append(images[i].Workloads, u.workload)
		}
		if err := images[i].Err; err != nil {
			u := pending[k][0]
			// The resolver names the reference, as the callee does in Go.
			err = fmt.Errorf("%s: %s: %w", u.where, u.workload, err)
			if !r.KeepUnresolved {
				errs = append(errs, err)
				continue
			}
			r.warnf("keeping %s unpinned: %v", u.image, err)
		}
		digests[k] = images[i].Digest
	}
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}

	// Finally, rewrite the documents that waited for the resolver, parsing
	// each again rather than holding every parsed document in memory.
	eachDoc(len(waiting), func(j int) {
		i := waiting[j]
		out[i], docErrs[i] = r.edit(docs[i], func(u use) (string, bool) {
			return digests[u.ref.Name()], true
		})
	})
	for _, i := range waiting {
		if docErrs[i] != nil {
			return Result{}, docErrs[i]
		}
	}
	sort.Slice(images, func(a, b int) bool { return images[a].Reference < images[b].Reference })
	return Result{Output: bytes.Join(out, nil), Images: images}, nil
}

// eachDoc calls fn(i) for every i in [0, n) on GOMAXPROCS goroutines. fn
// must touch only what belongs to index i.
func eachDoc(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// resolveSource asks res, and where the digest came from when res says.
func resolveSource(ctx context.Context, res Resolver, ref name.Reference) (v1.Hash, Source, error) {
	if sr, ok := res.(SourcedResolver); ok {
		h, src, err := sr.ResolveSource(ctx, ref)
		return h, Source(src), err
	}
	h, err := res.Resolve(ctx, ref)
	return h, SourceResolver, err
}

// String formats a workload as "Deployment/ns/web container app".
func (w Workload) String() string {
	obj := w.Kind + "/" + w.Name
	if w.Namespace != "" {
		obj = w.Kind + "/" + w.Namespace + "/" + w.Name
	}
	return fmt.Sprintf("%s container %q", obj, w.Container)
}

func (r *Renderer) warnf(format string, args ...any) {
	if r.Warnf != nil {
		r.Warnf(format, args...)
	}
}

func (r *Renderer) mode() Mode {
	if r.Mode == "" {
		return ModePin
	}
	return r.Mode
}

func (r *Renderer) annotation() string {
	if r.ChecksumAnnotation == "" {
		return DefaultChecksumAnnotation
	}
	return r.ChecksumAnnotation
}

func (r *Renderer) paths() []PodSpecPath {
	if r.PodSpecPaths == nil {
		return DefaultPodSpecPaths
	}
	return r.PodSpecPaths
}

// imageKey is the cheap test for a document that may hold an image field:
// one without the word cannot, and is never parsed.
var imageKey = []byte("image")

// edit parses document d and rewrites its image fields and checksums. It
// calls digest for each image field; digest returns the digest to pin to
// ("" to keep the image as written) and false when it is not known yet.
// edit returns the document's new bytes (its raw bytes when nothing
// changed), or nil when a digest is not known yet.
func (r *Renderer) edit(d *document, digest func(use) (string, bool)) ([]byte, error) {
	if !bytes.Contains(d.body(), imageKey) {
		return d.raw, nil
	}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(d.body())).Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return d.raw, nil // only comments
		}
		return nil, yamlError(d, err)
	}
	obj := deref(rootContent(&root))
	if obj == nil || (obj.Kind == yaml.ScalarNode && obj.Tag == "!!null") {
		return d.raw, nil
	}
	if obj.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a Kubernetes object (a mapping), found %s", d.at(obj.Line), kindName(obj))
	}
	e := editor{r: r, d: d, digest: digest, complete: true}
	if err := e.object(obj, 0); err != nil {
		return nil, err
	}
	switch {
	case !e.complete:
		return nil, nil
	case len(e.images) == 0 && len(e.annotations) == 0:
		return d.raw, nil
	}
	// Splice the new values into the document's own bytes, which keeps
	// every other byte as it was and costs no encoding. Where the syntax is
	// too unusual for that (flow style, block scalars, anchors), change the
	// nodes and encode the document instead.
	if b, ok := splice(d, e.images, e.annotations, e.r.annotation()); ok {
		return b, nil
	}
	for _, c := range e.images {
		c.node.Value = c.value
	}
	for _, a := range e.annotations {
		setAnnotation(a.holder, e.r.annotation(), a.value)
	}
	return encode(d, &root)
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
	seen        map[*yaml.Node]bool // image nodes with a change, once each
}

// imageChange sets an image scalar to a new value.
type imageChange struct {
	node  *yaml.Node
	value string
}

// annotationChange sets the checksum annotation of a pod template.
type annotationChange struct {
	holder *yaml.Node // the template: the mapping with metadata and spec
	value  string
}

// object edits a Kubernetes object, or the items of a List.
func (e *editor) object(obj *yaml.Node, depth int) error {
	kind := scalar(lookup(obj, "kind"))
	if items := lookup(obj, "items"); strings.HasSuffix(kind, "List") && items != nil && items.Kind == yaml.SequenceNode {
		if depth >= maxListDepth {
			return fmt.Errorf("%s: List objects nested more than %d deep", e.d.at(obj.Line), maxListDepth)
		}
		for _, item := range items.Content {
			if item = deref(item); item.Kind == yaml.MappingNode {
				if err := e.object(item, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	meta := lookup(obj, "metadata")
	w := Workload{Kind: kind, Namespace: scalar(lookup(meta, "namespace")), Name: scalar(lookup(meta, "name"))}
	for _, t := range findPodTemplates(obj, e.r.paths()) {
		if err := e.template(t, w); err != nil {
			return err
		}
	}
	return nil
}

// template pins the images of one pod template and sets its checksum.
func (e *editor) template(t podTemplate, w Workload) error {
	var lines []string
	for _, field := range containerFields {
		list := lookup(t.spec, field)
		if list == nil || list.Kind != yaml.SequenceNode {
			continue
		}
		for _, c := range list.Content {
			w.Container = scalar(lookup(c, "name"))
			img := lookup(c, "image")
			if img == nil {
				continue // no image: nothing to pin
			}
			where := e.d.at(img.Line)
			if img.Kind != yaml.ScalarNode || img.Tag != "!!str" || strings.TrimSpace(img.Value) == "" {
				return fmt.Errorf("%s: %s: image is %s, want a reference such as registry/name:tag", where, w, describe(img))
			}
			ref, err := name.ParseReference(img.Value)
			if err != nil {
				return fmt.Errorf("%s: %s: parsing image %q: %w", where, w, img.Value, err)
			}
			dg, ok := e.digest(use{image: img.Value, ref: ref, workload: w, where: where})
			if !ok {
				e.complete = false
				continue
			}
			value := img.Value
			if dg != "" {
				value = pinnedForm(img.Value, dg, e.r.mode())
				if e.r.mode() != ModeAnnotate && value != img.Value && !e.seen[img] {
					// An alias names the same node twice: change it once.
					if e.seen == nil {
						e.seen = map[*yaml.Node]bool{}
					}
					e.seen[img] = true
					e.images = append(e.images, imageChange{node: img, value: value})
				}
			}
			lines = append(lines, w.Container+"="+value)
		}
	}
	if t.holder == nil || len(lines) == 0 || !e.complete {
		return nil
	}
	sum := Checksum(lines)
	if scalar(lookup(lookup(lookup(t.holder, "metadata"), "annotations"), e.r.annotation())) == sum {
		return nil
	}
	e.annotations = append(e.annotations, annotationChange{holder: t.holder, value: sum})
	return nil
}

// setAnnotation sets metadata.annotations[key] of a pod template to a
// single-quoted value, the way kyaml's AnnotationSetter writes it (tools
// then never mistake the checksum for a number). Unlike AnnotationSetter,
// it puts a missing metadata just before the spec, where people expect it,
// instead of after it.
func setAnnotation(holder *yaml.Node, key, value string) {
	meta := lookup(holder, "metadata")
	switch {
	case meta != nil && meta.Kind != yaml.MappingNode:
		// "metadata:" with no value, or something odd: replace it.
		meta = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		setField(holder, "metadata", meta)
	case meta == nil:
		at := len(holder.Content)
		for i := 0; i+1 < len(holder.Content); i += 2 {
			if holder.Content[i].Value == "spec" {
				at = i
				break
			}
		}
		meta = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		holder.Content = slices.Insert(holder.Content, at, newScalar("metadata"), meta)
	}
	annotations := lookup(meta, "annotations")
	if annotations == nil || annotations.Kind != yaml.MappingNode {
		annotations = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		setField(meta, "annotations", annotations)
	}
	v := newScalar(value)
	v.Style = yaml.SingleQuotedStyle
	setField(annotations, key, v)
	// An empty flow mapping ("metadata: {}") would keep the annotation on
	// one line; a block mapping reads as usual.
	for _, m := range []*yaml.Node{meta, annotations} {
		if len(m.Content) == 2 {
			m.Style &^= yaml.FlowStyle
		}
	}
}

// setField sets key in mapping m to v, replacing its value or appending it.
func setField(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, newScalar(key), v)
}

func newScalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// Checksum returns the hex SHA-256 of a pod template's images, given as
// "container=reference" lines: the lines are sorted and each ends in a
// newline, so the checksum depends on nothing but the set of lines.
func Checksum(lines []string) string {
	lines = slices.Clone(lines)
	slices.Sort(lines)
	h := sha256.New()
	for _, l := range lines {
		io.WriteString(h, l+"\n")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// rootContent returns the top node of a parsed document.
func rootContent(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		return doc.Content[0]
	}
	return doc
}

// encode writes a changed document back: its "---" line as it was, then the
// re-encoded body in the sequence indentation the document used.
func encode(d *document, root *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(d.raw) + 256)
	buf.Write(d.raw[:d.head])
	style := yaml.SequenceIndentStyle(yaml.DeriveSeqIndentStyle(string(d.body())))
	enc := yaml.NewEncoderWithOptions(&buf, &yaml.EncoderOptions{SeqIndent: style})
	if err := enc.Encode(root); err != nil {
		return nil, fmt.Errorf("%s: encoding: %w", d.where(), err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("%s: encoding: %w", d.where(), err)
	}
	// Keep an explicit end marker: the next document may rely on it.
	if body := bytes.TrimRight(d.body(), " \t\r\n"); bytes.HasSuffix(body, []byte("\n...")) || bytes.Equal(body, []byte("...")) {
		buf.WriteString("...\n")
	}
	return buf.Bytes(), nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError rewrites a parser error to name the stream line.
func yamlError(d *document, err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return fmt.Errorf("%s: malformed YAML: %s", d.at(n), m[2])
	}
	return fmt.Errorf("%s: malformed YAML: %s", d.where(), strings.TrimPrefix(err.Error(), "yaml: "))
}

// kindName names a node's kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		return "a scalar"
	}
	return "a mapping"
}

// describe names what an image field holds, for messages.
func describe(n *yaml.Node) string {
	switch {
	case n.Kind != yaml.ScalarNode:
		return kindName(n)
	case n.Tag == "!!null" || strings.TrimSpace(n.Value) == "":
		return "empty"
	}
	return fmt.Sprintf("%s %s", strings.TrimPrefix(n.Tag, "!!"), n.Value)
}
