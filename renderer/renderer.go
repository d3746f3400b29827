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
	"unicode"
	"unicode/utf8"

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
	// DefaultPodSpecPaths. Every entry that matches a kind is followed.
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
	// A stream in UTF-16 or UTF-32 hides its "---" lines and image fields
	// from the byte-level scan: refuse it rather than pass it through
	// unpinned.
	if enc := wideEncoding(in); enc != "" {
		return Result{}, fmt.Errorf("document 1, line 1: the stream is %s; digestpin reads UTF-8 only", enc)
	}
	docs := splitStream(in)
	out := make([][]byte, len(docs))

	// First, walk every document and collect its images. A document whose
	// images all carry digests is final already; the others wait for the
	// resolver. Every reference is validated before any network call.
	// Documents are independent, so they are parsed on every core; the
	// results are merged in stream order.
	// The parse of a document that waits is kept for the last phase while
	// the kept documents are small (a chart's worth); beyond that they are
	// parsed again, so that memory does not grow with a node tree for
	// every document of a huge stream.
	uses := make([][]use, len(docs))
	docErrs := make([]error, len(docs))
	kept := make([]*parsed, len(docs))
	var keptBytes, keptNodes atomic.Int64
	budget := newNodeBudget(MaxNodes)
	err := eachDoc(ctx, len(docs), func(i int) {
		defer budget.give(budget.takeFor(docs[i]))
		p, err := r.parse(docs[i])
		if p == nil || err != nil {
			out[i], docErrs[i] = docs[i].raw, err
			return
		}
		out[i], docErrs[i] = r.rewrite(docs[i], p, func(u use) (string, bool) {
			uses[i] = append(uses[i], u)
			if dg, ok := u.ref.(name.Digest); ok {
				return dg.DigestStr(), true
			}
			return "", false
		})
		if out[i] == nil && docErrs[i] == nil && keptBytes.Add(int64(len(docs[i].raw))) <= maxKeptBytes &&
			keptNodes.Add(int64(docs[i].estimate())) <= maxKeptNodes {
			kept[i] = p
		}
	})
	if err != nil {
		return Result{}, err
	}
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
			if err == nil {
				// What goes into the manifest must be a digest, whatever
				// the resolver (or the registry behind it) says.
				_, err = v1.NewHash(h.String())
				if err != nil {
					err = fmt.Errorf("resolving %s: resolver gave an invalid digest: %w", u.ref, err)
				}
			}
			if err != nil {
				images[i].Source, images[i].Err = SourceNone, err
				return
			}
			images[i].Digest, images[i].Source = h.String(), src
		})
	}
	wg.Wait()
	// A resolver stopped by ctx fails every image; with KeepUnresolved
	// that would write the stream unpinned.
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("resolving %d images: %w", len(order), context.Cause(ctx))
	}
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

	// Finally, rewrite the documents that waited for the resolver.
	err = eachDoc(ctx, len(waiting), func(j int) {
		i := waiting[j]
		if kept[i] == nil {
			defer budget.give(budget.takeFor(docs[i]))
		}
		known := func(u use) (string, bool) { return digests[u.ref.Name()], true }
		if kept[i] != nil {
			out[i], docErrs[i] = r.rewrite(docs[i], kept[i], known)
			kept[i] = nil
			return
		}
		out[i], docErrs[i] = r.edit(docs[i], known)
	})
	if err != nil {
		return Result{}, err
	}
	for _, i := range waiting {
		if docErrs[i] != nil {
			return Result{}, docErrs[i]
		}
	}
	sort.Slice(images, func(a, b int) bool { return images[a].Reference < images[b].Reference })
	return Result{Output: bytes.Join(out, nil), Images: images}, nil
}

