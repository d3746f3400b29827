package pin

import (
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
	"github.com/digestpin/digestpin/verification"
)

// Options configure a Pinner. The zero value pins with the renderer's
// defaults, resolving every image at its registry with resolve's defaults,
// and writes no file.
type Options struct {
	// Renderer holds the output settings: Mode, ChecksumAnnotation,
	// PodSpecPaths, ImagePaths, ChecksumPaths, KeepUnresolved and Warnf. Its Resolver must be nil:
	// each Pin sets it to the chain it assembles.
	Renderer renderer.Renderer
	// ResolveOptions configure the registry resolver that each Pin makes
	// anew, so that every render sees the registries as they are then.
	// Platform is added to them; do not pass resolve.WithPlatform.
	ResolveOptions []resolve.Option
	// Registry, when set, answers instead of a registry resolver made
	// with ResolveOptions (which are then ignored). It must be safe for
	// concurrent use. It resolves by reference alone, so a platform
	// cannot be passed to it: see Platform.
	Registry resolution.Resolver
	// Platform, when set, pins that platform's manifest instead of the
	// multi-platform index. It needs an OS and an architecture. It is
	// written into the lock file and the report, and keys the cache, as
	// the platform the digests are for. With a Registry, which the
	// platform cannot reach, that holds only when the Registry resolves
	// for that very platform: New refuses Platform unless the Registry
	// is a PlatformResolver that says so (a *resolve.Resolver made with
	// resolve.WithPlatform is one). Without Platform, a PlatformResolver's
	// platform is the one written.
	Platform *v1.Platform

	// Lock is a lock file whose digests are taken before any registry is
	// asked; "" means none.
	Lock string
	// Frozen, with Lock, asks no registry: a reference missing from the
	// lock file fails the Pin.
	Frozen bool
	// Check, with Lock, asks the registry about every reference and fails
	// the Pin, naming each image, where the registry differs from the lock
	// file.
	Check bool
	// CacheDir and CacheTTL keep resolutions on disk for CacheTTL; a zero
	// CacheTTL disables the cache, and an empty CacheDir with a TTL means
	// resolve.DefaultCacheDir. Neither --frozen nor --check runs consult
	// the cache.
	CacheDir string
	CacheTTL time.Duration
	// StaleIfError lets the cache answer for a registry that cannot
	// (down, hung, 5xx, 429 after its retries; resolve.Unavailable) with
	// the last digest it recorded for the reference, when that was
	// resolved at most CacheTTL plus StaleIfError ago: source
	// resolution.Stale, with a warning that says how old it is
	// (resolve.StaleIfError). It needs CacheTTL; 0 never answers stale.
	StaleIfError time.Duration
	// MinAge holds back a digest that is new for an image (the registry
	// moved its tag, or a tag policy chose another) until it has been
	// seen for the image's waiting period: until then the digest pinned
	// before stays pinned (source resolution.Held), and the lock file and
	// the report say what waits and until when. When a digest was first
	// seen is kept in the cache (CacheTTL, on disk or Redis: every
	// process sharing it agrees) and in the lock file (WriteLock, with
	// the file it replaces, or Lock); MinAge needs one of them, and
	// excludes Frozen, which sees nothing new. An image seen for the
	// first time has nothing older to keep: it is pinned at once. nil,
	// or no period above 0, holds nothing back.
	MinAge *MinAges
	// MinAgeCreated counts the waiting period from when the image of the
	// new digest was built, as its registry says (BuildTimes: a request
	// or two per new digest, kept in the cache), instead of from when it
	// was first seen; an image whose registry gives no time counts from
	// when it was first seen.
	MinAgeCreated bool
	// Cache, when set, keeps resolutions there instead of in CacheDir,
	// e.g. on a Redis that several processes share; it excludes
	// CacheDir and needs CacheTTL, the age up to which its entries are
	// taken (a Cache may drop them sooner). It must be safe for
	// concurrent use.
	Cache resolve.Cache

	// WriteLock is a lock file to write every resolution to; "" means
	// none. It may be the Lock file.
	WriteLock string
	// Report is a file to write the JSON report of every image to; ""
	// means none. With a previous state to compare with (see Changes),
	// the report holds each image's previous digest and the change set.
	Report string
	// DiffAgainst is a previous output of digestpin (a manifest stream)
	// whose pinned images the run is compared with, read with the
	// Renderer's settings and never a registry; "" means none. Without
	// it, a run is compared with the Lock file, else with the WriteLock
	// file as it was before the run, when it exists, else, with neither
	// and a cache (CacheTTL), with the last digests the cache recorded
	// before the run (AgainstCache).
	DiffAgainst string
	// Summary is a file to write the change set to in Markdown (a table
	// for a pull request or a CI job summary); SummaryText one to write
	// it to as plain text, one line per image (for a commit message or
	// a log); "" means none.
	Summary, SummaryText string
	// Changes, when true, computes Result.Changes even when no file
	// needs it (a command that prints the change set). Without it, and
	// without Report, Summary or SummaryText, a Pin reads no previous
	// state and Result.Changes is nil.
	Changes bool
	// Generated, when set, is called once the stream is rendered; what it
	// returns is the report's "generated" section (digestpin template sets
	// it to the certificates and varying calls of its render).
	Generated func() *Generated

	// TagPolicies, when set, choose the tag of the images of their
	// repositories (see tagpolicy.TagPolicy): a tags/list per repository,
	// once per Pin, and the chosen tag is written into the output, the
	// lock file and the report. nil means none: every image follows its
	// own tag. It excludes the annotate mode, and with Registry set needs
	// a Registry that is a tagpolicy.TagSource.
	TagPolicies *tagpolicy.TagPolicies
	// KeelAnnotations gives the images of each workload with Keel's
	// keel.sh/policy annotation (or label) the tag policy Keel's policy
	// means (tagpolicy.KeelStrategy), relative to each image's tag; it wins
	// over TagPolicies. A workload without one is unchanged. A reference
	// that two workloads use under different policies fails the Pin.
	KeelAnnotations bool
	// MaxTags bounds how many candidates the latest strategy reads the
	// creation time of; 0 means tagpolicy.DefaultMaxTags.
	MaxTags int

	// Verify, when set, are the signature policies and what verifies
	// under them: the digest of every image a policy covers is verified
	// before the Pin succeeds, and the lock file and the report record
	// who signed it. Package verify's *Policies verifies with
	// sigstore-go; a Pinner never links it itself, so a program that
	// verifies sets it. nil, or no policy, means no image is verified;
	// but New fails when a configuration file declared signature
	// policies (AddConfig) and Verify was nil.
	Verify verification.Policies
	// Signatures, when set, is where signatures are read instead of the
	// registry resolver (or, with Registry, a registry resolver made with
	// ResolveOptions). It must be safe for concurrent use.
	Signatures verification.Registry

	// Progress, when set, is called as each resolution of a Pin begins
	// and ends, with the counts so far, and once more with Finished set
	// when the Pin's render has ended. The calls of one Pin come one at a
	// time, from the goroutines that resolve, with counts in the order
	// they changed; the callback should return quickly, since a
	// resolution waits for it. Several Pins at once call it
	// concurrently. nil means no calls.
	Progress func(Progress)

	// Logf receives debug messages (each resolution, the files written);
	// nil discards them. Warnings go to Renderer.Warnf.
	Logf func(format string, args ...any)
	// OptionNames names the options in the messages of a Pin that say
	// which option would change the outcome ("and Frozen asks no
	// registry"): a command passes the names of its flags. Pin carries
	// it on its context (resolution.WithOptionNames) to every layer: the
	// lock file, the Renderer, the registry resolver. nil leaves the
	// context's names, if any; without, each option goes by its Go name.
	OptionNames resolution.OptionNames

	// now is the clock of the waiting periods; nil: time.Now. Tests set
	// it.
	now func() time.Time
}

