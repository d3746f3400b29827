package fluxpin

import (
	"slices"
	"strings"

	dpin "github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/renderer"
)

// Changes is what Pin changed in the file's digests, as a dpin.ChangeSet
// against the file (dpin.AgainstFile), for pin's own summaries
// (ChangeSet.Markdown and Text): per images entry of digestpin's, by
// name, the digests that moved (Before → Owned), the entries added and
// those removed, and the unchanged. images are the images the render
// ran (pin.Result.Images): each entry's workloads and fully qualified
// name come from them.
func (r *Result) Changes(images []renderer.Image) *dpin.ChangeSet {
	cs := &dpin.ChangeSet{Against: dpin.AgainstFile, Moved: []dpin.Change{}, Added: []dpin.Change{}, Removed: []dpin.Change{}, Unchanged: []string{}}
	before := map[string]Image{}
	for _, im := range r.Before {
		before[im.Name] = im
	}
	for _, im := range r.Owned {
		ref := Image{Name: im.Name, NewTag: im.NewTag}.String()
		c := dpin.Change{Reference: ref, Name: ref, Digest: im.Digest, Workloads: []renderer.Workload{}}
		for _, ri := range images {
			if name, _ := Split(ri.Written); name == im.Name && !strings.Contains(ri.Written, "@") {
				c.Name, c.Source = ri.Reference, ri.Source
				c.Workloads = append(c.Workloads, ri.Workloads...)
			}
		}
		prev, ok := before[im.Name]
		delete(before, im.Name)
		switch {
		case !ok:
			cs.Added = append(cs.Added, c)
		case prev.Digest == im.Digest && prev.NewTag == im.NewTag:
			cs.Unchanged = append(cs.Unchanged, ref)
		default:
			c.Previous = &dpin.Previous{Digest: prev.Digest, Source: dpin.AgainstFile}
			if prev.NewTag != im.NewTag {
				// A new tag: pin's summaries say "(tag 1.26 → 1.27)".
				c.Tag, c.Previous.Tag = im.NewTag, prev.NewTag
			}
			cs.Moved = append(cs.Moved, c)
		}
	}
	for _, im := range r.Before {
		if _, gone := before[im.Name]; !gone {
			continue
		}
		ref := Image{Name: im.Name, NewTag: im.NewTag}.String()
		cs.Removed = append(cs.Removed, dpin.Change{Reference: ref, Name: ref, Previous: &dpin.Previous{Digest: im.Digest, Source: dpin.AgainstFile}, Workloads: []renderer.Workload{}})
	}
	slices.SortFunc(cs.Removed, func(a, b dpin.Change) int { return strings.Compare(a.Name, b.Name) })
	return cs
}

// Summary is one object's part of the summaries of digestpin flux pin.
type Summary struct {
	// Path is the object's file, Object the object ("HelmRelease
	// shop/web").
	Path, Object string
	Changes      *dpin.ChangeSet
}

// Markdown is the summaries in Markdown, for a pull request or a job
// summary: per object, a heading that names its file and the object,
// then pin's own Markdown of its change set.
func Markdown(sums []Summary) []byte {
	var b strings.Builder
	for i, s := range sums {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("## `" + strings.ReplaceAll(s.Path, "`", "'") + "`: " + s.Object + "\n\n")
		b.Write(s.Changes.Markdown())
	}
	return []byte(b.String())
}

// Text is the summaries as plain text, for a commit message and a log:
// per object, pin's own text of its change set, its headline after the
// file and the object ("clusters/web.yaml: HelmRelease shop/web: 1 image
// moved, …").
func Text(sums []Summary) []byte {
	var b strings.Builder
	for _, s := range sums {
		b.WriteString(s.Path + ": " + s.Object + ": ")
		b.Write(s.Changes.Text())
	}
	return []byte(b.String())
}
