package fluxpin

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Check reads what the controller would apply with digestpin's entries
// written (final) and says that every container image in it runs the
// digest digestpin resolved for it: resolved maps each image as the
// manifests wrote it to its digest. An image that the controller changes
// after the images entries apply (a variable substituted after the
// build, a later post-renderer) would run unpinned, or under another
// image's digest: that is an error naming it, and at (what may change
// it, and what to do), so that digestpin writes nothing rather than pin something else.
func Check(final []byte, resolved map[string]string, at string) error {
	nodes, err := kio.FromBytes(final)
	if err != nil {
		return fmt.Errorf("reading the manifests with digestpin's entries: %w", err)
	}
	for _, n := range nodes {
		var bad error
		walkImages(n, func(image string) {
			if bad != nil {
				return
			}
			if _, ok := resolved[image]; ok && strings.Contains(image, "@") {
				return // pinned as written
			}
			ref, digest, pinned := strings.Cut(image, "@")
			switch want, known := resolved[ref]; {
			case pinned && known && want == digest:
			case !pinned:
				bad = fmt.Errorf("%s would still run %s unpinned once digestpin's images entries are written, so digestpin writes none: %s", describe(n), image, at)
			default:
				bad = fmt.Errorf("%s would run %s, not the digest of %s, once digestpin's images entries are written, so digestpin writes none: %s", describe(n), image, ref, at)
			}
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}

// Images are the images of a stream that a kustomize images entry pins,
// as its transformer finds them: the image of every containers and
// initContainers entry at any depth (of any kind but a
// CustomResourceDefinition), and the image.reference of every volumes
// entry (an image volume); each once, in stream order.
func Images(stream []byte) ([]string, error) {
	nodes, err := kio.FromBytes(stream)
	if err != nil {
		return nil, fmt.Errorf("reading the manifests: %w", err)
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range nodes {
		walkImages(n, func(image string) {
			if !seen[image] {
				seen[image] = true
				out = append(out, image)
			}
		})
	}
	return out, nil
}

// walkImages calls fn on each image of object n that an images entry
// pins.
func walkImages(n *yaml.RNode, fn func(image string)) {
	if n.GetKind() != "CustomResourceDefinition" {
		walkNode(n.YNode(), fn)
	}
}

// walkNode calls fn on each image under n.
func walkNode(n *yaml.Node, fn func(image string)) {
	scalar := func(n *yaml.Node) {
		if n != nil && n.Kind == yaml.ScalarNode && n.Value != "" {
			fn(n.Value)
		}
	}
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			walkNode(c, fn)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.SequenceNode {
				for _, c := range v.Content {
					switch k.Value {
					case "containers", "initContainers":
						_, img := get(c, "image")
						scalar(img)
					case "volumes":
						_, img := get(c, "image")
						_, ref := get(img, "reference")
						scalar(ref)
					}
				}
			}
			walkNode(v, fn)
		}
	}
}
