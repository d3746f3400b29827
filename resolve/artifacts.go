package resolve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The methods in this file read what is attached to a digest (its
// signatures and attestations) for package verify. They go through the
// same sessions as resolutions (one ping, one token exchange, the same
// credentials, retries, timeouts and address checks) and hold a slot of
// the same concurrency bound while they ask. Each asks the reference's
// mirrors and then its registry, as a resolution does; an answer of
// "nothing there" (an empty referrers list, a 404) from a mirror moves on
// to the next candidate, since pull-through caches seldom keep what is
// attached to an image. What they return is unverified data from the
// registry: its meaning is the caller's to check.

// ErrNotFound is what the error of Manifest is, by errors.Is, when no
// candidate has the manifest (every one answered 404).
var ErrNotFound = errors.New("not found")

// Referrers returns the descriptors of the manifests that refer to d: the
// OCI 1.1 referrers API, or, where the registry has none, the referrers
// tag schema (the index tagged sha256-<hex>), as go-containerregistry's
// remote.Referrers reads them. The index is at most 100 MiB (the
// go-containerregistry manifest limit) and only its first page is read:
// a registry that pages on without end is not followed. No referrers is
// an empty list, not an error.
func (r *Resolver) Referrers(ctx context.Context, d name.Digest) ([]v1.Descriptor, error) {
	var out []v1.Descriptor
	_, err := r.askFound(ctx, d, func(ctx context.Context, p *remote.Puller, at name.Reference) error {
		idx, err := remote.Referrers(at.Context().Digest(d.DigestStr()), remote.Reuse(p), remote.WithContext(ctx))
		if err != nil {
			return err
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return fmt.Errorf("reading referrers of %s: %w", d, err)
		}
		if len(m.Manifests) == 0 {
			return errNothing
		}
		out = m.Manifests
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing referrers: %w", err)
	}
	return out, nil
}

// Manifest returns the manifest ref names (a tag or a digest) and its
// media type, with GET. A manifest asked for by digest is checked against
// it (go-containerregistry does). Manifests are at most 100 MiB. When no
// candidate has it, the error is ErrNotFound.
func (r *Resolver) Manifest(ctx context.Context, ref name.Reference) ([]byte, types.MediaType, error) {
	var b []byte
	var mt types.MediaType
	found, err := r.askFound(ctx, ref, func(ctx context.Context, p *remote.Puller, at name.Reference) error {
		d, err := p.Get(ctx, at)
		if isNotFound(err) {
			return errNothing
		}
		if err != nil {
			return err
		}
		b, mt = d.Manifest, d.MediaType
		return nil
	})
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("reading manifest: %w", err)
	case !found:
		return nil, "", fmt.Errorf("%s: %w", ref, ErrNotFound)
	}
	return b, mt, nil
}

// Blob returns blob h of repo when it is at most limit bytes, checked
// against h.
func (r *Resolver) Blob(ctx context.Context, repo name.Repository, h v1.Hash, limit int64) ([]byte, error) {
	d := repo.Digest(h.String())
	var b []byte
	found, err := r.askFound(ctx, d, func(ctx context.Context, p *remote.Puller, at name.Reference) error {
		l, err := p.Layer(ctx, at.Context().Digest(h.String()))
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if isNotFound(err) {
			return errNothing
		}
		if err != nil {
			return err
		}
		defer rc.Close()
		// The reader checks the digest at its end: read one byte more
		// than the limit, so that a blob too big is told apart from one
		// that fits, and the check runs on one that fits.
		b, err = io.ReadAll(io.LimitReader(rc, limit+1))
		if err != nil {
			return err
		}
		if int64(len(b)) > limit {
			return fmt.Errorf("blob %s is larger than %d bytes", h, limit)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading blob: %w", err)
	case !found:
		return nil, fmt.Errorf("%s: %w", d, ErrNotFound)
	}
	return b, nil
}

// askFound is ask for a fn that may find nothing at a candidate (an
// empty list, a 404): it returns errNothing then, and the next candidate
// is asked. found is false when no candidate had anything and none
// failed otherwise.
func (r *Resolver) askFound(ctx context.Context, ref name.Reference, fn func(context.Context, *remote.Puller, name.Reference) error) (found bool, err error) {
	err = r.ask(ctx, ref, false, fn)
	var re *resolveError
	if errors.As(err, &re) && !slices.ContainsFunc(re.errs, func(e error) bool { return !errors.Is(e, errNothing) }) {
		return false, nil
	}
	return err == nil, err
}

// errNothing is what a fn of askFound returns when its candidate has
// nothing.
var errNothing = errors.New("nothing there")

// isNotFound reports whether err is a registry's 404.
func isNotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}
