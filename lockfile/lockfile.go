package lockfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/digestpin/digestpin/internal/atomicfile"
	"github.com/digestpin/digestpin/internal/imageref"
	"github.com/digestpin/digestpin/internal/readfile"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/verification"
)

// Version is the lock file format this package writes when an entry has
// a tag policy; without one it writes VersionNoPolicy, which earlier
// versions of digestpin read too. It reads both.
const Version = 2

// VersionNoPolicy is the lock file format without tag policies.
const VersionNoPolicy = 1

// VersionVerified is the lock file format with signature verifications;
// it is written when an entry has one, so that a digestpin that cannot
// read them refuses the file instead of pinning without verifying.
const VersionVerified = 3

// VersionMediaType is the lock file format with media types (whether a
// digest is an index or one image's manifest); it is written when an
// entry has one, which every digest asked of a registry since has. A
// digestpin that cannot read them refuses the file, naming the version:
// update the readers (the Argo CD plugin, say) before the writers.
const VersionMediaType = 4

// VersionPending is the lock file format with pending digests (a newer
// digest that a waiting period, --min-age, holds back); it is written
// only while an entry has one. A digestpin that cannot read them refuses
// the file, naming the version, rather than losing when each was first
// seen.
const VersionPending = 5

// header starts every lock file this package writes.
const header = "# digestpin lock file: image references and the digests they resolve to.\n" +
	"# Written by `digestpin --write-lock FILE`; read by `digestpin --lock FILE`.\n"

// Entry is one resolution: the digest Reference resolved to, for Platform.
type Entry struct {
	// Reference is the image reference without a digest, e.g.
	// "index.docker.io/library/nginx:1.27".
	Reference string `yaml:"reference"`
	// Platform is "os/arch[/variant]" when Digest is that platform's
	// manifest, or "" when Digest is what the tag names (an index for a
	// multi-platform image).
	Platform string `yaml:"platform,omitempty"`
	// Digest is "sha256:…".
	Digest string `yaml:"digest"`
	// MediaType is what Digest is, as the registry said: an index (a
	// multi-platform image) or one image's manifest, OCI's or Docker's;
	// "" when not known (an entry written before it was recorded, or
	// from a cache entry that was).
	MediaType string `yaml:"mediaType,omitempty"`
	// Policy is the tag policy of the reference's repository, as
	// tagpolicy.TagPolicy.String writes it ("semver:~1.4"), or "" when the
	// reference's own tag was resolved.
	Policy string `yaml:"policy,omitempty"`
	// Tag is the tag the Policy chose, whose digest Digest is; it is set
	// exactly when Policy is.
	Tag string `yaml:"tag,omitempty"`
	// Verified is what the signature verification of Digest found, when
	// a signature policy covers the image; nil otherwise.
	Verified *Verification `yaml:"verified,omitempty"`
	// Pending is a newer digest that the registry serves for the
	// reference (or, with Policy, that the policy chose), held back by a
	// waiting period (--min-age): Digest stays pinned until Pending has
	// been seen for long enough. nil when nothing waits.
	Pending *Pending `yaml:"pending,omitempty"`
}

// Pending is a digest that waits to be pinned: first seen at Since.
type Pending struct {
	// Digest is "sha256:…", another than the entry's.
	Digest string `yaml:"digest"`
	// MediaType is what Digest is, as the entry's MediaType.
	MediaType string `yaml:"mediaType,omitempty"`
	// Tag is the tag the entry's Policy chose, whose digest Digest is;
	// set exactly when the entry has a Policy.
	Tag string `yaml:"tag,omitempty"`
	// Since is when Digest was first seen, in UTC, to the second.
	Since time.Time `yaml:"since"`
}

// Verification is the record of a signature verification: the policy
// in canonical form (verification.Policy.String) and who signed under it.
// --frozen trusts it for the same policy and digest without asking the
// registry.
type Verification struct {
	Policy  string   `yaml:"policy"`
	Signers []Signer `yaml:"signers,omitempty"`
}

// Signer is one term of a policy that held: the term, who signed (a key
// fingerprint, or a certificate identity and issuer) and the digest of
// the signature bundle. It is verification.Signer, the record the report
// holds too.
type Signer = verification.Signer

// file is the YAML document.
type file struct {
	Version int     `yaml:"version"`
	Images  []Entry `yaml:"images"`
}

// key identifies an entry: the fully qualified reference, the platform
// and the tag policy.
type key struct{ ref, platform, policy string }

// locked is what an entry locks: a digest, and the tag a policy chose.
type locked struct {
	digest    v1.Hash
	tag       string
	mediaType string
	pending   *Pending
}

