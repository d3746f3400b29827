package verify

import (
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/digestpin/digestpin/internal/imageglob"
	"github.com/digestpin/digestpin/internal/readfile"
	"github.com/digestpin/digestpin/verification"
)

// Kind is what a Term checks.
type Kind int

// The kinds of a Term.
const (
	// None is an explicitly unverified image: nothing is asked.
	None Kind = iota
	// Key is a signature by one public key.
	Key
	// Keyless is a Fulcio certificate for an identity from an issuer,
	// logged in a transparency log.
	Keyless
)

// Term is one requirement of a Policy. It is not changed once parsed, so
// it is safe for concurrent use.
type Term struct {
	kind Kind
	// Key: the verifier of the key, and its fingerprint.
	verifier    signature.Verifier
	fingerprint string
	// Keyless: the identity (exact, or a regular expression matching the
	// whole of it) and the issuer.
	identity   string
	identityRE *regexp.Regexp
	issuer     string
}

// Kind returns what the term checks.
func (t *Term) Kind() Kind { return t.kind }

// String returns the term in its canonical form, which names what is
// trusted rather than where it was read from: "none",
// "key:sha256:<hex of the key's DER>", "keyless:IDENTITY@ISSUER" or
// "keyless:/REGEXP/@ISSUER". Lock files and cache keys hold it, so that a
// changed key file is a changed policy.
func (t *Term) String() string {
	switch t.kind {
	case Key:
		return "key:" + t.fingerprint
	case Keyless:
		if t.identityRE != nil {
			return "keyless:/" + t.identity + "/@" + t.issuer
		}
		return "keyless:" + t.identity + "@" + t.issuer
	}
	return "none"
}

// Policy is what the images of a glob must carry: its terms, all of them
// or any one.
type Policy struct {
	glob  imageglob.Glob
	all   bool
	terms []*Term
}

// Glob returns the glob the policy is for, as written.
func (p *Policy) Glob() string { return p.glob.String() }

// All reports whether every term must hold (" and "), rather than any
// one (" or ").
func (p *Policy) All() bool { return p.all }

// Terms returns the policy's terms, in the order written. The caller may
// not change them.
func (p *Policy) Terms() []*Term { return slices.Clone(p.terms) }

// None reports whether the policy is "none": the image is explicitly left
// unverified.
func (p *Policy) None() bool { return len(p.terms) == 1 && p.terms[0].kind == None }

// String returns the policy in canonical form: its terms joined by " or "
// or " and ".
func (p *Policy) String() string {
	parts := make([]string, len(p.terms))
	for i, t := range p.terms {
		parts[i] = t.String()
	}
	op := " or "
	if p.all {
		op = " and "
	}
	return strings.Join(parts, op)
}

// Policies maps images to their policies. The zero value has none. Add is
// not safe for concurrent use; once built, For may be called
// concurrently.
type Policies struct {
	list        []*Policy
	trust       root.TrustedMaterial
	trustDigest string // the trusted root file's digest, for cache keys
	// readFile reads a key file; tests may replace it.
	readFile func(string) ([]byte, error)
}

// Clone returns a copy of ps that Add, SetTrustedRoot and
// SetTrustedMaterial may change without changing ps; a nil ps gives an
// empty Policies.
func (ps *Policies) Clone() *Policies {
	if ps == nil {
		return &Policies{}
	}
	c := *ps
	c.list = slices.Clone(ps.list)
	return &c
}

// MaxKeySize bounds a public key file.
const MaxKeySize = 64 << 10

