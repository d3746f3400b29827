package pin

import (
	"encoding/json"
	"fmt"

	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/verification"
)

// ReportVersion is the format of the report file.
const ReportVersion = 1

// Report is the report file: every distinct image of a run.
type Report struct {
	Version int           `json:"version"`
	Images  []ReportImage `json:"images"`
	// Generated is what a deterministic render generated (Options.Generated);
	// absent for a stream that was not rendered so.
	Generated *Generated `json:"generated,omitempty"`
	// Unpinned are the values that look like image references left as
	// tags, in stream order (renderer.Unpinned): no entry of Images, and
	// no lock file, covers them. Absent when there are none.
	Unpinned []renderer.Unpinned `json:"unpinned,omitempty"`
	// Changes is what the run changed against the previous state it
	// knows (a lock file, a previous output or the cache); absent when
	// there was none.
	Changes *ChangeSet `json:"changes,omitempty"`
}

// ReportImage is one distinct image of a run.
type ReportImage struct {
	// Reference is the image as the manifests spell it (the first
	// spelling, when they spell it several ways).
	Reference string `json:"reference"`
	// Name is the fully qualified reference, as the lock file keys it.
	Name string `json:"name"`
	// Platform is the platform whose manifest Digest is, if any.
	Platform string `json:"platform,omitempty"`
	// Digest is the resolved digest; empty when the image was kept
	// unresolved (--on-error=keep).
	Digest string `json:"digest,omitempty"`
	// MediaType is what Digest is: an index or one image's manifest;
	// absent when not known.
	MediaType string `json:"mediaType,omitempty"`
	// Previous is the digest of the previous state (a lock file, a
	// previous output or the cache), when it had the image.
	Previous *Previous `json:"previous,omitempty"`
	// Source is where Digest came from: registry, lock, cache, pinned (the
	// manifest carried the digest already) or unresolved.
	Source resolution.Source `json:"source"`
	// Mirror is the registry host of the mirror that answered for the
	// image's registry, with source registry; absent when the registry
	// itself answered.
	Mirror string `json:"mirror,omitempty"`
	// Error is why an unresolved image could not be resolved.
	Error string `json:"error,omitempty"`
	// Workloads are the containers that use the image, in stream order.
	Workloads []renderer.Workload `json:"workloads"`
	// Policy is the tag policy that chose the image's tag; absent for an
	// image that follows its own tag.
	Policy *ReportPolicy `json:"policy,omitempty"`
	// Verified is the signature policy the digest holds under and who
	// signed it; absent for an image no signature policy covers.
	Verified *ReportVerified `json:"verified,omitempty"`
	// Waiting is the new digest that a waiting period (--min-age) holds
	// back, and until when; Digest (source held) stays pinned until
	// then. Absent when none waits.
	Waiting *Pending `json:"waiting,omitempty"`
}

// ReportVerified is the signature verification of an image.
type ReportVerified struct {
	// Policy is the signature policy in canonical form.
	Policy string `json:"policy"`
	// Signers are the terms that held, who signed and the bundle; empty
	// for the policy none.
	Signers []verification.Signer `json:"signers"`
}

// addVerified adds the verifications, by image name.
func (r *Report) addVerified(recs map[string]*verification.Record) {
	for i, im := range r.Images {
		if rec := recs[im.Name]; rec != nil {
			r.Images[i].Verified = &ReportVerified{Policy: rec.Policy, Signers: append([]verification.Signer{}, rec.Signers...)}
		}
	}
}

// addWaiting adds the digests that wait, by image name.
func (r *Report) addWaiting(choices map[string]ReportPolicy, waiting map[string]Pending) {
	for i, im := range r.Images {
		if w, ok := waiting[waitKey(im.Name, choices[im.Name].Policy)]; ok && im.Source == resolution.Held {
			r.Images[i].Waiting = &w
		}
	}
}

// addChanges adds the change set, when there was a previous state, and
// each image's previous digest, by image name.
func (r *Report) addChanges(cs *ChangeSet, previous map[string]*Previous) {
	if cs == nil || cs.Against == "" {
		return
	}
	r.Changes = cs
	for i, im := range r.Images {
		r.Images[i].Previous = previous[im.Name]
	}
}

// NewReport builds the report of a render. platform is the canonical
// platform the digests were resolved for, or "".
func NewReport(images []renderer.Image, platform string) Report {
	rep := Report{Version: ReportVersion, Images: make([]ReportImage, 0, len(images))}
	for _, im := range images {
		ri := ReportImage{
			Reference: im.Written,
			Name:      im.Reference,
			Digest:    im.Digest,
			Source:    im.Source,
			Mirror:    im.Mirror,
			MediaType: im.MediaType,
			Workloads: im.Workloads,
		}
		if ri.Reference == "" {
			ri.Reference = im.Reference
		}
		switch im.Source {
		case resolution.Pinned:
		case resolution.Unresolved:
			if im.Err != nil {
				ri.Error = im.Err.Error()
			}
		default:
			ri.Platform = platform
		}
		if ri.Workloads == nil {
			ri.Workloads = []renderer.Workload{}
		}
		rep.Images = append(rep.Images, ri)
	}
	return rep
}

// marshal returns the report file's bytes.
func (r Report) marshal() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding report: %w", err)
	}
	return append(b, '\n'), nil
}