// Lock is a validated set of entries, indexed for lookups. The zero value
// is an empty lock. A Lock is not changed after it is made, so it is safe
// for concurrent use.
type Lock struct {
	entries  []Entry // normalised, sorted by Reference then Platform
	index    map[key]locked
	verified map[key]*Verification
}

// New returns a Lock of entries. It normalises each entry (the reference
// fully qualified, the platform in its canonical form) and rejects an
// entry whose reference, platform or digest does not parse, a reference
// that already carries a digest, and two different digests for the same
// reference and platform. Exact duplicates are merged.
func New(entries []Entry) (*Lock, error) {
	l := &Lock{index: make(map[key]locked, len(entries)), verified: map[key]*Verification{}}
	var errs []error
	for i, e := range entries {
		n, h, err := normalise(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("entry %d: %w", i+1, err))
			continue
		}
		k := key{n.Reference, n.Platform, n.Policy}
		if old, ok := l.index[k]; ok {
			if now := (locked{digest: h, tag: n.Tag, pending: n.Pending}); old.digest != now.digest || old.tag != now.tag || !samePending(old.pending, now.pending) {
				errs = append(errs, fmt.Errorf("entry %d: %s%s%s is locked twice, to %s and %s", i+1, n.Reference, forPlatform(n.Platform), forPolicy(n.Policy), old.describe(), now.describe()))
			}
			continue
		}
		l.index[k] = locked{digest: h, tag: n.Tag, mediaType: n.MediaType, pending: n.Pending}
		if n.Verified != nil {
			l.verified[k] = n.Verified
		}
		l.entries = append(l.entries, n)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(l.entries, func(a, b int) bool {
		ea, eb := l.entries[a], l.entries[b]
		if ea.Reference != eb.Reference {
			return ea.Reference < eb.Reference
		}
		if ea.Platform != eb.Platform {
			return ea.Platform < eb.Platform
		}
		return ea.Policy < eb.Policy
	})
	return l, nil
}

// normalise validates e and returns it in its canonical form.
func normalise(e Entry) (Entry, v1.Hash, error) {
	ref, err := name.ParseReference(e.Reference)
	if err == nil {
		err = imageref.Check(e.Reference) // what the kubelet refuses is never pinned
	}
	if err != nil {
		return Entry{}, v1.Hash{}, fmt.Errorf("parsing reference %q: %w", e.Reference, err)
	}
	if _, ok := ref.(name.Digest); ok {
		return Entry{}, v1.Hash{}, fmt.Errorf("reference %q already carries a digest: lock the tag instead", e.Reference)
	}
	h, err := v1.NewHash(e.Digest)
	if err != nil {
		return Entry{}, v1.Hash{}, fmt.Errorf("parsing digest %q of %s: %w", e.Digest, e.Reference, err)
	}
	n := Entry{Reference: ref.Name(), Digest: h.String(), MediaType: e.MediaType, Policy: e.Policy, Tag: e.Tag, Verified: e.Verified}
	if e.MediaType != "" && !resolution.ManifestMediaType(e.MediaType) {
		return Entry{}, v1.Hash{}, fmt.Errorf("%s: media type %q is no image manifest or index", e.Reference, e.MediaType)
	}
	if e.Pending != nil {
		p, err := normalisePending(*e.Pending, e, h)
		if err != nil {
			return Entry{}, v1.Hash{}, err
		}
		n.Pending = &p
	}
	if v := e.Verified; v != nil && v.Policy == "" {
		return Entry{}, v1.Hash{}, fmt.Errorf("%s: verified has no policy", e.Reference)
	}
	switch {
	case (e.Policy == "") != (e.Tag == ""):
		return Entry{}, v1.Hash{}, fmt.Errorf("%s has a policy without a tag or a tag without a policy: want both or neither", e.Reference)
	case e.Tag != "":
		if _, err := name.NewTag(ref.Context().Name()+":"+e.Tag, name.StrictValidation); err != nil {
			return Entry{}, v1.Hash{}, fmt.Errorf("parsing tag %q of %s: %w", e.Tag, e.Reference, err)
		}
		if !imageref.ValidTag(e.Tag) {
			return Entry{}, v1.Hash{}, fmt.Errorf("parsing tag %q of %s: want %s", e.Tag, e.Reference, imageref.TagRule)
		}
	}
	if e.Platform != "" {
		p, err := v1.ParsePlatform(e.Platform)
		if err == nil && (p.OS == "" || p.Architecture == "") {
			err = errors.New("want os/arch[/variant]")
		}
		if err != nil {
			return Entry{}, v1.Hash{}, fmt.Errorf("parsing platform %q of %s: %w", e.Platform, e.Reference, err)
		}
		n.Platform = p.String()
	}
	return n, h, nil
}

