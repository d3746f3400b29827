// Package verify implements package verification's Policies and Verifier
// with sigstore-go, which package pin never links: before a digest is
// pinned, it checks that the digest is signed as a policy demands, and
// says who signed it.
//
// A Policies maps repositories (by glob) to a Policy: one or more terms,
// all of which must hold ("and") or any one of which ("or"). A term is
// key:FILE (a cosign public key: ECDSA, Ed25519 or RSA), keyless:
// IDENTITY@ISSUER (a Fulcio certificate for that identity from that OIDC
// issuer, checked against a Sigstore trusted root that the caller reads
// from a file; nothing is fetched), or none (explicitly unverified).
//
// A Verifier finds what is attached to the exact digest, never to a tag:
// Sigstore bundles among the digest's referrers (the OCI 1.1 referrers API,
// then the referrers tag schema, as the Registry reads them), then cosign's
// legacy signature tag (sha256-<hex>.sig) and its simple-signing layers.
// Each is verified offline: the signature over the digest (a DSSE
// statement whose subject is the digest, or a message signature whose
// digest is it; for legacy signatures the payload's docker-manifest-digest),
// and for keyless terms the certificate chain to the trusted root's CA, the
// identity, the transparency log entry and a timestamp inside the
// certificate's validity. Everything read from the registry is bounded in
// count and size.
//
// The package never parses YAML and does not resolve tags: its caller
// (package pin) passes digests. Policies are the verification.Policies
// that a Pinner takes (pin.Options.Verify), and a Verifier their
// verification.Verifier: package pin never imports this one, so only a
// program that verifies links sigstore-go.
package verify
