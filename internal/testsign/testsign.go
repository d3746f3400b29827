// Package testsign makes real signatures for tests: keys generated in the
// test and signed with sigstore-go's signing code, and keyless ones from
// sigstore-go's virtual Sigstore (a real CA, transparency log and
// timestamp authority in process) with a trusted root file made from it;
// and attaches them to images in a loopback registry.
package testsign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/digestpin/digestpin/internal/testregistry"
	"github.com/digestpin/digestpin/resolve"
)

// BundleMediaType is the media type of the bundles Attach attaches.
const BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// PushImage pushes a random image to repo:tag and returns its digest.
func PushImage(t testregistry.TB, reg *testregistry.Registry, repo, tag string) name.Digest {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatalf("%v", err)
	}
	ref, err := name.ParseReference(reg.Host() + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("%v", err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return ref.Context().Digest(h.String())
}

// Statement is an in-toto statement about d with a predicate type.
func Statement(t testregistry.TB, d name.Digest, predicateType string) []byte {
	t.Helper()
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		t.Fatalf("%v", err)
	}
	b, err := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": d.Context().Name(), "digest": map[string]string{"sha256": h.Hex}}},
		"predicateType": predicateType,
		"predicate":     map[string]any{},
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	return b
}

// NewKey makes a key pair of alg and writes its public key to a file.
func NewKey(t testregistry.TB, alg protocommon.PublicKeyDetails) (*sign.EphemeralKeypair, string) {
	t.Helper()
	kp, err := sign.NewEphemeralKeypair(&sign.EphemeralKeypairOptions{Algorithm: alg})
	if err != nil {
		t.Fatalf("%v", err)
	}
	pem, err := kp.GetPublicKeyPem()
	if err != nil {
		t.Fatalf("%v", err)
	}
	path := filepath.Join(tempDir(t), "cosign.pub")
	if err := os.WriteFile(path, []byte(pem), 0o600); err != nil {
		t.Fatalf("%v", err)
	}
	return kp, path
}

// KeyBundle signs a DSSE statement with kp into a bundle's JSON.
func KeyBundle(t testregistry.TB, kp sign.Keypair, stmt []byte) []byte {
	t.Helper()
	b, err := sign.Bundle(&sign.DSSEData{Data: stmt, PayloadType: "application/vnd.in-toto+json"}, kp, sign.BundleOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	j, err := protojson.Marshal(b)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return j
}

// VirtualSigstore is a virtual Sigstore and a trusted root file of it.
type VirtualSigstore struct {
	*ca.VirtualSigstore
	RootFile string
}

// NewVirtualSigstore starts a virtual Sigstore and writes its trusted root.
func NewVirtualSigstore(t testregistry.TB) *VirtualSigstore {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatalf("%v", err)
	}
	// The virtual Sigstore's logs carry their hex IDs as bytes; a trusted
	// root file carries the raw key IDs.
	rawIDs := func(logs map[string]*root.TransparencyLog) map[string]*root.TransparencyLog {
		out := map[string]*root.TransparencyLog{}
		for k, l := range logs {
			c := *l
			id, err := hex.DecodeString(k)
			if err != nil {
				t.Fatalf("%v", err)
			}
			c.ID = id
			out[k] = &c
		}
		return out
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), rawIDs(vs.CTLogs()), vs.TimestampingAuthorities(), rawIDs(vs.RekorLogs()))
	if err != nil {
		t.Fatalf("%v", err)
	}
	j, err := tr.MarshalJSON()
	if err != nil {
		t.Fatalf("%v", err)
	}
	path := filepath.Join(tempDir(t), "trusted_root.json")
	if err := os.WriteFile(path, j, 0o600); err != nil {
		t.Fatalf("%v", err)
	}
	return &VirtualSigstore{VirtualSigstore: vs, RootFile: path}
}

