package steady

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// FileAnnotation is the annotation in which Helm 4 hands its post-renderer
// each document's template file, instead of the "# Source:" comment that
// helm template prints. Helm 4 removes it from what the post-renderer
// writes, files the documents by it, and prints them by kind, in another
// order than it handed them over.
//
// A document that has no "# Source:" comment but this annotation is
// matched by it, and because Helm 4 hands over each file's documents in
// the file's order while helm template prints them sorted by kind, two
// streams of which one carries the annotation are matched by file, kind
// and position among that file's documents of that kind. The annotation
// itself is no field: documents are compared without it.
const FileAnnotation = "postrenderer.helm.sh/postrender-filename"

var fileAnnotationJSON = []byte(strconv.Quote(FileAnnotation))

// withoutFileAnnotation returns j, the JSON of a document, without
// FileAnnotation, and then without metadata.annotations and metadata when
// they are empty, as Helm 4 removes them (kyaml's ClearEmptyAnnotations).
func withoutFileAnnotation(j []byte) ([]byte, error) {
	if !bytes.Contains(j, fileAnnotationJSON) {
		return j, nil
	}
	v, err := decode(j)
	if err != nil {
		return nil, err
	}
	meta, _ := objectOf(v).m["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if _, ok := ann[FileAnnotation]; !ok {
		return j, nil
	}
	delete(ann, FileAnnotation)
	if len(ann) == 0 {
		delete(meta, "annotations")
	}
	if len(meta) == 0 {
		delete(objectOf(v).m, "metadata")
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding JSON: %w", err)
	}
	return out, nil
}

// fileFromAnnotation sets the source of d from FileAnnotation when d has
// no "# Source:" comment and carries the annotation.
func (d *document) fileFromAnnotation() error {
	if d.source != "" || !bytes.Contains(d.raw, []byte(FileAnnotation)) {
		return nil
	}
	j, err := yamlToJSON(d)
	if err != nil {
		return err
	}
	v, err := decode(j)
	if err != nil {
		return fmt.Errorf("reading %s: %s: %w", d.stream, d.where(), err)
	}
	meta, _ := objectOf(v).m["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	file, _ := ann[FileAnnotation].(string)
	if file == "" {
		return nil
	}
	d.file, d.source = file, printable(file)
	return nil
}

// matchByKind keys the documents of a and b by file, kind and position
// among that file's documents of that kind, when either stream comes from
// Helm 4's post-renderer (see FileAnnotation). Otherwise it leaves the
// keys by position in their file, which needs no decoding.
func matchByKind(a, b *stream) error {
	if !a.annotated && !b.annotated {
		return nil
	}
	for _, s := range []*stream{a, b} {
		seen := map[string]int{}
		s.byKey = make(map[string]*document, len(s.docs))
		for _, d := range s.docs {
			v, err := d.value()
			if err != nil {
				return err
			}
			k := d.source + "\x00" + objectOf(v).str("kind")
			d.key = k + "\x00" + strconv.Itoa(seen[k])
			seen[k]++
			s.byKey[d.key] = d
		}
	}
	return nil
}

// annotated returns the documents of previous matched with those of
// output, in output's order, each with the FileAnnotation of its match in
// output and without its "# Source:" comment: what Helm 4 files and prints
// as it did the previous output. Helm 4 writes every document anew, so
// what it prints is the previous output again.
func annotated(previous, output *stream) ([]byte, error) {
	var b bytes.Buffer
	for _, d := range output.docs {
		p := previous.byKey[d.key]
		n, err := kyaml.Parse(withoutSource(p.raw))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %s: %w", p.stream, p.where(), err)
		}
		if d.file != "" {
			if err := n.PipeE(kyaml.SetAnnotation(FileAnnotation, d.file)); err != nil {
				return nil, fmt.Errorf("annotating %s: %s: %w", p.stream, p.where(), err)
			}
		}
		s, err := n.String()
		if err != nil {
			return nil, fmt.Errorf("writing %s: %s: %w", p.stream, p.where(), err)
		}
		b.WriteString("---\n")
		b.WriteString(s)
	}
	return b.Bytes(), nil
}

// withoutSource returns a document without the "# Source:" comments among
// the comments that open it: Helm 4 prints its own.
func withoutSource(raw []byte) string {
	var b strings.Builder
	header := true
	for line := range strings.Lines(string(raw)) {
		t := strings.TrimSpace(line)
		if header && t != "" && t[0] != '#' && !isMarker([]byte(t), "---") {
			header = false
		}
		if header && strings.HasPrefix(t, string(sourcePrefix)) {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}
