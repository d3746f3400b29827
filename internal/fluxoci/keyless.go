package fluxoci

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/digestpin/digestpin/internal/oneline"
)

// The in-toto statement cosign v3 signs for an image, and how it attaches
// the bundle: an OCI referrer whose config is the empty descriptor.
const (
	// SignPredicateType is the predicate of cosign sign's statement.
	SignPredicateType = "https://sigstore.dev/cosign/sign/v1"
	// BundleMediaType is the media type of a Sigstore bundle v0.3, the
	// referrer's artifactType and layer.
	BundleMediaType types.MediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// EmptyMediaType is the OCI empty descriptor's, the referrer's config.
	EmptyMediaType types.MediaType = "application/vnd.oci.empty.v1+json"
	// BundleContentAnnotation and BundlePredicateAnnotation are the
	// referrer's annotations that say what the bundle holds.
	BundleContentAnnotation   = "dev.sigstore.bundle.content"
	BundlePredicateAnnotation = "dev.sigstore.bundle.predicateType"
	statementType             = "https://in-toto.io/Statement/v1"
	intotoPayloadType         = "application/vnd.in-toto+json"
)

// Keyless says where a keyless signature gets its certificate and its
// transparency log entry.
type Keyless struct {
	// FulcioURL and RekorURL are the Sigstore instance's certificate
	// authority and transparency log (Rekor's v1 API).
	FulcioURL, RekorURL string
	// Token is the OIDC identity token Fulcio issues the certificate for.
	Token string
	// Timeout bounds each request to Fulcio and to Rekor.
	Timeout time.Duration
	// Transport carries the requests to Fulcio; nil is Go's default.
	Transport http.RoundTripper
}

// Identity is whom a keyless certificate names.
type Identity struct {
	// Subject is the certificate's subject alternative name: an email, or
	// a URI such as a CI workflow's.
	Subject string
	// Issuer is the OIDC issuer the certificate names.
	Issuer string
	// Expires is when the certificate stops being valid.
	Expires time.Time
}

// CheckToken refuses an identity token that is no JWT, names no issuer
// or has expired at now, without checking its signature (Fulcio checks
// it): before any key is made or anything pushed.
func CheckToken(token string, now time.Time) error {
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return errors.New("the identity token is no JWT (three base64url parts joined by dots)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return fmt.Errorf("the identity token's claims are not base64url: %w", err)
	}
	var c struct {
		Iss string
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("the identity token's claims are not JSON: %w", err)
	}
	if c.Iss == "" {
		return errors.New("the identity token names no issuer (iss)")
	}
	if exp := time.Unix(c.Exp, 0).UTC(); c.Exp != 0 && !now.Before(exp) {
		return fmt.Errorf("the identity token from %s expired at %s", c.Iss, exp.Format(time.RFC3339))
	}
	return nil
}

// Statement is the in-toto statement cosign sign signs for d: d's digest
// as the subject, the predicate type SignPredicateType, an empty predicate.
func Statement(d name.Digest) ([]byte, error) {
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		return nil, fmt.Errorf("reading the digest of %s: %w", d, err)
	}
	return json.Marshal(map[string]any{
		"_type":         statementType,
		"subject":       []any{map[string]any{"digest": map[string]string{h.Algorithm: h.Hex}}},
		"predicateType": SignPredicateType,
		"predicate":     map[string]any{},
	})
}

// SignKeyless signs d as cosign sign does without a key: an ephemeral key
// signs d's Statement as a DSSE envelope; Fulcio certifies the key for the
// token's identity, with the certificate transparency log's timestamp in
// it; Rekor logs the signature. It returns the bundle (v0.3, JSON), which
// Attach pushes, and the identity the certificate names (for a CI
// system's token, Fulcio's own reading of it, e.g. a workflow's URI, not
// the token's sub). Nothing is pushed here.
func SignKeyless(ctx context.Context, d name.Digest, k Keyless) ([]byte, Identity, error) {
	stmt, err := Statement(d)
	if err != nil {
		return nil, Identity{}, err
	}
	kp, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		return nil, Identity{}, fmt.Errorf("making a signing key for %s: %w", d, err)
	}
	b, err := sign.Bundle(&sign.DSSEData{Data: stmt, PayloadType: intotoPayloadType}, kp, sign.BundleOptions{
		CertificateProvider: sign.NewFulcio(&sign.FulcioOptions{
			BaseURL: k.FulcioURL, Timeout: k.Timeout, Retries: 1, Transport: k.Transport,
		}),
		CertificateProviderOptions: &sign.CertificateProviderOptions{IDToken: k.Token},
		TransparencyLogs: []sign.Transparency{sign.NewRekor(&sign.RekorOptions{
			BaseURL: k.RekorURL, Timeout: k.Timeout, Retries: 1, Version: 1,
		})},
		Context: ctx,
	})
	if err != nil {
		return nil, Identity{}, fmt.Errorf("signing %s keylessly (Fulcio %s, Rekor %s): %w", d, k.FulcioURL, k.RekorURL, flatError{err})
	}
	cert, err := x509.ParseCertificate(b.GetVerificationMaterial().GetCertificate().GetRawBytes())
	if err != nil {
		return nil, Identity{}, fmt.Errorf("reading the certificate Fulcio %s issued for %s: %w", k.FulcioURL, d, err)
	}
	sum, err := certificate.SummarizeCertificate(cert)
	if err != nil {
		return nil, Identity{}, fmt.Errorf("reading the certificate Fulcio %s issued for %s: %w", k.FulcioURL, d, err)
	}
	j, err := marshalBundle(b)
	return j, Identity{Subject: sum.SubjectAlternativeName, Issuer: sum.Issuer, Expires: cert.NotAfter}, err
}

