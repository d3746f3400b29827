package fluxpin

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Result is what Pin did to a file.
type Result struct {
	// Out is the file with digestpin's entries written; the input itself
	// when nothing changed.
	Out []byte
	// Changed says that Out differs from the input.
	Changed bool
	// Kept are the hand-written images entries (without Mark), kept as
	// written.
	Kept []Image
	// Owned are digestpin's entries as written now.
	Owned []Image
	// Before are digestpin's entries as the input held them.
	Before []Image
}

// entry is one images entry found in the file.
type entry struct {
	im    Image
	owned bool
	// first and end are its lines, [first, end), from 0.
	first, end int
}

// list is one images list found: its entries and where they are.
type list struct {
	key, seq *yaml.Node
	entries  []entry
}

// edit is one splice of the file's lines: lines [from, to) replaced by
// text.
type edit struct {
	from, to int
	text     string
}

// Pin writes want (Entries) as digestpin's images entries of f's Target:
// in a HelmRelease, in the first post-renderer whose kustomize images hold
// digestpin's entries, else the first kustomize post-renderer, else a new
// one; in a Kustomization, in spec.images. Its own entries that name no
// image of want go; hand-written entries stay as written and are reported
// in Kept. A hand-written entry for an image of want is an error, and
// nothing is written: digestpin never overwrites one.
func (f *File) Pin(want []Image) (*Result, error) {
	t := f.Target
	_, spec := get(t.node, "spec")
	if spec == nil || spec.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: %s has no spec mapping", f.Path, t.Line, t.Describe())
	}
	var lists []*list
	var parent *yaml.Node // the mapping that holds (or will hold) digestpin's images
	var e *edit
	var err error
	if t.Kind == Kustomization {
		l, err := f.listIn(spec, "spec")
		if err != nil {
			return nil, err
		}
		if l != nil {
			lists = append(lists, l)
		}
		parent = spec
	} else {
		prKey, pr := get(spec, "postRenderers")
		if pr != nil && pr.Kind == yaml.SequenceNode {
			var firstKustomize *yaml.Node
			for i, item := range pr.Content {
				_, k := get(item, "kustomize")
				if k == nil || k.Kind != yaml.MappingNode {
					continue
				}
				if firstKustomize == nil {
					firstKustomize = k
				}
				l, err := f.listIn(k, fmt.Sprintf("spec.postRenderers[%d].kustomize", i))
				if err != nil {
					return nil, err
				}
				if l == nil {
					continue
				}
				lists = append(lists, l)
				if parent == nil && slices.ContainsFunc(l.entries, func(e entry) bool { return e.owned }) {
					parent = k
				}
			}
			if parent == nil {
				parent = firstKustomize
			}
		}
		if parent == nil {
			// A post-renderer of digestpin's own.
			e, err = f.newPostRenderer(spec, prKey, pr, want)
			if err != nil {
				return nil, err
			}
		}
	}
	res := &Result{Owned: want}
	wanted := map[string]bool{}
	for _, im := range want {
		wanted[im.Name] = true
	}
	for _, l := range lists {
		for _, en := range l.entries {
			switch {
			case en.owned:
				res.Before = append(res.Before, en.im)
			case wanted[en.im.Name]:
				return nil, fmt.Errorf("%s:%d: the images entry for %s is written by hand (no %q on its name): digestpin never overwrites it; remove it, or mark its name %q to hand it over", f.Path, en.first+1, en.im.Name, Mark, Mark)
			default:
				res.Kept = append(res.Kept, en.im)
			}
		}
	}
	if e == nil && parent != nil {
		e = f.editList(parent, lists, want)
	}
	res.Out = f.src
	if e != nil {
		out := strings.Join(f.lines[:e.from], "") + e.text + strings.Join(f.lines[e.to:], "")
		if e.from == len(f.lines) && e.from > 0 && !strings.HasSuffix(f.lines[e.from-1], "\n") {
			out = strings.Join(f.lines[:e.from], "") + f.nl + e.text
		}
		res.Out = []byte(out)
	}
	res.Changed = string(res.Out) != string(f.src)
	return res, nil
}

