package pin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/lockfile"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
)

// The sources of a previous digest (Previous.Source, ChangeSet.Against).
const (
	// AgainstLock is a lock file: Options.Lock, or else the
	// Options.WriteLock file as it was before the run.
	AgainstLock = "lock"
	// AgainstOutput is a previous output (Options.DiffAgainst).
	AgainstOutput = "output"
	// AgainstCache is the resolution cache as it was before the run (a
	// run with a cache and neither a lock file nor DiffAgainst): per
	// image, the last digest it recorded, past the TTL too.
	AgainstCache = "cache"
	// AgainstFile is the digests a file held before the run: the images
	// entries that digestpin flux pin wrote into a Flux object's file. No
	// Pinner compares with it; its caller builds the ChangeSet.
	AgainstFile = "file"
)

// previous is what a run compares its images with: the digests of a
// lock file, those a previous output pinned, or the last ones the cache
// recorded. It is read once per Pin
// and used by one goroutine.
type previous struct {
	against string // AgainstLock, AgainstOutput or AgainstCache
	images  []prevImage
	// byName indexes images by name and, for a lock file, tag policy
	// ("name\x00policy").
	byName map[string]int
	// byWorkload indexes the images of an output by the workloads that
	// used them, for references without a tag (an output of the digest
	// mode writes name@digest).
	byWorkload map[renderer.Workload]int
	// snap is the pod templates and Secrets of an output, to compare
	// with the run's (objects.go).
	snap *renderer.Snapshot
}

// prevImage is one image of the previous state.
type prevImage struct {
	name      string // fully qualified, without digest; "" for repo@digest
	repo      string // fully qualified repository
	written   string // as the lock file or the output spelt it, without digest
	digest    string
	tag       string              // the tag a policy chose (a lock file)
	workloads []renderer.Workload // those of an output
}

// previousState reads the state the run is compared with: the
// DiffAgainst output, else the Lock file (already read into the chain),
// else the WriteLock file as it is now, if it exists, else the cache as
// it was before the run. It returns nil when there is none.
func (p *Pinner) previousState(ctx context.Context, c *chain, images []renderer.Image, choices map[string]ReportPolicy) (*previous, error) {
	o := &p.o
	lock, platform := c.lock, c.platform
	switch {
	case o.DiffAgainst != "":
		b, err := os.ReadFile(o.DiffAgainst)
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		if err != nil {
			return nil, fmt.Errorf("reading earlier output %s: %w", o.DiffAgainst, err)
		}
		prev, err := p.fromOutput(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("reading earlier output %s: %w", o.DiffAgainst, err)
		}
		return prev, nil
	case lock != nil:
		return previousLock(lock, platform), nil
	case o.WriteLock != "":
		// The file the run replaces: a first lock file has nothing to
		// compare with, and one that cannot be read is replaced all
		// the same.
		l, err := c.replacedLock()
		if err != nil {
			o.warnf("the change set compares with nothing: %v", err)
		}
		if l == nil {
			return nil, nil
		}
		return previousLock(l, platform), nil
	case c.cache != nil:
		// A cache that held none of the images (a first run, a cache
		// flushed) is nothing to compare with, as a first lock file:
		// every image would be added, each asking for a build time.
		prev := previousCache(ctx, c.cache, c.minAge, images, choices)
		if len(prev.images) == 0 && slices.ContainsFunc(images, func(im renderer.Image) bool {
			return im.Digest != "" && im.Source != resolution.Pinned && im.Source != resolution.Unresolved
		}) {
			return nil, nil
		}
		return prev, nil
	}
	return nil, nil
}

// previousLock is the previous state of a lock file: its entries for
// platform.
func previousLock(l *lockfile.Lock, platform string) *previous {
	prev := &previous{against: AgainstLock, byName: map[string]int{}}
	for _, e := range l.Entries() {
		if e.Platform != platform {
			continue
		}
		repo := e.Reference
		if t, err := name.NewTag(e.Reference); err == nil {
			repo = t.Context().Name()
		}
		prev.byName[e.Reference+"\x00"+e.Policy] = len(prev.images)
		prev.images = append(prev.images, prevImage{name: e.Reference, repo: repo, written: e.Reference, digest: e.Digest, tag: e.Tag})
	}
	return prev
}