// normalisePending validates p, the pending digest of entry e, which
// locks h, and returns it in its canonical form.
func normalisePending(p Pending, e Entry, h v1.Hash) (Pending, error) {
	ph, err := v1.NewHash(p.Digest)
	if err != nil {
		return Pending{}, fmt.Errorf("parsing pending digest %q of %s: %w", p.Digest, e.Reference, err)
	}
	switch {
	case ph == h:
		return Pending{}, fmt.Errorf("%s: the pending digest is the locked one, %s", e.Reference, ph)
	case p.MediaType != "" && !resolution.ManifestMediaType(p.MediaType):
		return Pending{}, fmt.Errorf("%s: pending media type %q is no image manifest or index", e.Reference, p.MediaType)
	case (e.Policy == "") != (p.Tag == ""):
		return Pending{}, fmt.Errorf("%s: a pending digest has a tag exactly when the entry has a policy", e.Reference)
	case p.Since.IsZero():
		return Pending{}, fmt.Errorf("%s: the pending digest %s has no since: when it was first seen", e.Reference, ph)
	}
	if p.Tag != "" && !imageref.ValidTag(p.Tag) {
		return Pending{}, fmt.Errorf("parsing pending tag %q of %s: want %s", p.Tag, e.Reference, imageref.TagRule)
	}
	return Pending{Digest: ph.String(), MediaType: p.MediaType, Tag: p.Tag, Since: p.Since.UTC().Truncate(time.Second)}, nil
}

// samePending reports whether a and b are the same pending digest, or
// both none.
func samePending(a, b *Pending) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func forPolicy(p string) string {
	if p == "" {
		return ""
	}
	return " with policy " + p
}

// describe formats what an entry locks: "sha256:…", or "1.4.7@sha256:…".
func (l locked) describe() string {
	if l.tag == "" {
		return l.digest.String()
	}
	return l.tag + "@" + l.digest.String()
}

func forPlatform(p string) string {
	if p == "" {
		return ""
	}
	return " for " + p
}

// Parse reads a lock file's bytes. Unknown fields, an unknown version,
// invalid entries and a second YAML document are errors.
func Parse(data []byte) (*Lock, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("lock file is empty")
		}
		// The decoder's message quotes the file's content, which is not
		// ours to print (a lock file path may name some other file, and
		// the message may end up in an Argo CD Application's status):
		// say where, not what.
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			return nil, fmt.Errorf("malformed lock file: line %s: not a digestpin lock file (version: %d to %d, images: [reference, digest, mediaType, platform, policy, tag, verified, pending])", m[1], VersionNoPolicy, VersionPending)
		}
		return nil, fmt.Errorf("malformed lock file: not a digestpin lock file (version: %d to %d, images: [reference, digest, mediaType, platform, policy, tag, verified, pending])", VersionNoPolicy, VersionPending)
	}
	// One document: a second one (two lock files run together, say)
	// would be ignored, and the digests it pins with it.
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case errors.Is(err, io.EOF):
	case err == nil:
		return nil, fmt.Errorf("malformed lock file: line %d: a second YAML document; a lock file is one", more.Line)
	default:
		line := "after the first document"
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			line = "line " + m[1]
		}
		return nil, fmt.Errorf("malformed lock file: %s: a second YAML document, and not one a lock file could be; a lock file is one", line)
	}
	switch f.Version {
	case VersionNoPolicy:
		for i, e := range f.Images {
			if e.Policy != "" || e.Tag != "" {
				return nil, fmt.Errorf("entry %d: %s has a tag policy, which needs lock file version %d", i+1, e.Reference, Version)
			}
		}
	case Version, VersionVerified, VersionMediaType, VersionPending:
	default:
		return nil, fmt.Errorf("unsupported lock file version %d, want %d, %d, %d, %d or %d", f.Version, VersionNoPolicy, Version, VersionVerified, VersionMediaType, VersionPending)
	}
	if f.Version < VersionPending {
		for i, e := range f.Images {
			if e.Pending != nil {
				return nil, fmt.Errorf("entry %d: %s has a pending digest, which needs lock file version %d", i+1, e.Reference, VersionPending)
			}
		}
	}
	if f.Version < VersionMediaType {
		for i, e := range f.Images {
			if e.MediaType != "" {
				return nil, fmt.Errorf("entry %d: %s has a media type, which needs lock file version %d", i+1, e.Reference, VersionMediaType)
			}
		}
	}
	if f.Version < VersionVerified {
		for i, e := range f.Images {
			if e.Verified != nil {
				return nil, fmt.Errorf("entry %d: %s has a verification, which needs lock file version %d", i+1, e.Reference, VersionVerified)
			}
		}
	}
	return New(f.Images)
}