// Add parses spec, "IMAGE-GLOB=POLICY", and adds it. The glob matches a
// repository by its fully qualified name (index.docker.io/library/nginx;
// docker.io/, index.docker.io/ and no registry at all for Docker Hub
// images, library/ for its official ones, are one; a glob whose first
// segment has a wildcard is matched as written, so "**" is every image):
// "*" matches within one path segment, "**" across segments, and nothing
// else is special. POLICY
// is terms joined by " or " (any one must hold) or by " and " (all must),
// not both: key:FILE, keyless:IDENTITY@ISSUER, keyless:/REGEXP/@ISSUER
// (the expression must match the whole identity; the issuer is what
// follows the last "@") or none (alone). A glob given twice is an error:
// write its terms in one policy.
func (ps *Policies) Add(spec string) error {
	glob, pol, ok := strings.Cut(spec, "=")
	if !ok || glob == "" || pol == "" {
		return errors.New("want IMAGE-GLOB=POLICY, e.g. ghcr.io/acme/**=key:cosign.pub")
	}
	g, err := imageglob.Compile(glob)
	if err != nil {
		return fmt.Errorf("%w: the digest is what is verified", err)
	}
	for _, p := range ps.list {
		if p.glob.Same(g) {
			return fmt.Errorf("%s has a policy already (--verify %s=…): join the terms in one policy with \" or \" or \" and \"", glob, p.glob)
		}
	}
	p := &Policy{glob: g}
	ors := strings.Split(pol, " or ")
	ands := strings.Split(pol, " and ")
	words := ors
	switch {
	case len(ors) > 1 && len(ands) > 1:
		return errors.New("both \" or \" and \" and \": a policy is any of its terms or all of them, not a mix")
	case len(ands) > 1:
		words, p.all = ands, true
	}
	for _, w := range words {
		t, err := ps.parseTerm(strings.TrimSpace(w))
		if err != nil {
			return fmt.Errorf("%w", err)
		}
		if t.kind == None && len(words) > 1 {
			return errors.New("none is a policy of its own, not a term beside others")
		}
		if slices.ContainsFunc(p.terms, func(o *Term) bool { return o.String() == t.String() }) {
			return fmt.Errorf("%s twice", t)
		}
		p.terms = append(p.terms, t)
	}
	ps.list = append(ps.list, p)
	return nil
}

// parseTerm parses one term.
func (ps *Policies) parseTerm(w string) (*Term, error) {
	kind, arg, _ := strings.Cut(w, ":")
	switch kind {
	case "none":
		if arg != "" || strings.Contains(w, ":") {
			return nil, fmt.Errorf("term %q: none takes nothing", w)
		}
		return &Term{kind: None}, nil
	case "key":
		if arg == "" {
			return nil, fmt.Errorf("term %q: want key:FILE, a PEM public key", w)
		}
		return ps.loadKey(arg)
	case "keyless":
		return parseKeyless(w, arg)
	}
	return nil, fmt.Errorf("term %q: unknown policy; want key:FILE, keyless:IDENTITY@ISSUER, keyless:/REGEXP/@ISSUER or none", w)
}

// loadKey reads a cosign public key: a PEM "PUBLIC KEY" (PKIX) block of
// an ECDSA (P-256, P-384, P-521), Ed25519 or RSA key.
func (ps *Policies) loadKey(path string) (*Term, error) {
	read := ps.readFile
	if read == nil {
		read = func(p string) ([]byte, error) { return readfile.Regular(p, MaxKeySize) }
	}
	b, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("reading key %w", err)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("reading key %s: not a PEM public key: %w", path, err)
	}
	return keyTerm(pub, path)
}

