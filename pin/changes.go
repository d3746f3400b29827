package pin

import (
	"slices"
	"strings"
	"time"

	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
)

// ChangeSet is what a run changes against the previous state it knows,
// per image: the digests that moved and the workloads that roll because
// of them, the images added and those no longer used. Every list is
// sorted by image name; workloads are in stream order.
type ChangeSet struct {
	// Against is what the run was compared with: AgainstLock,
	// AgainstOutput, AgainstCache, AgainstFile, or "" when there was nothing to
	// compare with (then every pinned image is in Added).
	Against string `json:"against,omitempty"`
	// Moved are the images whose digest differs from the previous one.
	Moved []Change `json:"moved"`
	// Added are the images the previous state did not have.
	Added []Change `json:"added"`
	// Removed are the images of the previous state that the run no
	// longer uses; their workloads are those of a previous output.
	Removed []Change `json:"removed"`
	// Unchanged are the images whose digest is the previous one, as the
	// manifests spell them.
	Unchanged []string `json:"unchanged"`
	// Tags are the images left as tags: those kept unresolved and the
	// values that look like image references where no image field leads
	// (renderer.Unpinned). The report lists them already.
	Tags []LeftAsTag `json:"-"`
	// Rolls are the pod templates that differ from a previous output's
	// for another reason than the images above (AgainstOutput only: a
	// lock file holds no template): a changed checksum/config
	// annotation, an env value, a new container; and the workloads added
	// or removed. Absent when there are none.
	Rolls []Roll `json:"rolls,omitempty"`
	// Waiting are the images whose registry serves a new digest that a
	// waiting period (Options.MinAge) holds back: Digest is the one that
	// stays pinned, Waiting the new one and until when. They are among
	// Unchanged too (or Added, against an earlier output that had no
	// digest of theirs). Absent when none waits.
	Waiting []Change `json:"waiting,omitempty"`
	// Secrets are the Secrets whose keys differ from a previous
	// output's, by key name, never by value (AgainstOutput only). Absent
	// when there are none.
	Secrets []SecretChange `json:"secrets,omitempty"`
}

// Change is one image of a ChangeSet.
type Change struct {
	// Reference is the image as the manifests spell it (for a removed
	// image, as the previous state did).
	Reference string `json:"reference"`
	// Name is the fully qualified reference.
	Name string `json:"name"`
	// Previous is the digest before the run; nil for an added image.
	Previous *Previous `json:"previous,omitempty"`
	// Digest, Source and Tag are the digest now, where it came from and
	// the tag a tag policy chose; empty for a removed image.
	Digest string            `json:"digest,omitempty"`
	Source resolution.Source `json:"source,omitempty"`
	Tag    string            `json:"tag,omitempty"`
	// Created is when the image of Digest was built, as its registry
	// says (BuildTimes), in UTC: for a moved or added image, when the
	// registry gave a time; nil when it gave none, or the Unix epoch (a
	// reproducible build's), or a time in the future, or could not be
	// asked.
	Created *time.Time `json:"created,omitempty"`
	// Workloads are the containers that use the image: those that roll
	// (for a removed image, those that used it).
	Workloads []renderer.Workload `json:"workloads"`
	// Waiting is the new digest that a waiting period holds back, in
	// ChangeSet.Waiting; nil elsewhere.
	Waiting *Pending `json:"waiting,omitempty"`
}

// Previous is an image's digest before the run.
type Previous struct {
	Digest string `json:"digest"`
	// Source is AgainstLock, AgainstOutput, AgainstCache or AgainstFile.
	Source string `json:"source"`
	// Tag is the tag a tag policy had chosen, per the lock file.
	Tag string `json:"tag,omitempty"`
}

// LeftAsTag is an image left as a tag, which nothing rolls for when it
// moves.
type LeftAsTag struct {
	Reference string
	// Why: "not resolved", or "no image field" for a value where no
	// image field leads.
	Why       string
	Workloads []renderer.Workload
}

// Len is the number of images that changed: moved, added or removed.
func (cs *ChangeSet) Len() int { return len(cs.Moved) + len(cs.Added) + len(cs.Removed) }

