// Package fluxpin writes image digests where Flux applies them: the
// kustomize images of a HelmRelease's post-renderer
// (spec.postRenderers[].kustomize.images) and a Flux Kustomization's
// spec.images. It edits the file's text in place: every byte outside the
// entries it owns stays as written (comments, layout, quoting), and the
// entries it owns are marked with the line comment "# digestpin" on their
// name, so that a second run with the same digests changes nothing and
// hand-written entries are never rewritten.
package fluxpin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Mark is the line comment on the name of every images entry digestpin
// owns.
const Mark = "# digestpin"

// Kinds of the objects digestpin flux pin edits.
const (
	HelmRelease   = "HelmRelease"
	Kustomization = "Kustomization"
)

// Object is one Kubernetes object of a file, decoded.
type Object struct {
	APIVersion, Kind, Name, Namespace string
	// Spec is the object's spec; nil when it has none.
	Spec map[string]any
	// Data is a ConfigMap's or Secret's data (a Secret's in base64),
	// StringData a Secret's stringData.
	Data, StringData map[string]any
	// Path is the file the object is in (File.Path), Line the line it
	// starts on, from 1.
	Path string
	Line int
	node *yaml.Node
}

// File is a file that holds one HelmRelease or one Flux Kustomization,
// and the other objects beside it.
type File struct {
	// Path names the file in messages.
	Path string
	// Target is the HelmRelease or Kustomization.
	Target *Object
	// Objects are every object of the file, Target among them.
	Objects []*Object
	src     []byte
	lines   []string
	nl      string
}

// Parse reads the objects of a YAML stream. path names it in errors.
func Parse(path string, src []byte) (*File, error) {
	f := &File{Path: path, src: src, nl: "\n"}
	if bytes.Contains(src, []byte("\r\n")) {
		f.nl = "\r\n"
	}
	f.lines = strings.SplitAfter(string(src), "\n")
	dec := yaml.NewDecoder(bytes.NewReader(src))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not YAML: %w", path, err)
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}
		o, err := object(doc.Content[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, doc.Content[0].Line, err)
		}
		o.Path = path
		f.Objects = append(f.Objects, o)
	}
	return f, nil
}

// object decodes what digestpin reads of n.
func object(n *yaml.Node) (*Object, error) {
	var m struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name      string `yaml:"name"`
			Namespace string `yaml:"namespace"`
		} `yaml:"metadata"`
		Spec       map[string]any `yaml:"spec"`
		Data       map[string]any `yaml:"data"`
		StringData map[string]any `yaml:"stringData"`
	}
	if err := n.Decode(&m); err != nil {
		return nil, fmt.Errorf("reading the object: %w", err)
	}
	return &Object{
		APIVersion: m.APIVersion, Kind: m.Kind, Name: m.Metadata.Name, Namespace: m.Metadata.Namespace,
		Spec: m.Spec, Data: m.Data, StringData: m.StringData, Line: n.Line, node: n,
	}, nil
}

// IsTarget says that o is a HelmRelease of helm-controller or a
// Kustomization of kustomize-controller.
func (o *Object) IsTarget() bool {
	return (o.Kind == HelmRelease && strings.HasPrefix(o.APIVersion, "helm.toolkit.fluxcd.io/")) ||
		(o.Kind == Kustomization && strings.HasPrefix(o.APIVersion, "kustomize.toolkit.fluxcd.io/"))
}

// Describe is "HelmRelease NAMESPACE/NAME" (or without the namespace).
func (o *Object) Describe() string {
	if o.Namespace != "" {
		return o.Kind + " " + o.Namespace + "/" + o.Name
	}
	return o.Kind + " " + o.Name
}

// SetTarget finds the one HelmRelease or Kustomization of f: none, or
// more than one, is an error that names them.
func (f *File) SetTarget() error {
	var found []*Object
	for _, o := range f.Objects {
		if o.IsTarget() {
			found = append(found, o)
		}
	}
	switch len(found) {
	case 0:
		return fmt.Errorf("%s: no HelmRelease (helm.toolkit.fluxcd.io) or Kustomization (kustomize.toolkit.fluxcd.io) in it", f.Path)
	case 1:
		f.Target = found[0]
		if found[0].Spec == nil {
			return fmt.Errorf("%s:%d: %s has no spec", f.Path, found[0].Line, found[0].Describe())
		}
		return nil
	}
	var names []string
	for _, o := range found {
		names = append(names, fmt.Sprintf("%s (line %d)", o.Describe(), o.Line))
	}
	return fmt.Errorf("%s: %d objects to pin, %s: digestpin flux pin takes one HelmRelease or Kustomization per file; put each in a file of its own", f.Path, len(found), strings.Join(names, ", "))
}

// Image is one kustomize images entry: the repository as the manifests
// write it, the tag they write (kept, so that the manifests still say
// which tag runs) and its digest.
type Image struct {
	Name, NewTag, Digest string
	// NewName is a hand-written entry's newName (digestpin writes none).
	NewName string
}

// String is NAME[:TAG]@DIGEST.
func (im Image) String() string {
	s := im.Name
	if im.NewTag != "" {
		s += ":" + im.NewTag
	}
	if im.Digest != "" {
		s += "@" + im.Digest
	}
	return s
}

// Split is written's repository and tag as written: "nginx:1.27" is
// nginx and 1.27, "reg:5000/a/b" has no tag; a digest is dropped.
func Split(written string) (name, tag string) {
	if i := strings.IndexByte(written, '@'); i >= 0 {
		written = written[:i]
	}
	if i := strings.LastIndexByte(written, ':'); i > strings.LastIndexByte(written, '/') {
		return written[:i], written[i+1:]
	}
	return written, ""
}

// Entries are the images entries for the images a render runs, by their
// reference as written and the digest resolved (written → digest). An
// image the manifests pin already (a digest in the reference) needs none.
// Two tags of one repository cannot both be pinned by name, as kustomize
// matches images: that is an error naming both.
func Entries(images map[string]string) ([]Image, error) {
	byName := map[string]Image{}
	for written, digest := range images {
		if strings.Contains(written, "@") {
			continue
		}
		name, tag := Split(written)
		if prev, ok := byName[name]; ok && prev.NewTag != tag {
			a, b := Image{Name: name, NewTag: prev.NewTag}.String(), Image{Name: name, NewTag: tag}.String()
			if a > b {
				a, b = b, a
			}
			return nil, fmt.Errorf("%s and %s: two tags of one repository, which one kustomize images entry (matched by name) cannot pin both; pin one in the chart's values or give each its own repository", a, b)
		}
		byName[name] = Image{Name: name, NewTag: tag, Digest: digest}
	}
	out := make([]Image, 0, len(byName))
	for _, im := range byName {
		out = append(out, im)
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
