package renderer

import (
	"cmp"
	"fmt"
	"slices"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/renderer/stream"
)

// routes records how the editor reached the nodes of a document that has
// aliases, so that a change reaches nothing but image fields and pod
// templates. An anchored node is shared by its place and by each alias of
// it; changing it (or a node inside it) changes every place. That is
// sound only where every place is one the editor reached on its way to
// images: a container used as two containers, a pod spec that two
// Deployments of a List share. A change inside a node that a ConfigMap
// (or any other place off the editor's way) shares is refused, except an
// image field that is an alias: the editor writes that one field out,
// which changes nothing else.
type routes struct {
	// aliases maps each anchored node to its aliases (stream.Parsed.Aliases).
	aliases map[*yaml.Node][]*yaml.Node
	// reached are the nodes on the editor's way; direct those it reached
	// at their own place, taken the aliases it followed (or wrote out).
	reached, direct, taken map[*yaml.Node]bool
}

func newRoutes(aliases map[*yaml.Node][]*yaml.Node) *routes {
	if aliases == nil {
		return nil // no alias: every node has one place
	}
	return &routes{aliases: aliases, reached: map[*yaml.Node]bool{}, direct: map[*yaml.Node]bool{}, taken: map[*yaml.Node]bool{}}
}

// step records that the editor passed n, a node as written, on its way
// to images. A nil routes records nothing.
func (t *routes) step(n *yaml.Node) {
	if t == nil {
		return
	}
	if n.Kind == yaml.AliasNode {
		t.taken[n] = true
		t.reached[n.Alias] = true
		return
	}
	t.direct[n] = true
	t.reached[n] = true
}

// take records that the editor writes out alias a, an image field: the
// node a names is not on its way.
func (t *routes) take(a *yaml.Node) {
	if t != nil {
		t.taken[a] = true
	}
}

// steps records each of ns.
func (t *routes) steps(ns []*yaml.Node) {
	for _, n := range ns {
		t.step(n)
	}
}

// check refuses the changes when one of the nodes changed is inside an
// anchored node that some place off the editor's way shares. changed
// are the nodes whose content changes.
func (t *routes) check(d *document, changed []*yaml.Node) error {
	if t == nil || len(changed) == 0 {
		return nil
	}
	isChanged := map[*yaml.Node]bool{}
	for _, n := range changed {
		isChanged[n] = true
	}
	// holds reports whether n is or holds a changed node, through aliases
	// too; the document has no cycle (checkAliases), so memo suffices.
	memo := map[*yaml.Node]bool{}
	var holds func(n *yaml.Node) bool
	holds = func(n *yaml.Node) bool {
		n = stream.Deref(n)
		if v, ok := memo[n]; ok {
			return v
		}
		memo[n] = false
		v := isChanged[n] || slices.ContainsFunc(n.Content, holds)
		memo[n] = v
		return v
	}
	var anchored []*yaml.Node
	for n := range t.reached {
		if len(t.aliases[n]) > 0 {
			anchored = append(anchored, n)
		}
	}
	// In stream order, so that the error is the same every time.
	slices.SortFunc(anchored, func(a, b *yaml.Node) int { return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column)) })
	for _, n := range anchored {
		if !t.direct[n] && holds(n) {
			return fmt.Errorf("%s: &%s is not on the way to a pod spec's images, but an alias uses it there: pinning would change it too; write it out", d.At(n.Line), n.Anchor)
		}
		for _, a := range t.aliases[n] {
			if !t.taken[a] && holds(n) {
				return fmt.Errorf("%s: *%s shares &%s (line %d) outside a pod spec's images: pinning would change it too; write it out", d.At(a.Line), a.Value, n.Anchor, d.StreamLine(n.Line))
			}
		}
	}
	return nil
}