// changes compares the images of a run with prev (nil: nothing to
// compare with). It returns the change set and each image's previous
// digest, by Image.Reference. Images the manifests pinned are compared
// with an output only: a lock file never holds them.
func changes(images []renderer.Image, unpinned []renderer.Unpinned, choices map[string]ReportPolicy, prev *previous) (*ChangeSet, map[string]*Previous) {
	cs := &ChangeSet{Moved: []Change{}, Added: []Change{}, Removed: []Change{}, Unchanged: []string{}}
	before := map[string]*Previous{}
	var used []bool
	if prev != nil {
		cs.Against = prev.against
		used = make([]bool, len(prev.images))
	}
	for _, im := range images {
		written := im.Written
		if written == "" {
			written = im.Reference
		}
		if im.Digest == "" {
			cs.Tags = append(cs.Tags, LeftAsTag{Reference: written, Why: "not resolved", Workloads: im.Workloads})
			continue
		}
		c := Change{Reference: written, Name: im.Reference, Digest: im.Digest, Source: im.Source, Tag: im.Tag, Workloads: im.Workloads}
		i, ok := -1, false
		if prev != nil {
			i, ok = prev.lookup(im, choices[im.Reference].Policy)
		}
		switch {
		case ok:
		case im.Source == resolution.Pinned && (prev == nil || prev.against == AgainstLock || prev.against == AgainstCache):
			// Pinned by the manifests (or digestpin's own output pinned
			// again) and not in the lock file or the cache, which never
			// hold such.
			continue
		default:
			cs.Added = append(cs.Added, c)
			continue
		}
		used[i] = true
		pi := prev.images[i]
		c.Previous = &Previous{Digest: pi.digest, Source: prev.against, Tag: pi.tag}
		before[im.Reference] = c.Previous
		if pi.digest == im.Digest {
			cs.Unchanged = append(cs.Unchanged, written)
			continue
		}
		cs.Moved = append(cs.Moved, c)
	}
	for _, pi := range usedNot(prev, used) {
		name := pi.name
		if name == "" {
			name = pi.repo + "@" + pi.digest
		}
		wl := pi.workloads
		if wl == nil {
			wl = []renderer.Workload{}
		}
		cs.Removed = append(cs.Removed, Change{Reference: pi.written, Name: name, Previous: &Previous{Digest: pi.digest, Source: prev.against, Tag: pi.tag}, Workloads: wl})
	}
	slices.SortStableFunc(cs.Removed, func(a, b Change) int { return strings.Compare(a.Name, b.Name) })
	// The values left as tags, each once, with every field it is in (a
	// chart repeated a hundred times repeats its values).
	at := map[string]int{}
	for _, u := range unpinned {
		i, ok := at[u.Reference]
		if !ok {
			i = len(cs.Tags)
			at[u.Reference] = i
			cs.Tags = append(cs.Tags, LeftAsTag{Reference: u.Reference, Why: "no image field"})
		}
		cs.Tags[i].Workloads = append(cs.Tags[i].Workloads, u.Workload)
	}
	return cs, before
}

// addWaiting adds the images whose new digest waits (waiting, by
// waitKey), in image order.
func (cs *ChangeSet) addWaiting(images []renderer.Image, choices map[string]ReportPolicy, waiting map[string]Pending) {
	if cs == nil || len(waiting) == 0 {
		return
	}
	for _, im := range images {
		w, ok := waiting[waitKey(im.Reference, choices[im.Reference].Policy)]
		if !ok || im.Source != resolution.Held {
			continue
		}
		written := im.Written
		if written == "" {
			written = im.Reference
		}
		cs.Waiting = append(cs.Waiting, Change{Reference: written, Name: im.Reference, Digest: im.Digest, Source: im.Source, Tag: im.Tag, Workloads: im.Workloads, Waiting: &w})
	}
}

// usedNot returns the images of prev that used does not mark.
func usedNot(prev *previous, used []bool) []prevImage {
	if prev == nil {
		return nil
	}
	var out []prevImage
	for i, pi := range prev.images {
		if !used[i] {
			out = append(out, pi)
		}
	}
	return out
}