// marshalBundle is b as the JSON of a bundle file.
func marshalBundle(b *protobundle.Bundle) ([]byte, error) {
	j, err := protojson.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("writing the signature bundle: %w", err)
	}
	return j, nil
}

// flatError is an error on one line of bounded length: sigstore-go's
// errors carry a service's answer, which may span lines.
type flatError struct{ err error }

func (e flatError) Error() string { return oneline.Of(e.err.Error(), 400) }
func (e flatError) Unwrap() error { return e.err }

// Attach pushes bundleJSON as cosign v3 attaches a signature bundle to d:
// an OCI image manifest of artifactType BundleMediaType, with the empty
// config, the bundle as its one layer, the bundle annotations and d as its
// subject. go-containerregistry keeps the referrers tag (sha256-<hex>) up
// to date for a registry without the referrers API.
func Attach(ctx context.Context, d name.Digest, bundleJSON []byte, opts ...remote.Option) error {
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	subject, err := remote.Head(d, opts...)
	if err != nil {
		return fmt.Errorf("reading %s to attach its signature: %w", d, err)
	}
	repo := d.Context()
	config := static.NewLayer([]byte("{}"), EmptyMediaType)
	layer := static.NewLayer(bundleJSON, BundleMediaType)
	descs := make([]v1.Descriptor, 2)
	for i, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(repo, l, opts...); err != nil {
			return fmt.Errorf("pushing the signature of %s: %w", d, err)
		}
		h, _ := l.Digest()
		n, _ := l.Size()
		mt, _ := l.MediaType()
		descs[i] = v1.Descriptor{MediaType: mt, Digest: h, Size: n}
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  string(BundleMediaType),
		Config:        descs[0],
		Layers:        descs[1:],
		Subject:       &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations: map[string]string{
			CreatedAnnotation:         time.Now().UTC().Format(time.RFC3339),
			BundleContentAnnotation:   "dsse-envelope",
			BundlePredicateAnnotation: SignPredicateType,
		},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("writing the signature manifest of %s: %w", d, err)
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("digesting the signature manifest of %s: %w", d, err)
	}
	if err := remote.Put(repo.Digest(h.String()), rawManifest(raw), opts...); err != nil {
		return fmt.Errorf("pushing the signature of %s: %w", d, err)
	}
	return nil
}

// rawManifest is an OCI image manifest's bytes, pushed as they are.
type rawManifest []byte

func (r rawManifest) RawManifest() ([]byte, error) { return r, nil }
func (r rawManifest) MediaType() (types.MediaType, error) {
	return types.OCIManifestSchema1, nil
}

// maxReferrers bounds the referrers Signed reads: a registry that lists
// more makes it sign again, not read without end.
const maxReferrers = 64

// Signed says whether d already carries a signature of the kind asked
// for: keyless, a referrer that is a bundle of cosign sign's statement;
// else cosign's signature tag sha256-<hex>.sig. A run that finds its files
// unchanged asks it, so that an artifact pushed by a run whose signing
// failed is signed by the next, not left unsigned for good.
func Signed(ctx context.Context, d name.Digest, keyless bool, opts ...remote.Option) (bool, error) {
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	if !keyless {
		tag, err := signatureTag(d)
		if err != nil {
			return false, fmt.Errorf("reading the digest of %s: %w", d, err)
		}
		_, err = remote.Head(tag, opts...)
		var terr *transport.Error
		switch {
		case errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound:
			return false, nil
		case err != nil:
			return false, fmt.Errorf("reading the signature of %s: %w", d, err)
		}
		return true, nil
	}
	idx, err := remote.Referrers(d, opts...)
	if err != nil {
		return false, fmt.Errorf("listing the referrers of %s: %w", d, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return false, fmt.Errorf("listing the referrers of %s: %w", d, err)
	}
	// Each candidate costs a GET: those the listing says are something
	// else are skipped (a registry that lists the config's media type as
	// the artifactType, as go-containerregistry's does, lists a bundle as
	// the empty one), and at most maxReferrers are read.
	read := 0
	for _, desc := range im.Manifests {
		if at := desc.ArtifactType; at != "" && at != string(BundleMediaType) && at != string(EmptyMediaType) {
			continue
		}
		if read++; read > maxReferrers {
			break
		}
		got, err := remote.Get(d.Context().Digest(desc.Digest.String()), opts...)
		if err != nil {
			return false, fmt.Errorf("reading the referrer %s of %s: %w", desc.Digest, d, err)
		}
		var m v1.Manifest
		if json.Unmarshal(got.Manifest, &m) == nil && m.ArtifactType == string(BundleMediaType) &&
			m.Annotations[BundlePredicateAnnotation] == SignPredicateType {
			return true, nil
		}
	}
	return false, nil
}