// PlatformResolver is a Registry that says which platform it resolves
// for, as *resolve.Resolver does: Platform returns nil when it resolves
// the multi-platform index.
type PlatformResolver interface {
	resolution.Resolver
	Platform() *v1.Platform
}

var _ PlatformResolver = (*resolve.Resolver)(nil)

// OptionError is an Options field with a value that cannot work, alone
// or beside another field. A command names each field by the flag that
// set it with Message, rather than by rewriting Error's text.
type OptionError struct {
	// Field is the Options field, e.g. "Frozen".
	Field string
	// Rule and Other, when Other is set, say that Field "needs" or
	// "excludes" the field Other, e.g. "needs" and "Lock".
	Rule, Other string
	// Reason says the rest, in words that follow the field's name (and
	// Rule and Other): "FILE", ": resolutions are kept in one place",
	// "must not be negative, got -1". It names no other field.
	Reason string
	// Err, when set, is why another package refused the field's value
	// (renderer for Renderer, verify for Verify).
	Err error
}

func (e *OptionError) Error() string { return e.Message(func(field string) string { return field }) }

func (e *OptionError) Unwrap() error { return e.Err }

// Message formats e with each field as name calls it: a command passes
// the names of its flags ("--frozen needs --lock FILE"); a field that
// name calls "" is left out of the message.
func (e *OptionError) Message(name func(field string) string) string {
	var parts []string
	add := func(s string) {
		switch {
		case s == "":
		case len(parts) > 0 && (s[0] == ':' || s[0] == ','):
			parts[len(parts)-1] += s
		default:
			parts = append(parts, s)
		}
	}
	add(name(e.Field))
	if e.Other != "" {
		add(e.Rule)
		add(name(e.Other))
	}
	add(e.Reason)
	if e.Err != nil {
		if len(parts) > 0 {
			parts[len(parts)-1] += ":"
		}
		parts = append(parts, e.Err.Error())
	}
	return strings.Join(parts, " ")
}