// kindKey finds a top-level kind in a YAML or JSON stream.
var kindKey = regexp.MustCompile(`(?m)^kind:|"kind"\s*:`)

// askNoRegistry is the resolver of a previous output: it asks no registry.
type askNoRegistry struct{}

func (askNoRegistry) Resolve(context.Context, name.Reference) (resolution.Resolution, error) {
	return resolution.Resolution{}, errors.New("not pinned")
}

// fromOutput is the previous state of a manifest stream that digestpin
// wrote: the images it pinned, per workload, read with the renderer's
// settings and never a registry. An image the stream holds as a tag (an
// output of the annotate mode, an image kept unresolved) has no digest
// to compare with, and is left out.
func (p *Pinner) fromOutput(ctx context.Context, b []byte) (*previous, error) {
	if len(bytes.TrimSpace(b)) > 0 && !kindKey.Match(b) {
		return nil, errors.New("not a manifest stream: no document has a kind")
	}
	r := p.o.Renderer
	r.Resolver, r.KeepUnresolved, r.Strict, r.Warnf = askNoRegistry{}, true, false, nil
	out, err := r.Render(ctx, b)
	if err != nil {
		return nil, err
	}
	prev := &previous{against: AgainstOutput, byName: map[string]int{}, byWorkload: map[renderer.Workload]int{}}
	if prev.snap, err = r.Snapshot(b); err != nil {
		return nil, err
	}
	for _, im := range out.Images {
		if im.Source != resolution.Pinned {
			continue
		}
		pi, ok := splitPinned(im.Reference, im.Written)
		if !ok {
			continue
		}
		pi.workloads = im.Workloads
		i := len(prev.images)
		prev.images = append(prev.images, pi)
		if pi.name != "" {
			if _, dup := prev.byName[pi.name+"\x00"]; !dup {
				prev.byName[pi.name+"\x00"] = i
			}
		}
		for _, w := range im.Workloads {
			prev.byWorkload[w] = i
		}
	}
	return prev, nil
}

// splitPinned splits a pinned reference, "name@digest" (the renderer
// drops the tag of a pinned reference), into its repository and digest,
// and takes the name with its tag from how the stream spelt it, written
// ("name:tag@digest"; without a tag, none).
func splitPinned(ref, written string) (prevImage, bool) {
	d, err := name.NewDigest(ref)
	if err != nil {
		return prevImage{}, false
	}
	pi := prevImage{repo: d.Context().Name(), digest: d.DigestStr(), name: taggedName(ref, written)}
	pi.written, _, _ = strings.Cut(written, "@")
	return pi, true
}

// taggedName is the fully qualified name and tag of an image, without a
// digest: ref itself when it has none, else from written, the stream's
// spelling; "" when that has no tag either.
func taggedName(ref, written string) string {
	if !strings.Contains(ref, "@") {
		return ref
	}
	base, _, _ := strings.Cut(written, "@")
	if strings.LastIndex(base, ":") <= strings.LastIndex(base, "/") {
		return ""
	}
	t, err := name.NewTag(base)
	if err != nil {
		return ""
	}
	return t.Name()
}

// lookup returns the previous image of im, the index of it, and whether
// there is one: by name (and tag policy, for a lock file), else, for an
// output, through a workload of im that used the same repository by
// digest alone.
func (prev *previous) lookup(im renderer.Image, policy string) (int, bool) {
	// A reference pinned already, as in digestpin's own output, is
	// looked up by its name and tag.
	tagged := taggedName(im.Reference, im.Written)
	if prev.against == AgainstLock || prev.against == AgainstCache {
		i, ok := prev.byName[tagged+"\x00"+policy]
		return i, ok && tagged != ""
	}
	if i, ok := prev.byName[tagged+"\x00"]; ok && tagged != "" {
		return i, true
	}
	r, err := name.ParseReference(im.Reference)
	if err != nil {
		return 0, false
	}
	repo := r.Context().Name()
	for _, w := range im.Workloads {
		if i, ok := prev.byWorkload[w]; ok && prev.images[i].name == "" && prev.images[i].repo == repo {
			return i, true
		}
	}
	return 0, false
}