// yamlLine finds the line in a YAML decoder's message.
var yamlLine = regexp.MustCompile(`line (\d+)`)

// MaxSize bounds the lock file Read reads: 64 MiB, about 300,000 entries.
const MaxSize = 64 << 20

// Read reads and parses the lock file at path, which must be a regular
// file (a FIFO or a device would block or never end) of at most MaxSize
// bytes.
func Read(path string) (*Lock, error) {
	b, err := readfile.Regular(path, MaxSize)
	if err != nil {
		return nil, fmt.Errorf("reading lock file: %w", err)
	}
	l, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("reading lock file %s: %w", path, err)
	}
	return l, nil
}

// Lookup returns the digest locked for ref and platform, as
// v1.Platform.String formats it ("" for none). ref is matched by its fully
// qualified name, so any spelling of it finds the entry. A nil Lock has no
// entries.
func (l *Lock) Lookup(ref name.Reference, platform string) (v1.Hash, bool) {
	if l == nil {
		return v1.Hash{}, false
	}
	e, ok := l.index[key{ref.Name(), platform, ""}]
	return e.digest, ok
}

// LookupPolicy returns the tag and the digest locked for ref, platform
// and the tag policy of ref's repository, as tagpolicy.TagPolicy.String
// writes it: an entry of another policy (or of none) is not found, so
// that a changed policy is resolved again.
func (l *Lock) LookupPolicy(ref name.Reference, platform, policy string) (tag string, h v1.Hash, ok bool) {
	if l == nil || policy == "" {
		return "", v1.Hash{}, false
	}
	e, ok := l.index[key{ref.Name(), platform, policy}]
	return e.tag, e.digest, ok
}

// MediaType returns the media type locked for ref, platform and tag
// policy ("" for none), or "" when the entry has none or there is no
// entry.
func (l *Lock) MediaType(ref name.Reference, platform, policy string) string {
	if l == nil {
		return ""
	}
	return l.index[key{ref.Name(), platform, policy}].mediaType
}

// Pending returns the digest that waits to be pinned for ref, platform
// and tag policy ("" for none), or nil when none does or there is no
// entry.
func (l *Lock) Pending(ref name.Reference, platform, policy string) *Pending {
	if l == nil {
		return nil
	}
	if p := l.index[key{ref.Name(), platform, policy}].pending; p != nil {
		c := *p
		return &c
	}
	return nil
}

// LookupVerified returns the verification recorded for ref, platform
// and tag policy ("" for none), and the digest it is of.
func (l *Lock) LookupVerified(ref name.Reference, platform, policy string) (*Verification, v1.Hash, bool) {
	if l == nil {
		return nil, v1.Hash{}, false
	}
	k := key{ref.Name(), platform, policy}
	v, ok := l.verified[k]
	return v, l.index[k].digest, ok
}

// Entries returns the entries, normalised and sorted by reference, then
// platform. The caller may modify the slice.
func (l *Lock) Entries() []Entry {
	if l == nil {
		return nil
	}
	return append([]Entry(nil), l.entries...)
}

// Len returns the number of entries.
func (l *Lock) Len() int {
	if l == nil {
		return 0
	}
	return len(l.entries)
}

// Marshal returns the lock file's bytes. They depend only on the set of
// entries: the same entries in any order give the same bytes.
func (l *Lock) Marshal() ([]byte, error) {
	f := file{Version: VersionNoPolicy, Images: l.Entries()}
	if f.Images == nil {
		f.Images = []Entry{}
	}
	for _, e := range f.Images {
		if e.Policy != "" && f.Version < Version {
			f.Version = Version
		}
		if e.Verified != nil && f.Version < VersionVerified {
			f.Version = VersionVerified
		}
		if e.MediaType != "" && f.Version < VersionMediaType {
			f.Version = VersionMediaType
		}
		if e.Pending != nil {
			f.Version = VersionPending
		}
	}
	var buf bytes.Buffer
	buf.WriteString(header)
	enc := yaml.NewEncoderWithOptions(&buf, &yaml.EncoderOptions{SeqIndent: yaml.WideSequenceStyle})
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("encoding lock file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding lock file: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteFile writes the lock file to path atomically: readers, and runs
// that write the same file at once, see the old file or the new one,
// never a mix. A new file gets mode 0644, as it is meant to be committed;
// an existing one keeps its mode, and a symbolic link is written through.
func (l *Lock) WriteFile(path string) error {
	b, err := l.Marshal()
	if err != nil {
		return err
	}
	p, err := atomicfile.Prepare(path, b, 0o644)
	if err != nil {
		return fmt.Errorf("writing lock file %w", err)
	}
	return p.Commit()
}