// KeylessBundle has the virtual Sigstore attest stmt for identity and
// issuer at time at, and writes the entity as a bundle's JSON. tlog
// false leaves the transparency log entry out, timestamps false the
// timestamp authority's.
func (vs *VirtualSigstore) KeylessBundle(t testregistry.TB, identity, issuer string, stmt []byte, at time.Time, withTlog, timestamps bool) []byte {
	t.Helper()
	e, err := vs.AttestAtTime(identity, issuer, stmt, at, true)
	if err != nil {
		t.Fatalf("%v", err)
	}
	vc, err := e.VerificationContent()
	if err != nil {
		t.Fatalf("%v", err)
	}
	sc, err := e.SignatureContent()
	if err != nil {
		t.Fatalf("%v", err)
	}
	env := sc.EnvelopeContent().RawEnvelope()
	payload, err := base64Decode(env.Payload)
	if err != nil {
		t.Fatalf("%v", err)
	}
	sig, err := base64Decode(env.Signatures[0].Sig)
	if err != nil {
		t.Fatalf("%v", err)
	}
	vm := &protobundle.VerificationMaterial{
		Content:                   &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw}},
		TimestampVerificationData: &protobundle.TimestampVerificationData{},
	}
	if withTlog {
		entries, err := e.TlogEntries()
		if err != nil {
			t.Fatalf("%v", err)
		}
		for _, en := range entries {
			tle := en.TransparencyLogEntry()
			// The entity keeps the log's signed entry timestamp apart;
			// a bundle carries it as the inclusion promise.
			set, err := vs.RekorSignPayload(tlog.RekorPayload{
				Body:           base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
				IntegratedTime: tle.IntegratedTime,
				LogIndex:       tle.LogIndex,
				LogID:          hex.EncodeToString(tle.LogId.KeyId),
			})
			if err != nil {
				t.Fatalf("%v", err)
			}
			tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
			if tle.KindVersion == nil {
				tle.KindVersion = &protorekor.KindVersion{Kind: "dsse", Version: "0.0.1"}
			}
			vm.TlogEntries = append(vm.TlogEntries, tle)
		}
	}
	if timestamps {
		ts, err := e.Timestamps()
		if err != nil {
			t.Fatalf("%v", err)
		}
		for _, b := range ts {
			vm.TimestampVerificationData.Rfc3161Timestamps = append(vm.TimestampVerificationData.Rfc3161Timestamps, &protocommon.RFC3161SignedTimestamp{SignedTimestamp: b})
		}
	}
	pb := &protobundle.Bundle{
		MediaType:            BundleMediaType,
		VerificationMaterial: vm,
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload: payload, PayloadType: env.PayloadType, Signatures: []*protodsse.Signature{{Sig: sig}},
		}},
	}
	j, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return j
}