// keyTerm makes the term of a public key.
func keyTerm(pub crypto.PublicKey, where string) (*Term, error) {
	v, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return nil, fmt.Errorf("reading key %s: %w", where, err)
	}
	der, err := cryptoutils.MarshalPublicKeyToDER(pub)
	if err != nil {
		return nil, fmt.Errorf("reading key %s: %w", where, err)
	}
	sum := sha256.Sum256(der)
	return &Term{kind: Key, verifier: v, fingerprint: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

// parseKeyless parses keyless:IDENTITY@ISSUER and keyless:/REGEXP/@ISSUER.
func parseKeyless(w, arg string) (*Term, error) {
	t := &Term{kind: Keyless}
	if strings.HasPrefix(arg, "/") {
		end := strings.LastIndex(arg, "/@")
		if end <= 0 {
			return nil, fmt.Errorf("term %q: want keyless:/REGEXP/@ISSUER", w)
		}
		t.identity, t.issuer = arg[1:end], arg[end+2:]
		re, err := regexp.Compile("^(?:" + t.identity + ")$")
		if err != nil {
			return nil, fmt.Errorf("term %q: identity: %w", w, err)
		}
		t.identityRE = re
	} else {
		at := strings.LastIndex(arg, "@")
		if at < 0 {
			return nil, fmt.Errorf("term %q: want keyless:IDENTITY@ISSUER, e.g. keyless:https://github.com/acme/app/.github/workflows/release.yaml@refs/heads/main@https://token.actions.githubusercontent.com", w)
		}
		t.identity, t.issuer = arg[:at], arg[at+1:]
	}
	switch {
	case t.identity == "":
		return nil, fmt.Errorf("term %q: no identity", w)
	case t.issuer == "":
		return nil, fmt.Errorf("term %q: no issuer after the last @", w)
	case strings.ContainsAny(t.issuer, " \t"):
		return nil, fmt.Errorf("term %q: issuer %q has a space", w, t.issuer)
	}
	return t, nil
}

// For returns the policy of repo: of the globs that match it, the longest
// (the most specific); nil when none does.
func (ps *Policies) For(repo name.Repository) *Policy {
	if ps == nil {
		return nil
	}
	var best *Policy
	for _, p := range ps.list {
		if p.glob.Match(repo) && (best == nil || p.glob.MoreSpecific(best.glob)) {
			best = p
		}
	}
	return best
}

// Len returns how many policies there are.
func (ps *Policies) Len() int {
	if ps == nil {
		return 0
	}
	return len(ps.list)
}

// List returns the policies in the order added.
func (ps *Policies) List() []*Policy {
	if ps == nil {
		return nil
	}
	return slices.Clone(ps.list)
}

// NeedsTrustedRoot reports whether a policy has a keyless term, which
// needs SetTrustedRoot.
func (ps *Policies) NeedsTrustedRoot() bool {
	for _, p := range ps.List() {
		for _, t := range p.terms {
			if t.kind == Keyless {
				return true
			}
		}
	}
	return false
}

// MaxTrustedRootSize bounds a trusted root file.
const MaxTrustedRootSize = 4 << 20

// SetTrustedRoot reads the Sigstore trusted root (trusted_root.json: the
// Fulcio CAs, transparency logs and timestamp authorities) that keyless
// terms are checked against. Nothing is fetched from the network.
func (ps *Policies) SetTrustedRoot(path string) error {
	b, err := readfile.Regular(path, MaxTrustedRootSize)
	if err != nil {
		return fmt.Errorf("reading trusted root %w", err)
	}
	tr, err := root.NewTrustedRootFromJSON(b)
	if err != nil {
		return fmt.Errorf("reading trusted root %s: not a Sigstore trusted root: %w", path, err)
	}
	ps.trust = tr
	sum := sha256.Sum256(b)
	ps.trustDigest = "sha256:" + hex.EncodeToString(sum[:])
	return nil
}

// SetTrustedMaterial sets the trust keyless terms are checked against,
// for callers that build it themselves; digest names it in cache keys.
func (ps *Policies) SetTrustedMaterial(tm root.TrustedMaterial, digest string) {
	ps.trust, ps.trustDigest = tm, digest
}

// TrustDigest names the trusted root keyless terms are checked against
// (its file's SHA-256), "" without one: with the policy's canonical form,
// what a cached verification is keyed by.
func (ps *Policies) TrustDigest() string {
	if ps == nil {
		return ""
	}
	return ps.trustDigest
}

var _ verification.Configurable = (*Policies)(nil)

// Policy returns the policy of repo as For does, as the
// verification.Policies a Pinner takes (pin.Options.Verify).
func (ps *Policies) Policy(repo name.Repository) verification.Policy {
	if p := ps.For(repo); p != nil {
		return p
	}
	return nil
}

// Policies returns the policies in the order added, as List does.
func (ps *Policies) Policies() []verification.Policy {
	var l []verification.Policy
	for _, p := range ps.List() {
		l = append(l, p)
	}
	return l
}

// Verifier returns NewVerifier(reg, ps): a Pinner asks for one per Pin.
func (ps *Policies) Verifier(reg verification.Registry) (verification.Verifier, error) {
	v, err := NewVerifier(reg, ps)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// WithPolicy returns a copy of ps with spec added (Add); ps is unchanged.
func (ps *Policies) WithPolicy(spec string) (verification.Configurable, error) {
	c := ps.Clone()
	if err := c.Add(spec); err != nil {
		return nil, err
	}
	return c, nil
}

// WithTrustedRoot returns a copy of ps with the trusted root read from
// path (SetTrustedRoot); ps is unchanged.
func (ps *Policies) WithTrustedRoot(path string) (verification.Configurable, error) {
	c := ps.Clone()
	if err := c.SetTrustedRoot(path); err != nil {
		return nil, err
	}
	return c, nil
}

// Check reports what cannot work: a keyless term without a trusted root.
func (ps *Policies) Check() error {
	if ps.NeedsTrustedRoot() && ps.trust == nil {
		return errors.New("a keyless policy needs --trusted-root FILE (a Sigstore trusted_root.json), which digestpin never fetches")
	}
	return nil
}
