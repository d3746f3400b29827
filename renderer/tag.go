package renderer

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/digestpin/digestpin/internal/imageref"
	"github.com/digestpin/digestpin/resolution"
)

// A tag policy (see resolution.Resolution.Tag) chooses the tag an image
// is pinned to. Between resolving and rewriting, the renderer carries the
// choice with the digest as one string, a "pin": the digest ("sha256:…"),
// or the chosen tag and the digest ("1.4.7@sha256:…"). A digest holds no
// "@", so the two cannot be confused.

// pinOf returns the pin of a resolved image: "" when it was kept
// unresolved.
func pinOf(im Image) string {
	if im.Tag == "" || im.Digest == "" {
		return im.Digest
	}
	return im.Tag + "@" + im.Digest
}

// pinnedTo returns image pinned to pin in the given mode's form, as
// pinnedForm does, with the tag a policy chose in place of the tag as
// written: "shop/web:1.4" pinned to "1.4.7@sha256:…" is
// "shop/web:1.4.7@sha256:…" in ModePin, "shop/web@sha256:…" in
// ModeDigest.
func pinnedTo(image, pin string, mode Mode) string {
	tag, digest, chosen := strings.Cut(pin, "@")
	if !chosen {
		return pinnedForm(image, pin, mode)
	}
	repo, _, _ := splitImage(image)
	return pinnedForm(repo+":"+tag, digest, mode)
}

// checkTag checks the tag a resolver chose for ref ("" for none): what
// goes into the manifest must be a tag, whatever the resolver says. In
// ModeAnnotate no tag may be chosen: the image field would keep the tag
// as written, and the pods would run another image than the checksum
// covers.
func checkTag(ctx context.Context, ref name.Reference, tag string, mode Mode) error {
	if tag == "" {
		return nil
	}
	if mode == ModeAnnotate {
		m := resolution.OptionName(ctx, "Mode")
		return fmt.Errorf("resolving %s: a tag policy chose %s, but %s %s keeps the tag as written; use %s %s or %s", ref, tag, m, ModeAnnotate, m, ModePin, ModeDigest)
	}
	if _, err := name.NewTag(ref.Context().Name()+":"+tag, name.StrictValidation); err != nil {
		return fmt.Errorf("resolving %s: resolver chose an invalid tag %q: %w", ref, tag, err)
	}
	if !imageref.ValidTag(tag) {
		return fmt.Errorf("resolving %s: resolver chose an invalid tag %q, which the kubelet refuses: want %s", ref, tag, imageref.TagRule)
	}
	return nil
}
