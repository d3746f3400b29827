package stream

import (
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Merge keys ("<<: *base") are followed by lookup, so they cost work each
// time a field is looked up. A document may merge at most
// maxMergeFactor·(its nodes) + maxMergeBase mapping entries in all,
// counting merges of merges: far more than hand-written anchors need, and
// a bound that keeps every walk linear in the document.
const (
	maxMergeFactor = 16
	maxMergeBase   = 1 << 16
)

// checkAliases refuses a parsed document whose aliases Kubernetes would
// refuse too, or whose merge keys would make the walk cost more than
// reading it: an alias inside the node it names (a cycle, which would
// never end), and merges that expand to too many entries (a "billion
// laughs" through "<<"). Plain aliases are never expanded: the walker
// steps through each node once and the encoder writes aliases as aliases.
// It returns the aliases of each anchored node that has any (nil when
// the document has no alias), or the offending node's line and the cause.
func checkAliases(root *yaml.Node) (map[*yaml.Node][]*yaml.Node, int, error) {
	// First, walk the tree as parsed (aliases are leaves): count the
	// nodes, find cycles, and collect the values of merge keys.
	type frame struct {
		n    *yaml.Node
		next int
	}
	var (
		nodes   int
		merges  []*yaml.Node
		aliases map[*yaml.Node][]*yaml.Node
		open    = map[*yaml.Node]bool{} // anchored nodes on the path from the root
		stack   = []frame{{n: root}}
	)
	if root.Anchor != "" {
		open[root] = true
	}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.next == 0 {
			nodes++
		}
		if top.next >= len(top.n.Content) {
			delete(open, top.n)
			stack = stack[:len(stack)-1]
			continue
		}
		c := top.n.Content[top.next]
		if top.n.Kind == yaml.MappingNode && top.next%2 == 0 && isMergeKey(c) && top.next+1 < len(top.n.Content) {
			merges = append(merges, top.n.Content[top.next+1])
		}
		top.next++
		if c.Kind == yaml.AliasNode {
			nodes++
			if open[c.Alias] {
				return nil, c.Line, fmt.Errorf("alias *%s is inside the node it names", c.Value)
			}
			if aliases == nil {
				aliases = map[*yaml.Node][]*yaml.Node{}
			}
			aliases[c.Alias] = append(aliases[c.Alias], c)
			continue
		}
		if c.Anchor != "" {
			open[c] = true
		}
		stack = append(stack, frame{n: c})
	}

	// Then add up what the merges expand to, each mapping's expansion
	// computed once, stopping at the bound.
	limit := maxMergeFactor*nodes + maxMergeBase
	memo := map[*yaml.Node]int{}
	var expand func(m *yaml.Node) int
	expand = func(m *yaml.Node) int {
		if v, ok := memo[m]; ok {
			return v
		}
		total := len(m.Content)
		for i := 0; i+1 < len(m.Content) && total <= limit; i += 2 {
			if isMergeKey(m.Content[i]) {
				for _, src := range mergeSources(m.Content[i+1]) {
					total += expand(Deref(src[len(src)-1]))
				}
			}
		}
		total = min(total, limit+1)
		memo[m] = total
		return total
	}
	cost := 0
	for _, v := range merges {
		for _, src := range mergeSources(v) {
			if cost += expand(Deref(src[len(src)-1])); cost > limit {
				return nil, v.Line, fmt.Errorf("merge keys (<<) expand to more than %d entries in a document of %d nodes", limit, nodes)
			}
		}
	}
	return aliases, 0, nil
}