// wideEncoding names the encoding of a stream in UTF-16 or UTF-32, told
// by its byte order mark or, as YAML does without one, by the zero bytes
// of its first ASCII character; it returns "" for UTF-8.
func wideEncoding(in []byte) string {
	switch {
	case bytes.HasPrefix(in, []byte{0, 0, 0xfe, 0xff}), bytes.HasPrefix(in, []byte{0xff, 0xfe, 0, 0}),
		len(in) >= 4 && in[0] == 0 && in[1] == 0 && in[2] == 0, len(in) >= 4 && in[1] == 0 && in[2] == 0 && in[3] == 0:
		return "UTF-32"
	case bytes.HasPrefix(in, []byte{0xfe, 0xff}), bytes.HasPrefix(in, []byte{0xff, 0xfe}),
		len(in) >= 2 && (in[0] == 0) != (in[1] == 0):
		return "UTF-16"
	}
	return ""
}

// eachDoc calls fn(i) for every i in [0, n) on GOMAXPROCS goroutines. fn
// must touch only what belongs to index i. It checks ctx before each
// batch of documents, and returns its error (wrapped) when ctx is done;
// some documents are then left undone.
func eachDoc(ctx context.Context, n int, fn func(i int)) error {
	// Workers take batches of documents: most documents cost next to
	// nothing, and one shared counter (or ctx check) per document would
	// cost more.
	const batch = 32
	var next atomic.Int64
	var stopped atomic.Bool
	work := func() {
		for !stopped.Load() {
			start := int(next.Add(batch) - batch)
			if start >= n {
				return
			}
			if ctx.Err() != nil {
				stopped.Store(true)
				return
			}
			for i := start; i < min(start+batch, n); i++ {
				fn(i)
			}
		}
	}
	if workers := min(runtime.GOMAXPROCS(0), n); workers <= 1 {
		work()
	} else {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(work)
		}
		wg.Wait()
	}
	if stopped.Load() {
		return fmt.Errorf("rendering %d documents: %w", n, context.Cause(ctx))
	}
	return nil
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
	return fmt.Sprintf("%s container %q", w.object(), w.Container)
}

// object formats the workload's object as "Deployment/ns/web".
func (w Workload) object() string {
	if w.Namespace != "" {
		return w.Kind + "/" + w.Namespace + "/" + w.Name
	}
	return w.Kind + "/" + w.Name
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
// one without the word cannot, and is never parsed, unless it holds a
// backslash (a double-quoted key may spell the word with escapes:
// "\x69mage") or a tag that could be !!binary (a key "!!binary aW1hZ2U="
// decodes to "image"; a tag is written "!!…", "!<…>", or with a handle
// that a %TAG directive names). An alias key names a node that spells
// the word in one of these ways.
var imageKey = []byte("image")

// mayHoldImage reports whether a document body may hold an image field.
func mayHoldImage(body []byte) bool {
	return bytes.Contains(body, imageKey) || bytes.IndexByte(body, '\\') >= 0 ||
		bytes.Contains(body, []byte("!!")) || bytes.Contains(body, []byte("!<")) || bytes.Contains(body, []byte("%TAG"))
}

// edit parses document d and rewrites its image fields and checksums. It
// calls digest for each image field; digest returns the digest to pin to
// ("" to keep the image as written) and false when it is not known yet.
// edit returns the document's new bytes (its raw bytes when nothing
// changed), or nil when a digest is not known yet.
func (r *Renderer) edit(d *document, digest func(use) (string, bool)) ([]byte, error) {
	p, err := r.parse(d)
	if p == nil || err != nil {
		return d.raw, err
	}
	return r.rewrite(d, p, digest)
}

// parsed is a parsed document that may hold images.
type parsed struct {
	root    yaml.Node
	obj     *yaml.Node                  // the object: a mapping
	crlf    bool                        // the document's line breaks are CRLF
	aliases map[*yaml.Node][]*yaml.Node // anchored node → its aliases; nil: none
}

// parse parses document d. It returns nil and no error for a document
// that cannot hold an image field: no "image" in it, only comments, null.
func (r *Renderer) parse(d *document) (*parsed, error) {
	if !mayHoldImage(d.body()) {
		return nil, nil
	}
	// Refuse a document whose tree could take more memory than a Render
	// may, before the parser builds it.
	if n := d.estimate(); n > MaxNodes {
		return nil, fmt.Errorf("%s: the document may hold up to %d YAML nodes (estimated from its %d bytes), more than digestpin parses in one document (MaxNodes %d)", d.where(), n, len(d.body()), MaxNodes)
	}
	// CRLF line breaks are parsed as LF, so that comments carry no CR
	// into a re-encoded document; lines and columns stay the same.
	body, crlf := d.body(), bytes.Contains(d.body(), []byte("\r\n"))
	if crlf {
		body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	}
	p := &parsed{crlf: crlf}
	dec := yaml.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&p.root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // only comments
		}
		return nil, yamlError(d, err)
	}
	// The stream was split at "---" lines ending in LF; a parser that
	// finds a second document in this one (after a "---" between lone CR
	// or Unicode line breaks) would see images that the split did not.
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, fmt.Errorf("%s: a second YAML document starts here: digestpin splits documents at \"---\" lines ending in LF or CRLF", d.at(next.Line))
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlError(d, err)
	}
	// Refuse aliases that would never end or cost more than the document.
	aliases, line, err := checkAliases(&p.root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.at(line), err)
	}
	p.aliases = aliases
	p.obj = deref(rootContent(&p.root))
	if p.obj == nil || (p.obj.Kind == yaml.ScalarNode && p.obj.Tag == "!!null") {
		return nil, nil
	}
	if p.obj.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: want a Kubernetes object (a mapping), found %s", d.at(p.obj.Line), kindName(p.obj))
	}
	return p, nil
}