// Attach pushes a bundle as a referrer whose subject is subject (which
// may be another digest than the one it signs), and returns the
// referrer's digest.
func Attach(t testregistry.TB, subject name.Digest, bundleJSON []byte) v1.Hash {
	t.Helper()
	desc, err := remote.Head(subject)
	if err != nil {
		t.Fatalf("%v", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	// go-containerregistry's registry lists a referrer's config media
	// type as its artifactType; AttachArtifact attaches a bundle as
	// cosign v3 does, with an empty config.
	img = mutate.ConfigMediaType(img, BundleMediaType)
	img, err = mutate.AppendLayers(img, static.NewLayer(bundleJSON, BundleMediaType))
	if err != nil {
		t.Fatalf("%v", err)
	}
	img = mutate.Subject(img, *desc).(v1.Image)
	h, err := img.Digest()
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := remote.Write(subject.Context().Digest(h.String()), img); err != nil {
		t.Fatalf("%v", err)
	}
	return h
}

// AttachArtifact pushes content as a referrer of subject the way cosign
// v3 writes its bundles (with mediaType BundleMediaType): an OCI artifact
// manifest whose config is the empty descriptor, whose artifactType is
// mediaType and whose one layer is content of that media type.
// go-containerregistry's registry lists such a referrer with the config's
// media type (application/vnd.oci.empty.v1+json) as its artifactType, not
// the manifest's.
func AttachArtifact(t testregistry.TB, subject name.Digest, mediaType types.MediaType, content []byte) v1.Hash {
	t.Helper()
	desc, err := remote.Head(subject)
	if err != nil {
		t.Fatalf("%v", err)
	}
	repo := subject.Context()
	config := static.NewLayer([]byte("{}"), EmptyMediaType)
	layer := static.NewLayer(content, mediaType)
	for _, l := range []v1.Layer{config, layer} {
		if err := remote.WriteLayer(repo, l); err != nil {
			t.Fatalf("%v", err)
		}
	}
	descOf := func(l v1.Layer, mt types.MediaType) v1.Descriptor {
		h, _ := l.Digest()
		n, _ := l.Size()
		return v1.Descriptor{MediaType: mt, Digest: h, Size: n}
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  string(mediaType),
		Config:        descOf(config, EmptyMediaType),
		Layers:        []v1.Descriptor{descOf(layer, mediaType)},
		Subject:       &v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size},
		Annotations:   map[string]string{"dev.sigstore.bundle.content": "dsse-envelope"},
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("%v", err)
	}
	h, _, err := v1.SHA256(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := remote.Put(repo.Digest(h.String()), rawManifest(b)); err != nil {
		t.Fatalf("%v", err)
	}
	return h
}

// EmptyMediaType is the media type of the OCI empty descriptor, the
// config of artifact manifests.
const EmptyMediaType = "application/vnd.oci.empty.v1+json"

// rawManifest is an image manifest's bytes, to push as they are.
type rawManifest []byte

func (r rawManifest) RawManifest() ([]byte, error) { return r, nil }
func (r rawManifest) MediaType() (types.MediaType, error) {
	return types.OCIManifestSchema1, nil
}

// Resolver is a registry resolver for loopback.
func Resolver(t testregistry.TB) *resolve.Resolver {
	t.Helper()
	r, err := resolve.New()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return r
}

// HexOf is the hex of d's digest.
func HexOf(t testregistry.TB, d name.Digest) string {
	t.Helper()
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		t.Fatalf("%v", err)
	}
	return h.Hex
}

// base64Decode decodes standard base64.
func base64Decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// ListReferrer makes the registry list referrer (a manifest of the same
// repository, whose subject is another digest) among the referrers of d
// as well, as a hostile registry may: it pushes the referrers tag schema's
// index for d, and the registry must answer its referrers API with 404
// (testregistry.NoReferrersAPI) for clients to read it.
func ListReferrer(t testregistry.TB, d name.Digest, referrer v1.Hash) {
	t.Helper()
	desc, err := remote.Head(d.Context().Digest(referrer.String()))
	if err != nil {
		t.Fatalf("%v", err)
	}
	desc.ArtifactType = BundleMediaType
	b, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{*desc}})
	if err != nil {
		t.Fatalf("%v", err)
	}
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := remote.Put(d.Context().Tag(h.Algorithm+"-"+h.Hex), rawIndex(b)); err != nil {
		t.Fatalf("%v", err)
	}
}

// rawIndex is an index's bytes, to push as they are.
type rawIndex []byte

func (r rawIndex) RawManifest() ([]byte, error) { return r, nil }
func (r rawIndex) MediaType() (types.MediaType, error) {
	return types.OCIImageIndex, nil
}

// Tamper changes the payload of a DSSE bundle's envelope, keeping its
// signature.
func Tamper(t testregistry.TB, bundleJSON []byte) []byte {
	t.Helper()
	var b protobundle.Bundle
	if err := protojson.Unmarshal(bundleJSON, &b); err != nil {
		t.Fatalf("%v", err)
	}
	env := b.GetDsseEnvelope()
	env.Payload = []byte(strings.Replace(string(env.Payload), `"predicate":{}`, `"predicate":{"tampered":true}`, 1))
	j, err := protojson.Marshal(&b)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return j
}

// LegacyPayload is cosign's simple-signing payload for an image of d's
// repository whose docker-manifest-digest is signedDigest (d's own, or
// another for a hostile case).
func LegacyPayload(t testregistry.TB, d name.Digest, signedDigest string) []byte {
	t.Helper()
	payload, err := json.Marshal(map[string]any{
		"critical": map[string]any{
			"identity": map[string]string{"docker-reference": d.Context().Name()},
			"image":    map[string]string{"docker-manifest-digest": signedDigest},
			"type":     "cosign container image signature",
		},
		"optional": nil,
	})
	if err != nil {
		t.Fatalf("%v", err)
	}
	return payload
}