// validate rejects options that cannot mean anything.
func (o *Options) validate() error {
	bad := func(field, reason string) error { return &OptionError{Field: field, Reason: reason} }
	rule := func(field, rule, other, reason string) error {
		return &OptionError{Field: field, Rule: rule, Other: other, Reason: reason}
	}
	switch {
	case o.Frozen && o.Check:
		return rule("Frozen", "excludes", "Check", ": the one asks no registry, the other asks it about every image")
	case o.Frozen && o.Lock == "":
		return rule("Frozen", "needs", "Lock", "FILE")
	case o.Check && o.Lock == "":
		return rule("Check", "needs", "Lock", "FILE")
	case o.MinAge.Enabled() && o.Frozen:
		return rule("MinAge", "excludes", "Frozen", ": a frozen run asks no registry, so no digest is new to it")
	case o.MinAge.Enabled() && o.CacheTTL == 0 && o.WriteLock == "" && !o.Check:
		return rule("MinAge", "needs", "CacheTTL", "or a lock file to write, to keep when each new digest was first seen")
	case o.MinAgeCreated && !o.MinAge.Enabled():
		return rule("MinAgeCreated", "needs", "MinAge", "DURATION, the waiting period it counts")
	case o.CacheTTL < 0:
		return bad("CacheTTL", fmt.Sprintf("must not be negative, got %s", o.CacheTTL))
	case o.Cache != nil && o.CacheDir != "":
		return rule("Cache", "excludes", "CacheDir", ": resolutions are kept in one place")
	case o.Cache != nil && o.CacheTTL == 0:
		return rule("Cache", "needs", "CacheTTL", "DURATION, how long a resolution stays valid")
	case o.CacheDir != "" && o.CacheTTL == 0:
		return rule("CacheDir", "needs", "CacheTTL", "DURATION, how long a resolution stays valid")
	case o.Platform != nil && (o.Platform.OS == "" || o.Platform.Architecture == ""):
		return bad("Platform", fmt.Sprintf("%q has no OS or no architecture: want os/arch[/variant]", o.Platform.String()))
	case o.TagPolicies.Len() > 0 && o.Renderer.Mode == renderer.ModeAnnotate:
		return bad("TagPolicies", "excludes the annotate mode: the image fields would keep the tags as written, and the pods run other images than the checksum covers")
	case o.MaxTags < 0:
		return bad("MaxTags", fmt.Sprintf("must not be negative, got %d", o.MaxTags))
	case o.Verify != nil && o.Verify.Check() != nil:
		if u, ok := o.Verify.(unwired); ok {
			return bad("Verify", u.reason())
		}
		return &OptionError{Field: "Verify", Err: o.Verify.Check()}
	case o.Renderer.Resolver != nil:
		return bad("Renderer.Resolver", "is set: a Pinner assembles its own chain; set Registry to replace the registry")
	}
	if o.Registry != nil && o.Platform != nil {
		// Resolve has no platform to pass: the Registry must resolve
		// for this one already, or the lock file and the report would
		// name a platform that no digest is for.
		pr, ok := o.Registry.(PlatformResolver)
		switch {
		case !ok:
			return bad("Platform", o.Platform.String()+" with a Registry that does not say which platform it resolves for (a PlatformResolver): the Registry resolves by reference alone, so the lock file and the report would name a platform it was never asked for; make the Registry resolve for the platform (resolve.WithPlatform) and leave Platform empty, or implement PlatformResolver")
		case pr.Platform() == nil:
			return bad("Platform", o.Platform.String()+", but the Registry resolves for the multi-platform index: make it resolve for the platform (resolve.WithPlatform)")
		case !pr.Platform().Equals(*o.Platform):
			return bad("Platform", o.Platform.String()+", but the Registry resolves for "+pr.Platform().String()+": one platform, in both")
		}
	}
	return nil
}

// platform is the canonical form of the platform the digests are for,
// or "": Platform, or else the platform of a Registry that says it
// resolves for one (validate made sure the two agree).
func (o *Options) platform() string {
	p := o.Platform
	if pr, ok := o.Registry.(PlatformResolver); ok && p == nil {
		p = pr.Platform()
	}
	if p == nil {
		return ""
	}
	return p.String()
}

// verifies reports whether a Pin verifies signatures: Verify holds a
// policy.
func (o *Options) verifies() bool {
	return o.Verify != nil && len(o.Verify.Policies()) > 0
}

// wantsChanges reports whether a Pin computes its change set.
func (o *Options) wantsChanges() bool {
	return o.Changes || o.Report != "" || o.Summary != "" || o.SummaryText != ""
}

func (o *Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

func (o *Options) warnf(format string, args ...any) {
	if o.Renderer.Warnf != nil {
		o.Renderer.Warnf(format, args...)
	}
}
