package resolve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// AnnotationCreated is the OCI annotation of a manifest or index that
// says when the image was built (RFC 3339).
const AnnotationCreated = "org.opencontainers.image.created"

// maxBuiltConfig caps what Built reads of an image config: a real one is
// a few kilobytes, and only its "created" is wanted. A larger one (a
// hostile registry, or labels of megabytes) gives no time.
const maxBuiltConfig = 4 << 20

// Built returns when the image of d was built, as its registry says: the
// org.opencontainers.image.created annotation of its manifest (for an
// index, the index's, else that of the platform's manifest) when it holds
// an RFC 3339 time after the Unix epoch, else the "created" of the image config. For an index
// the image is the manifest of the platform given by WithPlatform, else of
// linux/amd64, else the index's first image, as Created chooses. It costs
// a GET of the manifest (and of an index's child) and, without an
// annotation, of the config, at most 4 MiB of it; it asks d's mirrors
// first, as a resolution does, through the same sessions, credentials,
// retries and concurrency bound.
//
// The time is the registry's word, unchecked: a zero time with a nil error
// means the image says none (no annotation, and a config without a
// "created" or with one that is not RFC 3339). Callers decide what to
// make of the Unix epoch (what reproducible builds such as ko and bazel
// write) or of a time in the future. An error names d and what each
// registry answered.
func (r *Resolver) Built(ctx context.Context, d name.Digest) (time.Time, error) {
	var built time.Time
	err := r.ask(ctx, d, false, func(ctx context.Context, p *remote.Puller, at name.Reference) error {
		var err error
		built, err = r.builtAt(ctx, p, at)
		return err
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("reading build time: %w", err)
	}
	return built, nil
}

// builtAt is Built at one registry: at names the digest there.
func (r *Resolver) builtAt(ctx context.Context, p *remote.Puller, at name.Reference) (time.Time, error) {
	desc, err := p.Get(ctx, at)
	if err != nil {
		return time.Time{}, err
	}
	// First the annotations of what the digest names, which cost no
	// request more than the manifest.
	cfg, annotations, err := r.configAndAnnotations(desc)
	if err != nil {
		return time.Time{}, err
	}
	for _, a := range annotations {
		if t, ok := annotated(a); ok {
			return t, nil
		}
	}
	// Then the config, read with a bound: only its "created" is wanted.
	l, err := p.Layer(ctx, at.Context().Digest(cfg.String()))
	if err != nil {
		return time.Time{}, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return time.Time{}, err
	}
	defer rc.Close()
	// One byte more than the bound tells a config too big from one that
	// fits, whose digest the reader checks at its end.
	b, err := io.ReadAll(io.LimitReader(rc, maxBuiltConfig+1))
	if err != nil {
		return time.Time{}, fmt.Errorf("reading image config %s: %w", cfg, err)
	}
	if len(b) > maxBuiltConfig {
		return time.Time{}, fmt.Errorf("reading image config %s: larger than %d bytes", cfg, maxBuiltConfig)
	}
	var c struct {
		Created json.RawMessage `json:"created"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return time.Time{}, fmt.Errorf("reading image config %s: %w", cfg, err)
	}
	var s string
	if json.Unmarshal(c.Created, &s) != nil {
		return time.Time{}, nil // none, or not a string
	}
	t, _ := parseCreated(s)
	return t, nil
}

// configAndAnnotations returns the config digest of the image desc names
// (for an index, of the child that Created chooses), from its manifest,
// and the annotations of what was read on the way, the index's first.
// An index whose annotation says the time gives no config digest: its
// child is not asked for.
func (r *Resolver) configAndAnnotations(desc *remote.Descriptor) (v1.Hash, []map[string]string, error) {
	var annotations []map[string]string
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return v1.Hash{}, nil, fmt.Errorf("reading index: %w", err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return v1.Hash{}, nil, fmt.Errorf("reading index: %w", err)
		}
		annotations = append(annotations, m.Annotations)
		if _, ok := annotated(m.Annotations); ok {
			return v1.Hash{}, annotations, nil
		}
	}
	img, err := r.imageOf(desc)
	if err != nil {
		return v1.Hash{}, nil, err
	}
	// The manifest, not ConfigName, which would read the config to
	// hash it.
	m, err := img.Manifest()
	if err != nil {
		return v1.Hash{}, nil, fmt.Errorf("reading image manifest: %w", err)
	}
	return m.Config.Digest, append(annotations, m.Annotations), nil
}

// parseCreated parses a creation time as an annotation or a config
// holds it: RFC 3339, with or without fractions of a second.
func parseCreated(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// annotated returns the time of the creation annotation among a, when
// it holds one after the Unix epoch: an epoch (a reproducible build's)
// leaves the config to say.
func annotated(a map[string]string) (time.Time, bool) {
	t, ok := parseCreated(a[AnnotationCreated])
	return t, ok && t.After(time.Unix(0, 0))
}