// rewrite rewrites the image fields and checksums of parsed document p, as
// edit does. When a digest is not known yet it returns nil and leaves p as
// it was, so that p can be rewritten again later.
func (r *Renderer) rewrite(d *document, p *parsed, digest func(use) (string, bool)) ([]byte, error) {
	e := editor{r: r, d: d, digest: digest, complete: true, routes: newRoutes(p.aliases)}
	e.routes.step(p.obj)
	if err := e.object(p.obj, 0); err != nil {
		return nil, err
	}
	e.writeOutAliases()
	switch {
	case !e.complete:
		return nil, nil
	case len(e.images) == 0 && len(e.annotations) == 0:
		return d.raw, nil
	}
	if err := e.routes.check(d, e.changed()); err != nil {
		return nil, err
	}
	// Splice the new values into the document's own bytes, which keeps
	// every other byte as it was and costs no encoding. Where the syntax is
	// too unusual for that (flow style, block scalars, anchors), change the
	// nodes and encode the document instead.
	if b, ok := splice(d, e.images, e.annotations, e.r.annotation()); ok {
		return b, nil
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
	return encode(d, &p.root, p.crlf)
}

// maxKeptBytes and maxKeptNodes bound the documents (in input bytes and
// estimated nodes) whose parse is kept between the first and the last
// phase of a Render: a parsed document takes some 30 times its size in
// block style, and more in flow style.
const (
	maxKeptBytes = 1 << 20
	maxKeptNodes = MaxNodes / 4
)

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
	kind, _, err := str(obj, "kind")
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
	apiVersion, _, err := str(obj, "apiVersion")
	if err != nil {
		return e.keyError(err, kind)
	}
	w := Workload{Kind: kind}
	meta, err := get(obj, "metadata")
	if err == nil {
		w.Name, _, err = str(meta.value, "name")
	}
	if err == nil {
		w.Namespace, _, err = str(meta.value, "namespace")
	}
	if err != nil {
		return e.keyError(err, kind)
	}
	templates, err := findPodTemplates(obj, apiGroup(apiVersion), kind, e.r.paths(), e.routes.step)
	if err != nil {
		return e.keyError(err, w.object())
	}
	for _, t := range templates {
		if err := e.template(t, w); err != nil {
			return err
		}
	}
	return nil
}

// keyError turns an error of get into a document error: where, then who
// (an object or a container, when known), then what.
func (e *editor) keyError(err error, who string) error {
	var ke *keyError
	if !errors.As(err, &ke) {
		return err
	}
	if who == "" {
		return fmt.Errorf("%s: %w", e.d.at(ke.line), err)
	}
	return fmt.Errorf("%s: %s: %w", e.d.at(ke.line), who, err)
}

