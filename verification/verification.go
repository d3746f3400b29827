// Package verification is the vocabulary shared by the code that needs
// signature verification (package pin, which verifies the images a
// signature policy covers and records who signed them in the lock file and
// the report) and the code that verifies (package verify, with
// sigstore-go): Policies say which images must be signed by whom and hand
// out a Verifier, which verifies one digest under one Policy and returns
// the Record of who signed.
//
// It depends on go-containerregistry's name and v1 packages only, so that
// a Pinner can take Policies, and write their Records, without linking
// sigstore, gRPC or protobuf: only a program that verifies links them,
// through package verify.
package verification

import (
	"context"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Policy is what the images of a glob must carry. Package verify's
// *Policy is one.
type Policy interface {
	// Glob returns the image glob the policy is for, as written.
	Glob() string
	// String returns the policy in canonical form, which names what is
	// trusted rather than where it was read from: the lock file, the
	// report and cache keys hold it.
	String() string
	// None reports whether the policy is "none": the image is explicitly
	// left unverified, and nothing is asked.
	None() bool
}

// Policies are the signature policies a Pinner verifies images under
// (pin.Options.Verify). Package verify's *Policies is one. Once a Pin has
// begun, Policies must not change, and must be safe for concurrent use.
type Policies interface {
	// Policy returns the policy of repo, nil when none covers it: the
	// value Policies lists for it, comparable with == (a Pinner keys a
	// map by it).
	Policy(repo name.Repository) Policy
	// Policies returns every policy, in the order declared; none means
	// no image is verified.
	Policies() []Policy
	// TrustDigest names the trust that keyless terms are checked against
	// (e.g. the SHA-256 of a trusted root file), "" without one: with a
	// policy's canonical form, what a cached verification is keyed by.
	TrustDigest() string
	// Check reports what cannot work, e.g. a keyless policy without a
	// trusted root; pin.New calls it.
	Check() error
	// Verifier returns a Verifier that reads what is attached to digests
	// from reg. A Pinner asks for one per Pin, and never under Frozen.
	Verifier(reg Registry) (Verifier, error)
}

// Configurable are Policies that a configuration file's policies can be
// added to, as pin.Options.AddConfig adds them. Package verify's *Policies
// is one. Neither method changes the receiver.
type Configurable interface {
	Policies
	// WithPolicy returns a copy with spec, "IMAGE-GLOB=POLICY", added
	// after the receiver's policies.
	WithPolicy(spec string) (Configurable, error)
	// WithTrustedRoot returns a copy that checks keyless terms against
	// the trusted root read from the file path.
	WithTrustedRoot(path string) (Configurable, error)
}

// Verifier verifies digests under the Policies that made it. It must be
// safe for concurrent use.
type Verifier interface {
	// Verify checks digest d under p, one of the Policies' policies, and
	// returns who signed; an error says why d does not hold under p.
	Verify(ctx context.Context, d name.Digest, p Policy) (*Record, error)
}

// Registry is where a Verifier reads what is attached to a digest.
// *resolve.Resolver is one. Implementations must be safe for concurrent
// use. What they return is the registry's word: the Verifier checks it.
type Registry interface {
	// Referrers returns the descriptors of the manifests whose subject is
	// d; none is an empty list.
	Referrers(ctx context.Context, d name.Digest) ([]v1.Descriptor, error)
	// Manifest returns the manifest ref names and its media type; a
	// manifest named by digest must match it. Its error is
	// resolve.ErrNotFound, by errors.Is, when there is none.
	Manifest(ctx context.Context, ref name.Reference) ([]byte, types.MediaType, error)
	// Blob returns blob h of repo, checked against h, or an error when it
	// is larger than limit.
	Blob(ctx context.Context, repo name.Repository, h v1.Hash, limit int64) ([]byte, error)
}

// Record is what a verification found: the policy and, for each term that
// held, who signed. The lock file and the report record it.
type Record struct {
	// Policy is the policy in canonical form (Policy.String).
	Policy string
	// Signers are the terms that held: for an " or " policy the first,
	// for an " and " policy every one; none for the none policy.
	Signers []Signer
}

// Signer is one term that held.
type Signer struct {
	// Term is the term in canonical form.
	Term string `json:"term" yaml:"term"`
	// Identity is who signed: "key sha256:<fingerprint>", or the
	// certificate's identity and issuer, "IDENTITY (issuer ISSUER)".
	Identity string `json:"identity" yaml:"identity"`
	// Bundle is the digest of the Sigstore bundle (or of the legacy
	// simple-signing payload) that held.
	Bundle string `json:"bundle" yaml:"bundle"`
}
