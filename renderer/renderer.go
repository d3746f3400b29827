package renderer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"unique"

	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/renderer/stream"
	"github.com/digestpin/digestpin/resolution"
)

// MaxNodes bounds the memory a Render takes for parsed documents. A
// document is parsed into a tree of YAML nodes, some 400 bytes each
// whatever the bytes that spelt them (a flow sequence "[a,a,…]" spends 2
// bytes of input on a node), so memory is bounded by nodes, not bytes:
// before a document is parsed its nodes are estimated from its bytes
// (an upper bound), a document that may hold more than
// MaxNodes is refused, and the workers that parse documents at once hold
// at most MaxNodes estimated nodes between them; parsing takes then at
// most some 400 MiB. The Kubernetes API server refuses a request body
// larger than 3 MiB, which holds fewer nodes than MaxNodes in any
// realistic spelling. A document without an image field is only checked
// (Kubernetes must be able to read it): in the plain block style Helm
// writes, without a tree, and then without bound; else parsed, and
// bounded alike.
const MaxNodes = stream.MaxNodes

// DefaultChecksumAnnotation is the pod-template annotation that holds the
// checksum of the template's pinned images, after Helm's checksum/config
// idiom.
const DefaultChecksumAnnotation = "checksum/images"

// Renderer pins the images of a manifest stream. Its fields are read-only
// during Render, so one Renderer may serve concurrent calls.
type Renderer struct {
	// Resolver resolves references without a digest, concurrently (see
	// resolution.Resolver). It may be nil when every image already carries
	// a digest. Render calls it for each distinct reference as soon as the
	// parse has validated that reference, while the rest of the stream is
	// parsed; when the stream fails, it cancels the context of the calls
	// in flight, and it returns only once every call has returned.
	Resolver resolution.Resolver
	// Mode is the form images are written in; "" means ModePin.
	Mode Mode
	// ChecksumAnnotation names the pod-template annotation; "" means
	// DefaultChecksumAnnotation.
	ChecksumAnnotation string
	// PodSpecPaths says where each kind keeps its pod specs; nil means
	// kindpath.DefaultPodSpecs. Every entry that matches a kind is followed.
	PodSpecPaths []kindpath.PodSpec
	// ImagePaths name image fields outside pod specs; nil means
	// kindpath.DefaultImages. Every entry that matches a kind is followed.
	// One with Embedded pins image fields inside the document that a
	// string holds, in the string's bytes alone, where the string is a
	// literal block scalar; elsewhere the Render fails.
	ImagePaths []kindpath.Image
	// ContainerImagePaths name image fields inside each container of
	// every pod spec (in its args and env), each path leading from the
	// container, its Group and Kind unused, none with Embedded; nil means
	// kindpath.DefaultContainerImages. They are pinned with the container and
	// go into its pod template's checksum.
	ContainerImagePaths []kindpath.Image
	// ChecksumPaths say where the image fields of ImagePaths get a
	// checksum annotation; nil means nowhere.
	ChecksumPaths []kindpath.Checksum
	// KeepUnresolved keeps an image that cannot be resolved as it is,
	// with a warning, instead of failing the render.
	KeepUnresolved bool
	// Strict fails a render that leaves a value that looks like an image
	// reference as a tag (see Unpinned) instead of warning about it.
	Strict bool
	// Warnf receives warnings; nil discards them.
	Warnf func(format string, args ...any)

	// keys are imageKeys, set on the copy of the Renderer that a Render
	// works with.
	keys [][]string
	// checked holds the result of imageref.Check of each image value the
	// Render met (string to error, nil for valid): a stream repeats a few
	// references in thousands of fields. nil outside a Render.
	checked *sync.Map
	// refs holds the name.Reference of each image value that parsed and
	// passed the kubelet's grammar (string to name.Reference), for the
	// same reason. nil outside a Render.
	refs *sync.Map
	// containerSels are selectorsOf(containerImagePaths()), set on the
	// copy of the Renderer that a Render works with.
	containerSels []pathSelector
	// inflight resolves the references the parse meets, set on the copy
	// of the Renderer that a Render works with.
	inflight *inflight
	// noQuick parses every document with yaml.v3, never the quick reader: for
	// the tests that hold the two to the same output.
	noQuick bool
}

// Workload is one container, image volume or image field that uses an
// image.
type Workload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Container is the container's name, or VolumePrefix and the name of
	// an image volume ("volume/data"), or FieldPrefix and the path of an
	// image field that an image path found
	// ("field/spec.templates[0].container.image"). A container name is a
	// DNS label, without "/", so they cannot be confused.
	Container string `json:"container"`
	// Field is the path, in the container, of an image field that
	// ContainerImagePaths found: "args[flag=--config-reloader-image]",
	// "env[name=AGENT_IMAGE].value"; "" for the container's image. For
	// an image inside a string (one that an image path with
	// kindpath.Image.Embedded pinned, or an Unpinned value), EmbeddedPrefix
	// and the path in the document the string holds.
	Field string `json:"field,omitempty"`
}

