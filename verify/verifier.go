package verify

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/digestpin/digestpin/internal/oneline"
	"github.com/digestpin/digestpin/verification"
)

// Registry is where a Verifier reads what is attached to a digest:
// verification.Registry, which *resolve.Resolver implements.
type Registry = verification.Registry

// Limits on what is read from a registry for one digest.
const (
	// MaxCandidates is how many signature manifests (referrers, or layers
	// of the legacy signature) are read for one digest; more are
	// ignored, and the error says so when none of those read holds.
	MaxCandidates = 16
	// MaxBundleSize bounds a Sigstore bundle, or a legacy simple-signing
	// payload: a bundle with its certificate chain, log entry and
	// timestamp is a few KiB.
	MaxBundleSize = 256 << 10
)

// Media types and annotations of Sigstore's and cosign's signatures.
const (
	bundleMediaTypePrefix = "application/vnd.dev.sigstore.bundle"
	simpleSigningLayer    = "application/vnd.dev.cosign.simplesigning.v1+json"
	annotationSignature   = "dev.cosignproject.cosign/signature"
	annotationCertificate = "dev.sigstore.cosign/certificate"
	annotationRekorBundle = "dev.sigstore.cosign/bundle"
	annotationTimestamp   = "dev.sigstore.cosign/rfc3161timestamp"
	// CosignSignPredicate is the predicate type of the in-toto statement
	// in a bundle that signs an image (cosign sign with bundles). A DSSE
	// bundle of another predicate type (an attestation) is not a
	// signature of the image.
	CosignSignPredicate = "https://sigstore.dev/cosign/sign/v1"
)

// Record is what a verification found (verification.Record): the policy
// and, for each term that held, who signed. It is what the lock file
// records.
type Record = verification.Record

// Signer is one term that held (verification.Signer).
type Signer = verification.Signer

// Error is a digest that does not hold under its policy.
type Error struct {
	// Image is the image, repository@digest.
	Image string
	// Policy is the policy, in canonical form.
	Policy string
	// Reason says why: no signature, wrong key, wrong identity, expired,
	// transparency log entry missing, …
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: not verified under policy %s: %s", e.Image, e.Policy, e.Reason)
}

// Verifier verifies digests under Policies. It is safe for concurrent
// use: what is attached to each distinct digest is read once for its
// lifetime (one referrers request), and verified for each policy asked.
type Verifier struct {
	reg   Registry
	ps    *Policies
	found sync.Map // repo@digest → *fetch
	now   func() time.Time
}

// NewVerifier returns a Verifier reading from reg. It fails when a
// keyless policy has no trusted root (Policies.Check).
func NewVerifier(reg Registry, ps *Policies) (*Verifier, error) {
	if err := ps.Check(); err != nil {
		return nil, err
	}
	return &Verifier{reg: reg, ps: ps, now: time.Now}, nil
}

// fetch is what was read for one digest, in flight or done.
type fetch struct {
	done     chan struct{}
	cands    []*candidate
	skipped  []string // why referrers were passed over
	err      error
	legacy   bool // the legacy tag was read too
	legacyMu sync.Mutex
}

// candidate is one signature to check.
type candidate struct {
	where   string // "referrer sha256:…", "sha256-….sig layer 1"
	digest  string // of the bundle or payload
	entity  sgverify.SignedEntity
	payload []byte // legacy: the simple-signing payload, the signed artifact
	err     error  // why it could not be read as a signature
}

var _ verification.Verifier = (*Verifier)(nil)

