package main

import (
	"encoding/json"
	"fmt"

	"github.com/digestpin/digestpin/internal/atomicfile"
	"github.com/digestpin/digestpin/renderer"
)

// reportVersion is the format of the --report file.
const reportVersion = 1

// report is the --report file: every distinct image of a run.
type report struct {
	Version int           `json:"version"`
	Images  []reportImage `json:"images"`
}

// reportImage is one distinct image of a run.
type reportImage struct {
	// Reference is the image as the manifests spell it (the first
	// spelling, when they spell it several ways).
	Reference string `json:"reference"`
	// Name is the fully qualified reference, as the lock file keys it.
	Name string `json:"name"`
	// Platform is the --platform whose manifest Digest is, if any.
	Platform string `json:"platform,omitempty"`
	// Digest is the resolved digest; empty when the image was kept
	// unresolved (--on-error=keep).
	Digest string `json:"digest,omitempty"`
	// Source is where Digest came from: registry, lock, cache, pinned (the
	// manifest carried the digest already) or unresolved.
	Source string `json:"source"`
	// Error is why an unresolved image could not be resolved.
	Error string `json:"error,omitempty"`
	// Workloads are the containers that use the image, in stream order.
	Workloads []renderer.Workload `json:"workloads"`
}

// newReport builds the report of a render. platform is the canonical
// --platform, or "".
func newReport(images []renderer.Image, platform string) report {
	rep := report{Version: reportVersion, Images: make([]reportImage, 0, len(images))}
	for _, im := range images {
		ri := reportImage{
			Reference: im.Written,
			Name:      im.Reference,
			Digest:    im.Digest,
			Source:    string(im.Source),
			Workloads: im.Workloads,
		}
		if ri.Reference == "" {
			ri.Reference = im.Reference
		}
		switch im.Source {
		case renderer.SourcePinned:
		case renderer.SourceNone:
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

// writeReport writes the report of a render to path, atomically.
func writeReport(path string, images []renderer.Image, platform string) error {
	b, err := json.MarshalIndent(newReport(images, platform), "", "  ")
	if err != nil {
		return fmt.Errorf("encoding report: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}