// owned returns w with strings of its own. A document's values may be
// cut from one string of the whole document (the quick reader): what outlives
// the document's parse must not keep all of it. The strings that repeat
// from one workload to the next (kind, namespace, container, field) are
// shared (intern); a name is copied.
func (w Workload) owned() Workload {
	w.Kind, w.Namespace, w.Name = intern(w.Kind), intern(w.Namespace), strings.Clone(w.Name)
	w.Container, w.Field = intern(w.Container), intern(w.Field)
	return w
}

// intern returns s in memory of its own, one copy for every equal string:
// a stream of thousands of workloads repeats a few kinds, namespaces,
// container names and images. It is safe for concurrent use.
func intern(s string) string { return unique.Make(s).Value() }

// line returns the checksum line of the workload's image pinned to
// value: "NAME=REF", "volume/NAME=REF", "field/PATH=REF", or for a field
// of a container "NAME/PATH=REF".
func (w Workload) line(value string) string {
	if w.Field != "" {
		return w.Container + "/" + w.Field + "=" + value
	}
	return w.Container + "=" + value
}

// VolumePrefix starts the Workload.Container of an image volume
// (spec.volumes[].image.reference), and its line in the checksum:
// "volume/NAME=REF".
const VolumePrefix = "volume/"

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
	// Source says where Digest came from: resolution.Pinned when the
	// stream carried it, resolution.Unresolved when the image was kept
	// unresolved, else what the Resolver said.
	Source resolution.Source
	// Tag is the tag a tag policy chose, whose digest Digest is; "" when
	// the image's own tag was resolved.
	Tag string
	// Mirror is the registry host of the mirror that answered for the
	// image's registry (resolution.Resolution.Mirror); "" otherwise.
	Mirror string
	// MediaType is what Digest is, an index or an image manifest
	// (resolution.Resolution.MediaType); "" when not known.
	MediaType string
	// Err is why the image could not be resolved, when KeepUnresolved
	// kept it.
	Err error
	// Workloads are the containers that use the image, in stream order.
	Workloads []Workload
}

// Result is the outcome of a Render. It keeps the output as the pieces
// it is made of, spans of the input left as they were and the text of the
// edits between them, rather than one copy of the whole stream: WriteTo
// writes them in order, Bytes puts them together. The output shares memory
// with the input, so the input must stay as it is while the Result is in
// use. The zero Result has an empty output. A Result is safe for
// concurrent use by readers.
type Result struct {
	// Images lists every distinct image, sorted by Reference.
	Images []Image
	// Unpinned lists the values that look like image references left as
	// tags, in stream order; Render warns about them once.
	Unpinned []Unpinned

	out stream.Output
}

// Render rewrites the stream in. On error the Result is empty: no partial
// output is ever returned. It stops with ctx's error when ctx is done.
func (r *Renderer) Render(ctx context.Context, in []byte) (Result, error) {
	if err := CheckAnnotationName(r.annotation()); err != nil {
		return Result{}, fmt.Errorf("checksum annotation: %w", err)
	}
	// A stream in UTF-16 or UTF-32 hides its "---" lines and image fields
	// from the byte-level scan: refuse it rather than pass it through
	// unpinned.
	if enc := stream.WideEncoding(in); enc != "" {
		return Result{}, fmt.Errorf("document 1, line 1: the stream is %s; digestpin reads UTF-8 only", enc)
	}

	if err := r.Validate(); err != nil {
		return Result{}, err
	}
	// The Renderer is shared: what a Render derives from its fields goes
	// into a copy.
	rr := *r
	rr.keys = r.imageKeys()
	rr.containerSels = selectorsOf(rr.containerImagePaths())
	rr.checked = new(sync.Map)
	rr.refs = new(sync.Map)
	rr.inflight = newInflight(ctx, r.Resolver)
	defer rr.inflight.stop()
	r = &rr

	// First, walk every document and collect its images. A document whose
	// images all carry digests is final already; the others wait for the
	// resolver, which starts on each reference once the parse has
	// validated it, while the parse goes on.
	docs, err := documents(in)
	if err != nil {
		return Result{}, err
	}
	c, err := r.collect(ctx, docs)
	if err != nil {
		return Result{}, err
	}

	// Next, wait for the distinct references without a digest, resolved
	// concurrently. No goroutine touches a node.
	images, digests, err := r.resolveAll(ctx, c)
	if err != nil {
		return Result{}, err
	}

	// Finally, rewrite the documents that waited for the resolver.
	if err := r.rewriteWaiting(ctx, c, digests); err != nil {
		return Result{}, err
	}
	// Warnings come in stream order, whichever core finished a document.
	unpinned, kept := c.warnings()
	if len(unpinned) > 0 && r.Strict {
		return Result{}, unpinnedError(ctx, unpinned)
	}
	for _, w := range kept {
		r.warnf("%s", w)
	}
	if len(unpinned) > 0 {
		r.warnf("%d image references are left as tags where digestpin knows no image field, and no lock file or report covers them: %s; %s (%s fails the run)", len(unpinned), unpinnedList(unpinned), unpinnedAdvice(ctx, unpinned), resolution.OptionName(ctx, "Strict"))
	}
	return Result{Images: images, Unpinned: unpinned, out: stream.NewOutput(in, c.out)}, nil
}