// Verify checks digest d under policy p, which must be one of the
// Verifier's Policies (For), a *Policy. The none policy asks nothing. A
// digest that does not hold is an *Error; so is a registry that cannot be
// read.
func (v *Verifier) Verify(ctx context.Context, d name.Digest, vp verification.Policy) (*Record, error) {
	p, ok := vp.(*Policy)
	if !ok || p == nil {
		return nil, fmt.Errorf("verifying %s: policy %v is not one of package verify's", d, vp)
	}
	rec := &Record{Policy: p.String()}
	if p.None() {
		return rec, nil
	}
	fail := func(reason string) error {
		return &Error{Image: d.Context().Name() + "@" + d.DigestStr(), Policy: p.String(), Reason: reason}
	}
	h, err := v1.NewHash(d.DigestStr())
	if err != nil || h.Algorithm != "sha256" {
		return nil, fail("only sha256 digests are verified")
	}
	raw, _ := hex.DecodeString(h.Hex)
	f, err := v.fetch(ctx, d, false)
	if err != nil {
		return nil, fail("reading signatures: " + err.Error())
	}
	signers, reasons := v.evaluate(p, f.cands, raw)
	if signers == nil {
		// Only then the legacy signature tag: it costs a request that a
		// digest signed with bundles does not need.
		f, err = v.fetch(ctx, d, true)
		if err != nil {
			return nil, fail("reading signatures: " + err.Error())
		}
		signers, reasons = v.evaluate(p, f.cands, raw)
	}
	if signers == nil {
		if len(f.cands) == 0 {
			why := "no signature (none among the referrers, nor at tag " + legacyTag(h) + ")"
			if len(f.skipped) > 0 {
				why += "; passed over: " + strings.Join(f.skipped, ", ")
			}
			return nil, fail(why)
		}
		if len(f.skipped) > 0 {
			reasons += "; " + strings.Join(f.skipped, ", ")
		}
		return nil, fail(reasons)
	}
	rec.Signers = signers
	return rec, nil
}

// evaluate checks the policy's terms against the candidates. It returns
// the signers when the policy holds, or else why not.
func (v *Verifier) evaluate(p *Policy, cands []*candidate, raw []byte) ([]Signer, string) {
	var signers []Signer
	var whys []string
	for _, t := range p.terms {
		s, why := v.term(t, cands, raw)
		if s != nil {
			signers = append(signers, *s)
			if !p.all {
				return signers, ""
			}
			continue
		}
		if len(p.terms) > 1 {
			why = t.String() + ": " + why
		}
		whys = append(whys, why)
		if p.all {
			return nil, strings.Join(whys, "; ")
		}
	}
	if p.all {
		return signers, ""
	}
	return nil, strings.Join(whys, "; ")
}

// term checks one term against every candidate; the first that holds is
// the signer. Otherwise it says why each failed, once per reason.
func (v *Verifier) term(t *Term, cands []*candidate, raw []byte) (*Signer, string) {
	if len(cands) == 0 {
		return nil, "no signature"
	}
	var whys []string
	for _, c := range cands {
		why := ""
		if c.err != nil {
			why = c.err.Error()
		} else if s, err := v.check(t, c, raw); err == nil {
			return s, ""
		} else {
			why = err.Error()
		}
		if !slices.Contains(whys, why) {
			whys = append(whys, why)
		}
	}
	return nil, strings.Join(whys, ", ")
}

// check verifies one candidate under one term.
func (v *Verifier) check(t *Term, c *candidate, raw []byte) (*Signer, error) {
	var tm root.TrustedMaterial
	var vopts []sgverify.VerifierOption
	var popts []sgverify.PolicyOption
	switch t.kind {
	case Key:
		tm = root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
			// Whatever key the bundle hints at: the policy's key is the
			// only one trusted.
			return root.NewExpiringKey(t.verifier, time.Time{}, time.Time{}), nil
		})
		vopts = append(vopts, sgverify.WithCurrentTime())
		popts = append(popts, sgverify.WithKey())
	case Keyless:
		tm = v.ps.trust
		vopts = append(vopts, sgverify.WithTransparencyLog(1), sgverify.WithObserverTimestamps(1))
		var exact, re string
		if t.identityRE != nil {
			re = t.identityRE.String()
		} else {
			exact = t.identity
		}
		id, err := sgverify.NewShortCertificateIdentity(t.issuer, "", exact, re)
		if err != nil {
			return nil, fmt.Errorf("identity: %w", err)
		}
		popts = append(popts, sgverify.WithCertificateIdentity(id))
	default:
		return nil, errors.New("nothing to verify")
	}
	sv, err := sgverify.NewVerifier(tm, vopts...)
	if err != nil {
		return nil, err
	}
	artifact := sgverify.WithArtifactDigest("sha256", raw)
	if c.payload != nil {
		artifact = sgverify.WithArtifact(bytes.NewReader(c.payload))
	}
	res, err := sv.Verify(c.entity, sgverify.NewPolicy(artifact, popts...))
	if err != nil {
		return nil, errors.New(reason(t, c, err))
	}
	if res.Statement != nil && res.Statement.GetPredicateType() != CosignSignPredicate {
		return nil, fmt.Errorf("an attestation (%s), not a signature", res.Statement.GetPredicateType())
	}
	s := &Signer{Term: t.String(), Bundle: c.digest}
	switch {
	case t.kind == Key:
		s.Identity = "key " + t.fingerprint
	case res.Signature != nil && res.Signature.Certificate != nil:
		s.Identity = res.Signature.Certificate.SubjectAlternativeName + " (issuer " + res.Signature.Certificate.Issuer + ")"
	default:
		return nil, errors.New("no certificate in the verification result")
	}
	return s, nil
}