// template pins the images of one pod template and sets its checksum.
func (e *editor) template(t podTemplate, w Workload) error {
	lines, done := e.specLines[t.spec]
	if done {
		// A pod spec shared through an alias is edited once, but each
		// workload that shares it uses its images.
		for _, u := range e.specUses[t.spec] {
			u.workload.Kind, u.workload.Namespace, u.workload.Name = w.Kind, w.Namespace, w.Name
			if _, ok := e.digest(u); !ok {
				e.complete = false
			}
		}
	}
	for _, field := range containerFields {
		if done {
			break // a pod spec shared through an alias: edited already
		}
		list, err := get(t.spec, field)
		if err != nil {
			return e.keyError(err, w.object())
		}
		if list.value == nil || list.value.Kind != yaml.SequenceNode {
			continue
		}
		e.routes.steps(list.via)
		for i, c := range list.value.Content {
			e.routes.step(c)
			// YAML decoders disagree on which of two equal keys wins:
			// pinning one could leave the other in force. get refuses
			// what the API server could read otherwise.
			w.Container, _, err = str(c, "name")
			if err != nil {
				return e.keyError(err, fmt.Sprintf("%s %s[%d]", w.object(), field, i))
			}
			image, err := get(c, "image")
			if err != nil {
				return e.keyError(err, w.String())
			}
			img := image.value
			if img == nil {
				continue // no image: nothing to pin
			}
			where := e.d.at(img.Line)
			if img.Kind != yaml.ScalarNode || img.Tag != "!!str" || strings.TrimSpace(img.Value) == "" {
				return fmt.Errorf("%s: %s: image is %s, want a reference such as registry/name:tag", where, w, describe(img))
			}
			if strings.ContainsFunc(img.Value, unicode.IsControl) {
				// go-containerregistry's error would repeat it raw.
				return fmt.Errorf("%s: %s: image %q holds a control character, want a reference such as registry/name:tag", where, w, img.Value)
			}
			ref, err := name.ParseReference(img.Value)
			if err != nil {
				return fmt.Errorf("%s: %s: parsing image %q: %w", where, w, img.Value, err)
			}
			u := use{image: img.Value, ref: ref, workload: w, where: where}
			if e.specUses == nil {
				e.specUses = map[*yaml.Node][]use{}
			}
			e.specUses[t.spec] = append(e.specUses[t.spec], u)
			dg, ok := e.digest(u)
			if !ok {
				e.complete = false
				continue
			}
			value := img.Value
			if dg != "" {
				value = pinnedForm(img.Value, dg, e.r.mode())
			}
			e.changeImage(c, image, value)
			lines = append(lines, w.Container+"="+value)
		}
	}
	if !done {
		if e.specLines == nil {
			e.specLines = map[*yaml.Node][]string{}
		}
		e.specLines[t.spec] = lines
	}
	if t.holder == nil || len(lines) == 0 || !e.complete || !once(&e.holders, t.holder) {
		return nil
	}
	sum := Checksum(lines)
	meta, err := get(t.holder, "metadata")
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
	if old.value != nil && old.value.Kind == yaml.ScalarNode && old.value.Value == sum {
		return nil
	}
	if old.key != nil && old.index < 0 {
		return fmt.Errorf("%s: %s: cannot write the %s annotation: it comes from a merge key (<<); write it out", e.d.at(old.key.Line), w.object(), e.r.annotation())
	}
	if n, why := sharedMetadata(t.holder); n != nil {
		return fmt.Errorf("%s: %s: cannot write the %s annotation: the pod template's %s", e.d.at(n.Line), w.object(), e.r.annotation(), why)
	}
	e.annotations = append(e.annotations, annotationChange{holder: t.holder, value: sum})
	return nil
}

