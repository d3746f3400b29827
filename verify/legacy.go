package verify

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/digestpin/digestpin/resolve"
)

// legacy reads cosign's legacy signatures of d: the layers of the
// manifest tagged sha256-<hex>.sig, each a simple-signing payload with its
// signature, certificate, chain, Rekor bundle and timestamp in
// annotations. No such tag is no signature, not an error.
func (v *Verifier) legacy(ctx context.Context, d name.Digest) ([]*candidate, error) {
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		return nil, err
	}
	tag := d.Context().Tag(legacyTag(h))
	b, _, err := v.reg.Manifest(ctx, tag)
	if errors.Is(err, resolve.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m v1.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return []*candidate{{where: "tag " + tag.TagStr(), err: fmt.Errorf("tag %s: not a manifest", tag.TagStr())}}, nil
	}
	var cands []*candidate
	for i, l := range m.Layers {
		if l.MediaType != simpleSigningLayer {
			continue
		}
		if len(cands) == MaxCandidates {
			break
		}
		c := &candidate{where: fmt.Sprintf("tag %s layer %d", tag.TagStr(), i+1), digest: l.Digest.String()}
		cands = append(cands, c)
		if err := v.readLegacy(ctx, d, h, l, c); err != nil {
			c.err = fmt.Errorf("%s: %w", c.where, err)
		}
	}
	return cands, nil
}

// simpleSigning is the part of cosign's simple-signing payload that is
// checked: what it says it signs.
type simpleSigning struct {
	Critical struct {
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// rekorBundle is cosign's dev.sigstore.cosign/bundle annotation.
type rekorBundle struct {
	SignedEntryTimestamp []byte `json:"SignedEntryTimestamp"`
	Payload              struct {
		Body           string `json:"body"`
		IntegratedTime int64  `json:"integratedTime"`
		LogIndex       int64  `json:"logIndex"`
		LogID          string `json:"logID"`
	} `json:"Payload"`
}

// readLegacy reads one simple-signing layer into c.
func (v *Verifier) readLegacy(ctx context.Context, d name.Digest, h v1.Hash, l v1.Descriptor, c *candidate) error {
	if l.Size > MaxBundleSize {
		return fmt.Errorf("a payload of %d bytes, more than %d", l.Size, MaxBundleSize)
	}
	payload, err := v.reg.Blob(ctx, d.Context(), l.Digest, MaxBundleSize)
	if err != nil {
		return err
	}
	var ss simpleSigning
	if err := json.Unmarshal(payload, &ss); err != nil {
		return errors.New("not a simple-signing payload")
	}
	if ss.Critical.Image.DockerManifestDigest != h.String() {
		return fmt.Errorf("a signature of another digest (%.80s)", ss.Critical.Image.DockerManifestDigest)
	}
	sig, err := base64.StdEncoding.DecodeString(l.Annotations[annotationSignature])
	if err != nil || len(sig) == 0 {
		return errors.New("no signature annotation")
	}
	sum := sha256.Sum256(payload)
	e := &legacyEntity{sig: bundle.NewMessageSignature(sum[:], "SHA2_256", sig)}
	if pemCert := l.Annotations[annotationCertificate]; pemCert != "" {
		certs, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(pemCert))
		if err != nil || len(certs) != 1 {
			return errors.New("certificate annotation is not one PEM certificate")
		}
		e.cert = certs[0]
	}
	if rb := l.Annotations[annotationRekorBundle]; rb != "" {
		var b rekorBundle
		if err := json.Unmarshal([]byte(rb), &b); err != nil {
			return errors.New("the Rekor bundle annotation is not one")
		}
		body, err := base64.StdEncoding.DecodeString(b.Payload.Body)
		if err != nil {
			return errors.New("the Rekor bundle's body is not base64")
		}
		logID, err := hex.DecodeString(b.Payload.LogID)
		if err != nil {
			return errors.New("the Rekor bundle's log ID is not hex")
		}
		entry, err := tlog.NewEntry(body, b.Payload.IntegratedTime, b.Payload.LogIndex, logID, b.SignedEntryTimestamp, nil) //nolint:staticcheck // cosign's legacy bundles are Rekor v1 entries, which is what NewEntry reads.
		if err != nil {
			return fmt.Errorf("the Rekor bundle's entry: %s", oneLine(err.Error()))
		}
		e.tlog = []*tlog.Entry{entry}
	}
	if ts := l.Annotations[annotationTimestamp]; ts != "" {
		var t struct {
			SignedRFC3161Timestamp []byte `json:"SignedRFC3161Timestamp"`
		}
		if err := json.Unmarshal([]byte(ts), &t); err != nil {
			return errors.New("the timestamp annotation is not one")
		}
		e.timestamps = [][]byte{t.SignedRFC3161Timestamp}
	}
	c.entity, c.payload = e, payload
	return nil
}

// legacyEntity is a legacy signature as sigstore-go verifies it: a message
// signature over the payload, with a key or a certificate, and a Rekor
// entry with its signed entry timestamp (an inclusion promise, as in
// bundles of version 0.1).
type legacyEntity struct {
	sig        *bundle.MessageSignature
	cert       *x509.Certificate
	tlog       []*tlog.Entry
	timestamps [][]byte
}

var _ sgverify.SignedEntity = (*legacyEntity)(nil)

func (e *legacyEntity) HasInclusionPromise() bool { return len(e.tlog) > 0 }
func (e *legacyEntity) HasInclusionProof() bool   { return false }
func (e *legacyEntity) Version() (string, error)  { return "v0.1", nil }
func (e *legacyEntity) Timestamps() ([][]byte, error) {
	return e.timestamps, nil
}
func (e *legacyEntity) TlogEntries() ([]*tlog.Entry, error) { return e.tlog, nil }
func (e *legacyEntity) SignatureContent() (sgverify.SignatureContent, error) {
	return e.sig, nil
}

func (e *legacyEntity) VerificationContent() (sgverify.VerificationContent, error) {
	if e.cert == nil {
		return &bundle.PublicKey{}, nil
	}
	// The intermediates come from the trusted root, as for Fulcio's
	// certificates in bundles; the chain annotation is not trusted.
	return bundle.NewCertificate(e.cert), nil
}