// reason turns a sigstore-go failure into the words of a one-line error.
func reason(t *Term, c *candidate, err error) string {
	msg := err.Error()
	var idErr *sgverify.ErrNoMatchingCertificateIdentity
	var certErr x509.CertificateInvalidError
	var authErr x509.UnknownAuthorityError
	switch {
	case errors.As(err, &idErr):
		return "wrong identity: signed by " + signedBy(c)
	case errors.As(err, &certErr) && certErr.Reason == x509.Expired:
		return "expired: the certificate was not valid at the time the log or a timestamp authority saw the signature"
	case errors.As(err, &authErr):
		return "the certificate is not from a CA of the trusted root"
	case strings.Contains(msg, "expected key signature, not certificate"):
		return "wrong key: signed with a certificate (" + signedBy(c) + "), not the key"
	case strings.Contains(msg, "integrated time outside certificate validity"):
		return "expired: the certificate was not valid when the transparency log saw the signature"
	case strings.Contains(msg, "failed to verify log inclusion"):
		if entries, err := c.entity.TlogEntries(); err == nil && len(entries) == 0 {
			return "transparency log entry missing"
		}
		return "transparency log entry invalid: " + oneLine(msg)
	case strings.Contains(msg, "failed to verify timestamps"):
		return "no valid timestamp: " + oneLine(msg)
	case strings.Contains(msg, "failed to verify leaf certificate"):
		return "certificate invalid: " + oneLine(msg)
	case strings.Contains(msg, "artifact digest") || strings.Contains(msg, "digests in statement") || strings.Contains(msg, "artifact does not match"):
		return "a signature of another artifact, not this digest"
	case t.kind == Key && (strings.Contains(msg, "could not verify envelope") || strings.Contains(msg, "could not verify message") || strings.Contains(msg, "invalid signature")):
		return "wrong key: the signature does not verify with " + t.fingerprint + " (another key, or tampered)"
	case strings.Contains(msg, "could not verify envelope") || strings.Contains(msg, "could not verify message"):
		return "invalid signature (tampered)"
	}
	return oneLine(msg)
}

// signedBy names the certificate's identity and issuer, or "a key".
func signedBy(c *candidate) string {
	vc, err := c.entity.VerificationContent()
	if err != nil || vc.Certificate() == nil {
		return "a key"
	}
	s, err := certificate.SummarizeCertificate(vc.Certificate())
	if err != nil {
		return "an unreadable certificate"
	}
	return s.SubjectAlternativeName + " (issuer " + s.Issuer + ")"
}

// oneLine flattens a message onto one line and bounds it.
func oneLine(s string) string { return oneline.Of(s, 300) }

// legacyTag is cosign's signature tag of h: sha256-<hex>.sig.
func legacyTag(h v1.Hash) string { return h.Algorithm + "-" + h.Hex + ".sig" }