// listIn reads the images list of mapping m (at path, for messages); nil
// when m has none.
func (f *File) listIn(m *yaml.Node, path string) (*list, error) {
	k, v := get(m, "images")
	if k == nil {
		return nil, nil
	}
	l := &list{key: k, seq: v}
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		return l, nil
	case v.Kind != yaml.SequenceNode:
		return nil, fmt.Errorf("%s:%d: %s.images is not a list", f.Path, k.Line, path)
	case v.Style&yaml.FlowStyle != 0 && len(v.Content) > 0:
		return nil, fmt.Errorf("%s:%d: %s.images is a flow list ([...]): write it as a block list (- name: ...) for digestpin to add to it", f.Path, k.Line, path)
	}
	for i, item := range v.Content {
		if item.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s:%d: %s.images[%d] is not a mapping", f.Path, item.Line, path, i)
		}
		var im struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
			Digest  string `yaml:"digest"`
		}
		if err := item.Decode(&im); err != nil {
			return nil, fmt.Errorf("%s:%d: %s.images[%d]: %w", f.Path, item.Line, path, i, err)
		}
		_, name := get(item, "name")
		en := entry{im: Image{Name: im.Name, NewTag: im.NewTag, Digest: im.Digest, NewName: im.NewName}, first: f.itemStart(item)}
		en.owned = name != nil && strings.Contains(name.LineComment, strings.TrimPrefix(Mark, "# "))
		if i+1 < len(v.Content) {
			en.end = f.itemStart(v.Content[i+1])
		} else {
			en.end = f.blockEnd(en.first, f.indent(en.first)+1)
		}
		l.entries = append(l.entries, en)
	}
	return l, nil
}

// editList is the splice that writes want as digestpin's entries of
// parent's images list (lists has it, if it exists), after the
// hand-written ones; nil when it is written so already.
func (f *File) editList(parent *yaml.Node, lists []*list, want []Image) *edit {
	var l *list
	for _, c := range lists {
		if k, _ := get(parent, "images"); k == c.key {
			l = c
		}
	}
	keyCol := parent.Column - 1
	switch {
	case l == nil:
		if len(want) == 0 {
			return nil
		}
		at := f.blockEnd(parent.Line-1, keyCol)
		return &edit{from: at, to: at, text: pad(keyCol) + "images:" + f.nl + f.entries(keyCol+f.seqIndent(), want)}
	case len(l.entries) == 0:
		if len(want) == 0 {
			return nil
		}
		// images: (empty) or images: []: a block list after the key.
		kl := l.key.Line - 1
		text := pad(keyCol) + "images:" + f.nl + f.entries(keyCol+f.seqIndent(), want)
		return &edit{from: kl, to: kl + 1, text: text}
	}
	dash := l.seq.Column - 1
	var text strings.Builder
	for _, en := range l.entries {
		if !en.owned {
			text.WriteString(strings.Join(f.lines[en.first:en.end], ""))
		}
	}
	text.WriteString(f.entries(dash, want))
	from, to := l.entries[0].first, l.entries[len(l.entries)-1].end
	if text.Len() == 0 {
		// No entry left: an empty list.
		kl := l.key.Line - 1
		return &edit{from: kl, to: to, text: pad(keyCol) + "images: []" + f.nl}
	}
	return &edit{from: from, to: to, text: text.String()}
}

// newPostRenderer is the splice that adds a kustomize post-renderer with
// want to spec (postRenderers key and value, when spec has them).
func (f *File) newPostRenderer(spec, key, pr *yaml.Node, want []Image) (*edit, error) {
	if len(want) == 0 {
		return nil, nil
	}
	keyCol := spec.Column - 1
	step := f.mapIndent()
	item := func(dash int) string {
		in := dash + 2
		return pad(dash) + "- kustomize:" + f.nl + pad(in+step) + "images:" + f.nl + f.entries(in+step+f.seqIndent(), want)
	}
	switch {
	case key == nil:
		at := f.blockEnd(spec.Line-1, keyCol)
		return &edit{from: at, to: at, text: pad(keyCol) + "postRenderers:" + f.nl + item(keyCol+f.seqIndent())}, nil
	case pr.Kind == yaml.SequenceNode && len(pr.Content) > 0 && pr.Style&yaml.FlowStyle == 0:
		dash := pr.Column - 1
		last := f.itemStart(pr.Content[len(pr.Content)-1])
		at := f.blockEnd(last, dash+1)
		return &edit{from: at, to: at, text: item(dash)}, nil
	case (pr.Kind == yaml.SequenceNode && len(pr.Content) == 0) || (pr.Kind == yaml.ScalarNode && pr.Tag == "!!null"):
		kl := key.Line - 1
		return &edit{from: kl, to: kl + 1, text: pad(keyCol) + "postRenderers:" + f.nl + item(keyCol+f.seqIndent())}, nil
	}
	return nil, fmt.Errorf("%s:%d: spec.postRenderers is not a block list: write it as one (- kustomize: ...) for digestpin to add its post-renderer", f.Path, key.Line)
}

