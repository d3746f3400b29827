package renderer

import (
	"context"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/renderer/stream"
)

// Keel's workload annotations (keel.sh): the update policy of every
// image of the workload, and whether "force" keeps to the tag as written.
const (
	KeelPolicyAnnotation   = "keel.sh/policy"
	KeelMatchTagAnnotation = "keel.sh/match-tag"
)

// KeelUse is one image field of a workload, and the Keel annotations of
// the workload (or, as Keel also reads them, its labels; annotations
// win).
type KeelUse struct {
	// Image is the image as written.
	Image string
	// Policy is the value of keel.sh/policy, "" without one.
	Policy string
	// MatchTag is keel.sh/match-tag: "true".
	MatchTag bool
	// Workload is the container that uses the image.
	Workload Workload
	// Where is the document and line of the image field.
	Where string
}

// KeelUses lists the container images of every workload in stream in
// order, with the workload's Keel annotations, so that a caller can give
// each image the tag policy Keel would apply. It only reads the stream;
// a document that Render would refuse is skipped here (Render says why).
func (r *Renderer) KeelUses(ctx context.Context, in []byte) ([]KeelUse, error) {
	docs, err := documents(in)
	if err != nil {
		return nil, err
	}
	uses := make([][]KeelUse, len(docs))
	err = eachDoc(ctx, len(docs), func(i int) {
		p, err := r.parse(docs[i])
		if p == nil || err != nil {
			return
		}
		uses[i] = r.keelObject(docs[i], p.Obj, 0, nil)
	})
	if err != nil {
		return nil, err
	}
	var out []KeelUse
	for _, u := range uses {
		out = append(out, u...)
	}
	return out, nil
}

// keelObject appends the image fields of object obj (or of a List's
// items) to out.
func (r *Renderer) keelObject(d *document, obj *yaml.Node, depth int, out []KeelUse) []KeelUse {
	kind, err := stream.Str(obj, "kind")
	if err != nil {
		return out
	}
	if items, err := stream.Get(obj, "items"); err == nil && strings.HasSuffix(kind, "List") && items.Value != nil && items.Value.Kind == yaml.SequenceNode {
		if depth >= maxListDepth {
			return out
		}
		for _, item := range items.Value.Content {
			if item = stream.Deref(item); item.Kind == yaml.MappingNode {
				out = r.keelObject(d, item, depth+1, out)
			}
		}
		return out
	}
	apiVersion, _ := stream.Str(obj, "apiVersion")
	w := Workload{Kind: kind}
	meta, _ := stream.Get(obj, "metadata")
	w.Name, _ = stream.Str(meta.Value, "name")
	w.Namespace, _ = stream.Str(meta.Value, "namespace")
	policy, matchTag := keelAnnotations(meta.Value)
	templates, err := findPodTemplates(obj, apiGroup(apiVersion), kind, r.paths(), func(*yaml.Node) {}, nil)
	if err != nil {
		return out
	}
	for _, t := range templates {
		for _, field := range containerFields {
			list, err := stream.Get(t.spec, field)
			if err != nil || list.Value == nil || list.Value.Kind != yaml.SequenceNode {
				continue
			}
			for _, c := range list.Value.Content {
				img, err := stream.Get(c, "image")
				if err != nil || img.Value == nil || img.Value.Kind != yaml.ScalarNode {
					continue
				}
				u := KeelUse{Image: img.Value.Value, Policy: policy, MatchTag: matchTag, Workload: w, Where: d.At(img.Value.Line)}
				u.Workload.Container, _ = stream.Str(c, "name")
				out = append(out, u)
			}
		}
	}
	return out
}

// keelAnnotations reads Keel's policy and match-tag from metadata's
// annotations, or else its labels.
func keelAnnotations(meta *yaml.Node) (policy string, matchTag bool) {
	for _, field := range []string{"labels", "annotations"} {
		m, err := stream.Get(meta, field)
		if err != nil || m.Value == nil {
			continue
		}
		if p, err := stream.Str(m.Value, KeelPolicyAnnotation); err == nil && p != "" {
			policy = p
			mt, _ := stream.Str(m.Value, KeelMatchTagAnnotation)
			matchTag = mt == "true"
		}
	}
	return strings.TrimSpace(policy), matchTag
}
