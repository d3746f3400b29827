// Package fluxoci makes and pushes the OCI artifacts Flux's OCIRepository
// reads, in the format of `flux push artifact`: an OCI image manifest with
// the config media type application/vnd.cncf.flux.config.v1+json, one
// layer application/vnd.cncf.flux.content.v1.tar+gzip holding the files,
// and the source, revision and created annotations. The gzipped tar is
// deterministic (sorted entries, fixed modes, no owners, times or gzip
// name) and the created time is the Unix epoch, as flux push artifact
// --reproducible writes it, so the same files give the same digest. It
// signs artifacts as cosign does with a key: a simple-signing payload
// under the tag sha256-<hex>.sig, which an OCIRepository's spec.verify
// (provider cosign) reads.
package fluxoci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"
)

// The media types and annotations of Flux's artifacts.
const (
	ConfigMediaType    types.MediaType = "application/vnd.cncf.flux.config.v1+json"
	ContentMediaType   types.MediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"
	SourceAnnotation                   = "org.opencontainers.image.source"
	RevisionAnnotation                 = "org.opencontainers.image.revision"
	CreatedAnnotation                  = "org.opencontainers.image.created"
	// SimpleSigningMediaType is the media type of cosign's signature layer.
	SimpleSigningMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds the base64 signature of the payload.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
)

// File is one file of an artifact: its slash-separated path and content.
type File struct {
	Name string
	Data []byte
}

// ReadDir reads the regular files under dir, in lexical order, as the
// files of an artifact (named relative to dir). A symbolic link or other
// special file is an error: the artifact holds what the folder shows.
func ReadDir(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p) //nolint:gosec // G122: a file of the folder the user named
		if err != nil {
			return err
		}
		files = append(files, File{Name: filepath.ToSlash(rel), Data: b})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the folder %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("reading the folder %s: no files in it", dir)
	}
	return files, nil
}

// epoch is the created time of every artifact: the content alone makes
// the digest.
var epoch = time.Unix(0, 0).UTC()

// Tarball is the deterministic gzipped tar of files, which must be in
// lexical order with no name twice: the folder ".", then each folder
// before its files, mode 0755 for folders and 0644 for files, owner 0,
// no user or group name, zero times; the gzip header carries no name
// and no time.
func Tarball(files []File) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	dirs := map[string]bool{}
	dir := func(n string) error {
		if dirs[n] {
			return nil
		}
		dirs[n] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: n, Mode: 0o755, Format: tar.FormatPAX})
	}
	if err := dir("."); err != nil {
		return nil, err
	}
	prev := ""
	for _, f := range files {
		if f.Name <= prev || !fs.ValidPath(f.Name) || f.Name == "." {
			return nil, fmt.Errorf("making the artifact: file name %q is not a clean relative path in order", f.Name)
		}
		prev = f.Name
		// The folders of the path, outermost first.
		for i := range len(f.Name) {
			if f.Name[i] == '/' {
				if err := dir(f.Name[:i]); err != nil {
					return nil, err
				}
			}
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.Name, Mode: 0o644, Size: int64(len(f.Data)), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Artifact is the Flux artifact of files with the source and revision
// annotations (either may be empty, as flux push artifact allows).
func Artifact(files []File, source, revision string) (v1.Image, error) {
	tgz, err := Tarball(files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tgz)), nil
	}, tarball.WithMediaType(ContentMediaType))
	if err != nil {
		return nil, fmt.Errorf("making the artifact's layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ConfigMediaType)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("making the artifact's config: %w", err)
	}
	cf.Created = v1.Time{Time: epoch}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("making the artifact's config: %w", err)
	}
	img = mutate.Annotations(img, map[string]string{
		CreatedAnnotation:  epoch.Format(time.RFC3339),
		SourceAnnotation:   source,
		RevisionAnnotation: revision,
	}).(v1.Image)
	if img, err = mutate.Append(img, mutate.Addendum{Layer: layer}); err != nil {
		return nil, fmt.Errorf("making the artifact: %w", err)
	}
	return img, nil
}

// Outcome is what Push did.
type Outcome struct {
	// Digest is the artifact's digest in the registry: the one pushed,
	// or the one already there when the content was unchanged.
	Digest name.Digest
	// Pushed says that the artifact was pushed; false when the tag already
	// held the same content.
	Pushed bool
	// Same says that the tag held this very artifact (same digest), not
	// only the same content under another revision.
	Same bool
}

// Push pushes img to ref unless ref already holds an artifact of the same
// content (the same layer): then it pushes nothing and says which digest
// the tag holds, so that a run with a new revision and the same files
// moves nothing in the cluster.
func Push(ctx context.Context, ref name.Tag, img v1.Image, opts ...remote.Option) (*Outcome, error) {
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	h, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("digesting the artifact for %s: %w", ref, err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		return nil, fmt.Errorf("reading the artifact's layer for %s: %w", ref, err)
	}
	lh, err := layers[0].Digest()
	if err != nil {
		return nil, fmt.Errorf("digesting the artifact's layer for %s: %w", ref, err)
	}
	desc, err := remote.Get(ref, opts...)
	var terr *transport.Error
	switch {
	case errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound:
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", ref, err)
	case desc.Digest == h:
		return &Outcome{Digest: ref.Context().Digest(h.String()), Same: true}, nil
	default:
		var m v1.Manifest
		if json.Unmarshal(desc.Manifest, &m) == nil && m.Config.MediaType == ConfigMediaType &&
			len(m.Layers) == 1 && m.Layers[0].Digest == lh {
			return &Outcome{Digest: ref.Context().Digest(desc.Digest.String())}, nil
		}
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		return nil, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return &Outcome{Digest: ref.Context().Digest(h.String()), Pushed: true}, nil
}

// Payload is cosign's simple-signing payload for d.
func Payload(d name.Digest) ([]byte, error) {
	return json.Marshal(map[string]any{
		"critical": map[string]any{
			"identity": map[string]string{"docker-reference": d.Context().Name()},
			"image":    map[string]string{"docker-manifest-digest": d.DigestStr()},
			"type":     "cosign container image signature",
		},
		"optional": nil,
	})
}

// Sign signs d with signer as cosign sign --key does without a
// transparency log: the payload and its signature as the one layer of
// the manifest tagged sha256-<hex>.sig (replacing one that is there).
func Sign(ctx context.Context, d name.Digest, signer signature.Signer, opts ...remote.Option) error {
	payload, err := Payload(d)
	if err != nil {
		return fmt.Errorf("signing %s: %w", d, err)
	}
	sig, err := signer.SignMessage(bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("signing %s: %w", d, err)
	}
	l := static.NewLayer(payload, SimpleSigningMediaType)
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:       l,
		Annotations: map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return fmt.Errorf("signing %s: %w", d, err)
	}
	tag, err := signatureTag(d)
	if err != nil {
		return fmt.Errorf("signing %s: %w", d, err)
	}
	if err := remote.Write(tag, img, append([]remote.Option{remote.WithContext(ctx)}, opts...)...); err != nil {
		return fmt.Errorf("pushing the signature of %s to %s: %w", d, tag, err)
	}
	return nil
}

// signatureTag is cosign's signature tag of d: sha256-<hex>.sig in d's
// repository.
func signatureTag(d name.Digest) (name.Tag, error) {
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		return name.Tag{}, err
	}
	return d.Context().Tag(h.Algorithm + "-" + h.Hex + ".sig"), nil
}