// entries is want as images entries, each dash at column dash.
func (f *File) entries(dash int, want []Image) string {
	var b strings.Builder
	for _, im := range want {
		b.WriteString(pad(dash) + "- name: " + scalar(im.Name) + " " + Mark + f.nl)
		if im.NewTag != "" {
			b.WriteString(pad(dash+2) + "newTag: " + scalar(im.NewTag) + f.nl)
		}
		b.WriteString(pad(dash+2) + "digest: " + scalar(im.Digest) + f.nl)
	}
	return b.String()
}

// scalar is s as a YAML string: plain where that reads back as the same
// string, else quoted.
func scalar(s string) string {
	b, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%q", s)
	}
	return strings.TrimSuffix(string(b), "\n")
}

// seqIndent is how far the target's block lists put their dash right of
// their key: 0 when the file writes them flush (key:\n- item), else 2.
func (f *File) seqIndent() int { return f.indentUnder(yaml.SequenceNode, 0) }

// mapIndent is how far the target indents a mapping under its key: as
// its first nested block mapping, else 2.
func (f *File) mapIndent() int { return f.indentUnder(yaml.MappingNode, 1) }

// indentUnder is how far right of its key the target's first non-empty
// block node of kind starts, at least least; 2 when it has none.
func (f *File) indentUnder(kind yaml.Kind, least int) int {
	d := 2
	walk(f.Target.node, func(k, v *yaml.Node) bool {
		if v.Kind == kind && v.Style&yaml.FlowStyle == 0 && len(v.Content) > 0 && v.Line > k.Line {
			d = v.Column - k.Column
			return false
		}
		return true
	})
	return max(d, least)
}

// walk calls fn on each key and value of n's mappings, depth first, until
// it returns false.
func walk(n *yaml.Node, fn func(k, v *yaml.Node) bool) bool {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if !fn(n.Content[i], n.Content[i+1]) || !walk(n.Content[i+1], fn) {
				return false
			}
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if !walk(c, fn) {
				return false
			}
		}
	}
	return true
}

// itemStart is the line (from 0) of the dash of sequence item n.
func (f *File) itemStart(n *yaml.Node) int {
	l := n.Line - 1
	for l > 0 && !strings.HasPrefix(strings.TrimSpace(f.lines[l]), "-") {
		l--
	}
	return l
}

// blockEnd is the line (from 0) after the block that starts on line
// start: the first later line, not blank, indented less than col (or a
// document marker), with the blank lines before it left out.
func (f *File) blockEnd(start, col int) int {
	i := start + 1
	for ; i < len(f.lines); i++ {
		s := strings.TrimRight(f.lines[i], "\r\n")
		if strings.TrimSpace(s) == "" {
			continue
		}
		if f.indent(i) < col || strings.HasPrefix(s, "---") || strings.HasPrefix(s, "...") {
			break
		}
	}
	for i-1 > start && strings.TrimSpace(f.lines[i-1]) == "" {
		i--
	}
	return i
}

// indent is the number of spaces that start line i.
func (f *File) indent(i int) int {
	return len(f.lines[i]) - len(strings.TrimLeft(f.lines[i], " "))
}

// get is the key and value of key in mapping m; nil, nil when m is no
// mapping or has no such key.
func get(m *yaml.Node, key string) (k, v *yaml.Node) {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

func pad(n int) string { return strings.Repeat(" ", n) }
