package renderer

import (
	"fmt"
	"strings"
)

// Mode is the form in which a resolved image is written back.
type Mode string

const (
	// ModePin writes "name:tag@sha256:…": the tag stays readable, the
	// digest decides what is pulled. An image written without a tag gets
	// ":latest", the tag that was resolved.
	ModePin Mode = "pin"
	// ModeDigest writes "name@sha256:…".
	ModeDigest Mode = "digest"
	// ModeAnnotate leaves image fields as they are; only the checksum
	// annotation follows the digests.
	ModeAnnotate Mode = "annotate"
)

// ParseMode parses the --mode flag's value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModePin, ModeDigest, ModeAnnotate:
		return m, nil
	}
	return "", fmt.Errorf("parsing mode %q: want pin, digest or annotate", s)
}

// splitImage splits an image reference as written into its name, its tag
// (without ":") and its digest (without "@"), keeping the user's spelling:
// "localhost:5000/app:1.2@sha256:ab" → "localhost:5000/app", "1.2",
// "sha256:ab".
func splitImage(image string) (repo, tag, digest string) {
	repo, digest, _ = strings.Cut(image, "@")
	// A tag is the part after the last ":" that follows the last "/"; a
	// ":" before it belongs to a registry port.
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo, tag = repo[:i], repo[i+1:]
	}
	return repo, tag, digest
}

// pinnedForm returns image pinned to digest in the given mode's form, the
// name spelt as the user wrote it. ModeAnnotate yields the ModePin form,
// which is what its checksum covers.
func pinnedForm(image, digest string, mode Mode) string {
	repo, tag, had := splitImage(image)
	if mode == ModeDigest {
		return repo + "@" + digest
	}
	switch {
	case tag != "":
		return repo + ":" + tag + "@" + digest
	case had != "":
		return repo + "@" + digest
	default:
		return repo + ":latest@" + digest
	}
}