// Len returns the length of the output in bytes.
func (r Result) Len() int { return r.out.Len() }

// Bytes returns the output as one slice. When nothing in the stream
// changed it is the input slice itself (its capacity cut to its length),
// without a copy; otherwise each call puts a new slice of the output's
// exact size together. It is nil for the zero Result (a failed Render).
// Where the output goes to an io.Writer, WriteTo
// writes it without a copy of the whole.
func (r Result) Bytes() []byte { return r.out.Bytes() }

// WriteTo writes the output to w, implementing io.WriterTo, and returns
// the number of bytes w took. The small pieces go through a buffer of 64
// KiB; a span of the input longer than what the buffer has room for is
// written straight from the input once the buffer is flushed, and an
// unchanged stream is one write of the input. WriteTo stops at the first
// error: w then holds the first n bytes of the output. A w that takes less
// than it is given without an error fails with io.ErrShortWrite.
func (r Result) WriteTo(w io.Writer) (int64, error) { return r.out.WriteTo(w) }

var _ io.WriterTo = Result{}

// Validate checks the settings that no document can make right, and
// that would otherwise pin silently other than asked: Mode is one of the
// modes, and each checksum path covers an image path (one of its kind
// whose fields start with the checksum path's and go further; without
// one it would write no checksum). Render calls it first.
func (r *Renderer) Validate() error {
	switch r.Mode {
	case "", ModePin, ModeDigest, ModeAnnotate:
	default:
		return fmt.Errorf("mode %q: want %s, %s or %s", r.Mode, ModePin, ModeDigest, ModeAnnotate)
	}
	for _, p := range r.ContainerImagePaths {
		if len(p.Embedded) > 0 {
			return fmt.Errorf("container image path %s: a path inside a string is an image path of the object's kind, not of a container", p)
		}
	}
	return r.checkChecksumPaths()
}

// String formats a workload as "Deployment/ns/web container "app"", or
// for an image volume as "Deployment/ns/web volume "data"", or for an
// image field as "Workflow/ns/ci field spec.templates[0].script.image",
// or for an image inside a string as "ConfigMap/ns/cm field
// data["pod.yaml"] embedded spec.containers[0].image".
func (w Workload) String() string { return w.describe(w.object()) }

// describe formats the workload as String does, with obj in place of its
// object: its kind alone, say, for a field that several objects share.
func (w Workload) describe(obj string) string {
	if v, ok := strings.CutPrefix(w.Container, VolumePrefix); ok {
		return fmt.Sprintf("%s volume %q", obj, v)
	}
	if f, ok := strings.CutPrefix(w.Container, FieldPrefix); ok {
		if t, ok := strings.CutPrefix(w.Field, EmbeddedPrefix); ok {
			return fmt.Sprintf("%s field %s embedded %s", obj, f, t)
		}
		return fmt.Sprintf("%s field %s", obj, f)
	}
	if w.Field != "" {
		return fmt.Sprintf("%s container %q field %s", obj, w.Container, w.Field)
	}
	return fmt.Sprintf("%s container %q", obj, w.Container)
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

func (r *Renderer) containerImagePaths() []kindpath.Image {
	if r.ContainerImagePaths == nil {
		return kindpath.DefaultContainerImages
	}
	return r.ContainerImagePaths
}

// containerSelectors returns selectorsOf(containerImagePaths()), parsed
// once a Render.
func (r *Renderer) containerSelectors() []pathSelector {
	if r.containerSels == nil {
		return selectorsOf(r.containerImagePaths())
	}
	return r.containerSels
}

func (r *Renderer) paths() []kindpath.PodSpec {
	if r.PodSpecPaths == nil {
		return kindpath.DefaultPodSpecs
	}
	return r.PodSpecPaths
}

// Split cuts a manifest stream into its documents where Kubernetes' YAML
// reader (k8s.io/apimachinery's, which kubectl, Helm's kube client and
// Argo CD use) cuts it, as Render does: at each line that starts with
// "---" followed by nothing but a comment. It returns each document as the
// bytes it was read from, its separator line included, so that the
// documents concatenated are the stream. It refuses a stream that reader
// refuses (a line that starts with "---" followed by anything else),
// naming the line. Split is safe for concurrent use.
func Split(in []byte) ([][]byte, error) {
	docs, err := stream.Split(in)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(docs))
	for i, d := range docs {
		out[i] = d.Raw
	}
	return out, nil
}

// Checksum returns the hex SHA-256 of a pod template's images, given as
// "container=reference" lines and "volume/NAME=reference" lines for image
// volumes: the lines are sorted and each ends in a
// newline, so the checksum depends on nothing but the set of lines.
func Checksum(lines []string) string { return checksum(slices.Clone(lines)) }

// checksum is Checksum of lines, which it sorts in place.
func checksum(lines []string) string {
	slices.Sort(lines)
	h := sha256.New()
	for _, l := range lines {
		_, _ = io.WriteString(h, l+"\n") // a hash never fails a write
	}
	return hex.EncodeToString(h.Sum(nil))
}