// changeImage records that an image field, found as image in container
// c, is to be written as value; it changes nothing when value is what the
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
	if raw.Kind != yaml.AliasNode {
		if once(&e.seen, raw) {
			e.images = append(e.images, imageChange{node: raw, value: value})
		}
		return
	}
	parent := deref(c)
	if len(image.via) >= 2 {
		parent = deref(image.via[len(image.via)-2])
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

// setAnnotation sets metadata.annotations[key] of a pod template to a
// single-quoted value, the way kyaml's AnnotationSetter writes it (tools
// then never mistake the checksum for a number). Unlike AnnotationSetter,
// it puts a missing metadata just before the spec, where people expect it,
// instead of after it.
func setAnnotation(holder *yaml.Node, key, value string) {
	// template looked every key up already, and sharedMetadata made sure
	// that none comes from a merge key or an alias.
	m, _ := get(holder, "metadata")
	meta := m.value
	switch {
	case meta != nil && meta.Kind != yaml.MappingNode:
		// "metadata:" with no value, or something odd: replace it.
		meta = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		setField(holder, "metadata", meta)
	case meta == nil:
		at := len(holder.Content)
		if spec, _ := get(holder, "spec"); spec.index >= 0 {
			at = spec.index
		}
		meta = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		holder.Content = slices.Insert(holder.Content, at, newScalar("metadata"), meta)
	}
	a, _ := get(meta, "annotations")
	annotations := a.value
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
	if e, _ := get(m, key); e.index >= 0 {
		m.Content[e.index+1] = v
		return
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
		_, _ = io.WriteString(h, l+"\n") // a hash never fails a write
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
func encode(d *document, root *yaml.Node, crlf bool) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(d.raw) + 256)
	buf.Write(d.raw[:d.head])
	if d.head == 0 && isMarker(d.raw, "---") {
		// The "---" line carries content ("--- {…}", "--- !!map"), so it
		// is part of the body; the encoder writes no marker for a lone
		// document, and without one this document would run into the
		// one before.
		buf.WriteString("---\n")
	}
	spellFlowNulls(root)
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
	if crlf {
		// The document's line breaks were CRLF: so are the new ones.
		out := buf.Bytes()
		return append(out[:d.head:d.head], bytes.ReplaceAll(out[d.head:], []byte("\n"), []byte("\r\n"))...), nil
	}
	return buf.Bytes(), nil
}

// spellFlowNulls spells out the empty nulls inside flow collections
// ("{a, b: c}", "{? a}": a's value), which the encoder would otherwise
// write as '', an empty string: something else to the API server.
func spellFlowNulls(root *yaml.Node) {
	type frame struct {
		n    *yaml.Node
		flow bool
	}
	stack := []frame{{n: root}}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		flow := f.flow || f.n.Style&yaml.FlowStyle != 0
		for _, c := range f.n.Content {
			switch {
			case c.Kind == yaml.ScalarNode && flow && c.Tag == "!!null" && c.Value == "":
				c.Value = "null"
			case c.Kind == yaml.MappingNode || c.Kind == yaml.SequenceNode || c.Kind == yaml.DocumentNode:
				stack = append(stack, frame{c, flow})
			}
		}
	}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError rewrites a parser error to name the stream line.
func yamlError(d *document, err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return fmt.Errorf("%s: malformed YAML: %s", d.at(n), m[2])
	}
	// The parser names no line for bytes that are not UTF-8 or control
	// characters: find the first.
	body := d.body()
	for at := 0; at < len(body); {
		r, size := utf8.DecodeRune(body[at:])
		bad := ""
		switch {
		case r == utf8.RuneError && size <= 1:
			bad = fmt.Sprintf("byte 0x%02x is not UTF-8 (digestpin reads UTF-8 only)", body[at])
		case unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' && r != '\u0085':
			bad = fmt.Sprintf("control character %U is not allowed", r)
		}
		if bad != "" {
			n := bytes.Count(body[:at], []byte("\n")) + 1
			return fmt.Errorf("%s: malformed YAML: %s", d.at(n), bad)
		}
		at += size
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
	case strings.ContainsFunc(n.Value, unicode.IsControl):
		return fmt.Sprintf("%s %q", strings.TrimPrefix(n.Tag, "!!"), n.Value)
	}
	return fmt.Sprintf("%s %s", strings.TrimPrefix(n.Tag, "!!"), n.Value)
}