// AttachLegacy pushes cosign's legacy signature of d, signed by signer
// over LegacyPayload(d, signedDigest), as the manifest tagged
// sha256-<hex>.sig with one layer.
func AttachLegacy(t testregistry.TB, d name.Digest, signedDigest string, signer signature.Signer) {
	t.Helper()
	payload := LegacyPayload(t, d, signedDigest)
	sig, err := signer.SignMessage(bytes.NewReader(payload))
	if err != nil {
		t.Fatalf("%v", err)
	}
	AttachLegacyLayer(t, d, payload, map[string]string{"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(sig)})
}

// AttachLegacyLayer pushes payload with annotations as the one layer of
// d's legacy signature tag.
func AttachLegacyLayer(t testregistry.TB, d name.Digest, payload []byte, annotations map[string]string) {
	t.Helper()
	l := static.NewLayer(payload, "application/vnd.dev.cosign.simplesigning.v1+json")
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: l, Annotations: annotations})
	if err != nil {
		t.Fatalf("%v", err)
	}
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := remote.Write(d.Context().Tag(h.Algorithm+"-"+h.Hex+".sig"), img); err != nil {
		t.Fatalf("%v", err)
	}
}

// LegacyKeyless signs payload with a certificate for identity from
// issuer, logged in the virtual Sigstore's transparency log and
// timestamped by its authority, and returns the annotations cosign writes
// for it (signature, certificate, Rekor bundle, RFC 3161 timestamp).
func (vs *VirtualSigstore) LegacyKeyless(t testregistry.TB, identity, issuer string, payload []byte) map[string]string {
	t.Helper()
	e, err := vs.Sign(identity, issuer, payload)
	if err != nil {
		t.Fatalf("%v", err)
	}
	vc, err := e.VerificationContent()
	if err != nil {
		t.Fatalf("%v", err)
	}
	sc, err := e.SignatureContent()
	if err != nil {
		t.Fatalf("%v", err)
	}
	certPEM, err := cryptoutils.MarshalCertificateToPEM(vc.Certificate())
	if err != nil {
		t.Fatalf("%v", err)
	}
	entries, err := e.TlogEntries()
	if err != nil {
		t.Fatalf("%v", err)
	}
	tle := entries[0].TransparencyLogEntry()
	rp := tlog.RekorPayload{
		Body:           base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
		IntegratedTime: tle.IntegratedTime,
		LogIndex:       tle.LogIndex,
		LogID:          hex.EncodeToString(tle.LogId.KeyId),
	}
	set, err := vs.RekorSignPayload(rp)
	if err != nil {
		t.Fatalf("%v", err)
	}
	rekor, err := json.Marshal(map[string]any{"SignedEntryTimestamp": set, "Payload": rp})
	if err != nil {
		t.Fatalf("%v", err)
	}
	ts, err := e.Timestamps()
	if err != nil {
		t.Fatalf("%v", err)
	}
	tsJSON, err := json.Marshal(map[string]any{"SignedRFC3161Timestamp": ts[0]})
	if err != nil {
		t.Fatalf("%v", err)
	}
	return map[string]string{
		"dev.cosignproject.cosign/signature":   base64.StdEncoding.EncodeToString(sc.Signature()),
		"dev.sigstore.cosign/certificate":      string(certPEM),
		"dev.sigstore.cosign/bundle":           string(rekor),
		"dev.sigstore.cosign/rfc3161timestamp": string(tsJSON),
	}
}

// NewSigner makes an ECDSA P-256 signer and writes its public key to a
// file, for legacy signatures.
func NewSigner(t testregistry.TB) (signature.Signer, string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("%v", err)
	}
	s, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	if err != nil {
		t.Fatalf("%v", err)
	}
	pem, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		t.Fatalf("%v", err)
	}
	path := filepath.Join(tempDir(t), "cosign.pub")
	if err := os.WriteFile(path, pem, 0o600); err != nil {
		t.Fatalf("%v", err)
	}
	return s, path
}

// tempDir is a folder removed when the test ends.
func tempDir(t testregistry.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "testsign")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}