// fetch returns what is attached to d: the bundles among its referrers,
// and with legacy the layers of its legacy signature tag too. Each is read
// once per Verifier; a failure is not kept, so a later call reads again.
func (v *Verifier) fetch(ctx context.Context, d name.Digest, legacy bool) (*fetch, error) {
	key := d.Context().Name() + "@" + d.DigestStr()
	f := &fetch{done: make(chan struct{})}
	if old, loaded := v.found.LoadOrStore(key, f); loaded {
		f = old.(*fetch)
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil {
			return nil, f.err
		}
	} else {
		f.cands, f.skipped, f.err = v.referrers(ctx, d)
		if f.err != nil {
			v.found.CompareAndDelete(key, f)
		}
		close(f.done)
		if f.err != nil {
			return nil, f.err
		}
	}
	if !legacy {
		return f, nil
	}
	f.legacyMu.Lock()
	defer f.legacyMu.Unlock()
	if !f.legacy {
		cands, err := v.legacy(ctx, d)
		if err != nil {
			return nil, err
		}
		f.cands = append(f.cands, cands...)
		f.legacy = true
	}
	return f, nil
}

// referrers reads the Sigstore bundles among d's referrers: at most
// MaxCandidates, each a manifest whose subject is d with a bundle layer of
// at most MaxBundleSize.
func (v *Verifier) referrers(ctx context.Context, d name.Digest) ([]*candidate, []string, error) {
	descs, err := v.reg.Referrers(ctx, d)
	if err != nil {
		return nil, nil, err
	}
	var cands []*candidate
	var skipped []string
	read := 0
	for _, desc := range descs {
		// cosign writes a bundle as an artifact manifest with an empty
		// config and the bundle's media type as the manifest's
		// artifactType. A registry that lists the config's media type
		// instead (go-containerregistry's), or none, leaves the type to
		// the manifest: such referrers are read too, and passed over
		// when they hold no bundle.
		typed := strings.HasPrefix(desc.ArtifactType, bundleMediaTypePrefix)
		if !typed && desc.ArtifactType != "" && desc.ArtifactType != emptyMediaType {
			continue
		}
		if read == MaxCandidates {
			skipped = append(skipped, fmt.Sprintf("more than %d bundles, the rest unread", MaxCandidates))
			break
		}
		read++
		c := &candidate{where: "referrer " + desc.Digest.String()}
		c.entity, c.digest, c.err = v.readBundle(ctx, d, desc)
		if !typed && errors.Is(c.err, errNoBundleLayer) {
			continue
		}
		if c.err != nil {
			c.err = fmt.Errorf("%s: %w", c.where, c.err)
		}
		cands = append(cands, c)
	}
	return cands, skipped, nil
}

// emptyMediaType is the OCI empty descriptor's media type, the config of
// artifact manifests such as cosign's bundles.
const emptyMediaType = "application/vnd.oci.empty.v1+json"

// errNoBundleLayer is a referrer manifest without a Sigstore bundle.
var errNoBundleLayer = errors.New("no bundle layer")

// readBundle reads the bundle of referrer desc of d.
func (v *Verifier) readBundle(ctx context.Context, d name.Digest, desc v1.Descriptor) (sgverify.SignedEntity, string, error) {
	if desc.Size > MaxBundleSize {
		return nil, "", fmt.Errorf("manifest of %d bytes, more than a bundle's", desc.Size)
	}
	b, _, err := v.reg.Manifest(ctx, d.Context().Digest(desc.Digest.String()))
	if err != nil {
		return nil, "", err
	}
	var m v1.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, "", fmt.Errorf("not a manifest: %w", err)
	}
	// The registry's referrers list is its word; the manifest's subject
	// is what the manifest says of itself.
	if m.Subject == nil || m.Subject.Digest.String() != d.DigestStr() {
		return nil, "", errors.New("a referrer of another digest (its subject is not this digest)")
	}
	for _, l := range m.Layers {
		if !strings.HasPrefix(string(l.MediaType), bundleMediaTypePrefix) {
			continue
		}
		if l.Size > MaxBundleSize {
			return nil, "", fmt.Errorf("a bundle of %d bytes, more than %d", l.Size, MaxBundleSize)
		}
		raw, err := v.reg.Blob(ctx, d.Context(), l.Digest, MaxBundleSize)
		if err != nil {
			return nil, "", err
		}
		var bn bundle.Bundle
		if err := bn.UnmarshalJSON(raw); err != nil {
			return nil, "", fmt.Errorf("not a Sigstore bundle: %s", oneLine(err.Error()))
		}
		return &bn, l.Digest.String(), nil
	}
	return nil, "", errNoBundleLayer
}
