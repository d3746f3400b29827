package pinflags

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/config"
	"github.com/digestpin/digestpin/internal/redisstore"
	"github.com/digestpin/digestpin/kindpath"
	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolve"
	"github.com/digestpin/digestpin/resolve/credentials"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
	"github.com/digestpin/digestpin/verify"
)

// Options are the pinning flags, once parsed: what AddFlags binds onto
// the library's options, and the settings that PinOptions completes them
// with. The zero Options is ready for AddFlags, which sets each default;
// an Options is not safe for concurrent use.
type Options struct {
	// Pin holds what the flags set of a Pinner's options: the
	// renderer's settings, the lock, cache and report files, the tag
	// and signature policies. PinOptions completes them.
	Pin pin.Options
	// Registry are the registry resolver's flags.
	Registry RegistryFlags
	// Redis are the flags of the resolution cache on Redis.
	Redis RedisFlags
	// TagAllow and TagIgnore are the tag filters, IMAGE=REGEXP: they
	// filter the policies of the flags and of the configuration file
	// alike, so they are set once the file is read (addTagFilters).
	TagAllow, TagIgnore []string
	// Verify are --verify's signature policies, which PinOptions
	// completes and gives to the Pinner (pin.Options.Verify); nil for
	// none.
	Verify *verify.Policies
	// TrustedRoot is --trusted-root's file, read before the
	// configuration file, whose trustedRoot it replaces unread.
	TrustedRoot string
	// Config is --config's file; "" for none.
	Config string
	// Timeout is --timeout, the bound on the whole run (default 2m),
	// which the caller puts on the context it pins with.
	Timeout time.Duration

	// FlagName is how a message names a flag, given by the name AddFlags
	// binds it under ("lock"): as the person set it, under the
	// caller's name for it or as the variable that set it. Nil names
	// it "--lock".
	FlagName func(flag string) string
	// UserAgent is the User-Agent sent to registries; "" leaves
	// go-containerregistry's.
	UserAgent string

	// configTagPolicies says that the tag policies are the
	// configuration file's alone, for messages about them.
	configTagPolicies bool
}

// RegistryFlags are the flags of the registry resolver: options yields
// its resolve.Options.
type RegistryFlags struct {
	Jobs           int
	RequestTimeout time.Duration
	Insecure       []string
	CAFiles        []string
	PullSecrets    []string
	Mirrors        []resolve.Mirror
	MirrorOnly     bool
	MirrorLag      resolve.MirrorLag
}

// DefaultStaleIfError is --stale-if-error's default: a registry outage of
// up to a day past the cache's TTL renders with the digests pinned
// before it, warned about, rather than failing every render.
const DefaultStaleIfError = 24 * time.Hour

// AddFlags defines the pinning flags on fs, writing into o, and sets
// their defaults; fs keeps them in the order defined, unless it sorts
// its flags.
//
// Each flag is bound straight onto the option it sets: the Pinner's
// (o.Pin), the registry resolver's (o.Registry), the Redis cache's
// (o.Redis), or one that PinOptions reads. The path flags add to the
// built-in paths, which the Renderer holds from the start.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	p, r := &o.Pin, &o.Pin.Renderer
	r.PodSpecPaths = slices.Clone(kindpath.DefaultPodSpecs)
	r.ImagePaths = slices.Clone(kindpath.DefaultImages)
	fs.Var(newModeValue(&r.Mode, renderer.ModePin), "mode", "image field form: pin (name:tag@sha256:…), digest (name@sha256:…) or annotate (field untouched, checksum only)")
	fs.Var(newAnnotationValue(&r.ChecksumAnnotation, renderer.DefaultChecksumAnnotation), "checksum-annotation", "pod-template annotation that holds the checksum of its images")
	fs.Var(platformValue{&p.Platform}, "platform", "pin one platform's manifest (`os/arch[/variant]`) instead of the multi-platform index")
	fs.Var(newListValue(&r.PodSpecPaths, true, kindpath.ParsePodSpec), "pod-spec-path", "also scan pod specs at `[GROUP/]KIND=FIELD.PATH` (repeatable; \"*\" steps into every list item)")
	fs.Var(newListValue(&r.ImagePaths, true, kindpath.ParseImage), "image-path", "also pin the image reference in the string field at `[GROUP/]KIND=FIELD.PATH` (repeatable; \"*\" steps into every list item, FIELD[KEY=VALUE] into the items whose KEY is VALUE, as in env[name=AGENT_IMAGE].value; the last field names the image field, or a flag's value in a list of arguments, as in args[flag=--reloader-image]; PATH|PATH.IN.TEXT goes on into the YAML or JSON document a literal block string holds, as in ConfigMap=data.policy\\.yaml|spec.image, \\ escaping . | \\ in a key)")
	fs.Var(newListValue(&r.ChecksumPaths, true, kindpath.ParseChecksum), "checksum-path", "write the checksum of a kind's --image-path fields into metadata.annotations of the mapping at `[GROUP/]KIND=FIELD.PATH` (\".\": the object), covering the image fields inside it (repeatable; default: no checksum)")
	fs.StringVar(&o.Config, "config", "", "read pod spec, image and checksum paths and tag policies from the configuration `FILE` (apiVersion digestpin.dev/v1alpha1, kind Config); flags add to it")
	fs.Var(newPositiveIntValue(&o.Registry.Jobs, resolve.DefaultJobs), "concurrency", "distinct references resolved at once")
	fs.Var(newPositiveDurationValue(&o.Timeout, 2*time.Minute, "2m"), "timeout", "bound on the whole run, reading the input included")
	fs.Var(newPositiveDurationValue(&o.Registry.RequestTimeout, 30*time.Second, "30s"), "request-timeout", "bound on one registry request")
	fs.Var(newOnErrorValue(&r.KeepUnresolved), "on-error", "an image that cannot be resolved: fail the run, or keep it unpinned with a warning")
	fs.BoolVar(&r.Strict, "strict", false, "fail the run when a value that looks like an image reference is left as a tag because no image field leads to it (an argument, an env var, a field of a custom resource), instead of warning")
	fs.StringSliceVar(&o.Registry.Insecure, "insecure-registry", nil, "allow plain HTTP and unverified TLS for `HOST[:PORT]` only (repeatable)")
	fs.StringSliceVar(&o.Registry.CAFiles, "ca-file", nil, "also trust the PEM CA certificates in `FILE` for registries (repeatable)")
	fs.StringSliceVar(&o.Registry.PullSecrets, "pull-secret", nil, "registry credentials from `FILE`: a Kubernetes image pull secret's .dockerconfigjson (as mounted) or the Secret as JSON; tried before the docker config (repeatable)")
	fs.Var(newListValue(&o.Registry.Mirrors, true, parseMirror), "registry-mirror", "ask mirror TO about the images of registry FROM (`FROM=TO`): FROM as docker.io for Docker Hub, TO as host[:port][/path-prefix]; the output keeps the original name (repeatable; mirrors in order, then FROM)")
	fs.BoolVar(&o.Registry.MirrorOnly, "mirror-only", false, "never ask a registry that has a --registry-mirror itself")
	fs.Var(newMirrorLagValue(&o.Registry.MirrorLag), "mirror-lag", "a mirror that serves another digest for a tag than its registry, asked at the same time: `MODE` error fails naming both, warn pins the mirror's digest, off asks the registry only when no mirror answers")
	fs.StringVar(&p.WriteLock, "write-lock", "", "after a successful run, write every resolution to the lock `FILE` (may be the --lock file)")
	fs.StringVar(&p.Lock, "lock", "", "take digests from the lock `FILE`; references missing from it are resolved, or fail with --frozen")
	fs.BoolVar(&p.Frozen, "frozen", false, "with --lock: never contact a registry (but, with --mirror-only, a mirror, to check that it holds each locked digest); a reference missing from the lock file is an error")
	fs.BoolVar(&p.Check, "check", false, "with --lock: resolve every reference at its registry and fail, naming each image, when a digest differs from the lock file")
	fs.StringVar(&p.CacheDir, "cache-dir", "", "keep resolutions in `DIR` for --cache-ttl (default: digestpin in the user cache folder, $XDG_CACHE_HOME or ~/.cache)")
	fs.DurationVar(&p.CacheTTL, "cache-ttl", 0, "reuse a cached resolution younger than `DURATION` (e.g. 5m) without asking the registry; 0 disables the cache")
	fs.DurationVar(&p.StaleIfError, "stale-if-error", DefaultStaleIfError, "when a registry cannot answer (down, hung, 5xx, 429 after retries; not 401, 403 or 404), pin the cache's last digest of the image if it was resolved at most `DURATION` past --cache-ttl ago, with a warning; 0 never")
	fs.Var(minAgeValue(&p.MinAge), "min-age", "keep the digest pinned before of an image whose tag moved (or whose --tag-policy chose another) until the new digest has been seen for `[IMAGE-GLOB=]DURATION` (e.g. 24h; IMAGE-GLOB=0 exempts the images of matching repositories; the most specific glob wins; repeatable); when each digest was first seen is kept in the cache (--cache-ttl, --cache) and the --write-lock file; an image seen for the first time is pinned at once")
	fs.Var(minAgeFromValue{&p.MinAgeCreated}, "min-age-from", "count --min-age from `WHEN`: first-seen (when digestpin first saw the new digest) or created (when the image was built, as its registry says: a request or two per new digest; first-seen when it says nothing)")
	fs.StringVar(&p.Report, "report", "", "after a successful run, write a JSON report of every image (reference, digest, source, workloads; the digest before and what changed, when there is a lock file, --diff-against or a cache to compare with) to `FILE`")
	fs.StringVar(&p.DiffAgainst, "diff-against", "", "compare the images with those pinned in `FILE`, an earlier output of digestpin (read without asking a registry), rather than with the --lock file, the --write-lock file as it was, or the cache as it was; also name the workloads whose pod template changes for another reason and the Secrets whose keys change (by key, never by value)")
	fs.StringVar(&p.Summary, "summary", "", "write what moved to `FILE` in Markdown (a table of old → new digest per image and the workloads that roll, for a pull request or $GITHUB_STEP_SUMMARY), after a successful run or a --check that differs")
	fs.StringVar(&p.SummaryText, "summary-text", "", "write what moved to `FILE` as plain text, one line per image (for a commit message), as --summary does")
	fs.Var(tagPolicyValue(&p.TagPolicies), "tag-policy", "choose the tag of repository IMAGE's images (`IMAGE=STRATEGY`): semver:CONSTRAINT (highest version, Helm's syntax, e.g. semver:~1.4), latest (newest image), name:REGEXP (alphabetically last match) or digest (the tag as written); repeatable")
	fs.Var(verifyValue(&o.Verify), "verify", "verify the signature of the digest pinned for the images of repositories matching IMAGE-GLOB (`IMAGE-GLOB=POLICY`): key:FILE (a cosign public key), keyless:IDENTITY@ISSUER or keyless:/REGEXP/@ISSUER (needs --trusted-root), or none; terms joined by \" or \" (any one) or \" and \" (all); repeatable")
	fs.StringVar(&o.TrustedRoot, "trusted-root", "", "the Sigstore trusted root (trusted_root.json) that keyless --verify policies are checked against; never fetched")
	fs.Var(newListValue(&o.TagAllow, false, parseTagFilter), "tag-allow", "the --tag-policy of IMAGE considers only tags matching REGEXP (`IMAGE=REGEXP`; repeatable)")
	fs.Var(newListValue(&o.TagIgnore, false, parseTagFilter), "tag-ignore", "the --tag-policy of IMAGE never considers tags matching REGEXP (`IMAGE=REGEXP`; repeatable)")
	fs.Var(newPositiveIntValue(&p.MaxTags, tagpolicy.DefaultMaxTags), "max-tags", "the latest tag policy reads the creation time of at most `N` candidates, the highest in natural order")
	fs.BoolVar(&p.KeelAnnotations, "keel-annotations", false, "give the images of each workload with Keel's keel.sh/policy annotation (or label) the tag policy it means (all, major, minor, patch, force with keel.sh/match-tag, glob:, regexp:), relative to each image's tag")
	fs.StringVar(&o.Redis.URL, "cache", "", "keep resolutions for --cache-ttl on the Redis at `URL` (redis://[USER@]HOST[:PORT][/DB], or rediss:// for TLS), shared by every process that uses it; excludes --cache-dir")
	fs.StringVar(&o.Redis.PasswordFile, "redis-password-file", "", "the Redis password is in `FILE` (default: the URL's, else $DIGESTPIN_REDIS_PASSWORD, else $REDIS_PASSWORD)")
	fs.StringVar(&o.Redis.CAFile, "redis-ca-file", "", "trust the PEM CA certificates in `FILE` for a rediss:// Redis instead of the system's")
	fs.StringVar(&o.Redis.Prefix, "redis-prefix", redisstore.DefaultPrefix, "begin every Redis key with `PREFIX`")
}

// name is how a message names flag: FlagName's name, or "--flag".
func (o *Options) name(flag string) string {
	if o.FlagName != nil {
		return o.FlagName(flag)
	}
	return "--" + flag
}

// PinOptions completes the options that the flags bound for a Pinner:
// the configuration file beneath them, the trusted root and the tag
// filters, the registry resolver's options, the Redis cache and the
// loggers, warnf for warnings and logf for debug messages (nil discards
// them). pin.New checks the rest, with messages that LibraryError puts
// in the person's words. It reads the files the flags name (the
// configuration file, the trusted root, key files, pull secrets) and
// connects to no registry; with --cache, it connects to Redis.
func (o *Options) PinOptions(warnf, logf func(format string, args ...any)) (pin.Options, error) {
	if warnf == nil {
		warnf = discard
	}
	if logf == nil {
		logf = discard
	}
	opts := o.Pin
	var cfg config.Config
	if o.Config != "" {
		var err error
		if cfg, err = config.Load(o.Config); err != nil {
			return pin.Options{}, fmt.Errorf("%s: %w", o.name("config"), err)
		}
	}
	// The signature policies are verified with package verify, which
	// takes the file's too (AddConfig): set even without a policy.
	// --trusted-root before the file, whose trustedRoot it replaces
	// unread; never read for no policy at all.
	ps := o.Verify
	if o.TrustedRoot != "" {
		if ps.Len() == 0 && len(cfg.Verify) == 0 {
			return pin.Options{}, fmt.Errorf("%s: no %s policy needs it", o.name("trusted-root"), o.name("verify"))
		}
		ps = ps.Clone()
		if err := ps.SetTrustedRoot(o.TrustedRoot); err != nil {
			return pin.Options{}, fmt.Errorf("%s: %w", o.name("trusted-root"), err)
		}
	}
	if ps == nil {
		ps = &verify.Policies{}
	}
	opts.Verify = ps
	o.configTagPolicies = opts.TagPolicies == nil && len(cfg.TagPolicies) > 0
	if err := opts.AddConfig(cfg); err != nil {
		return pin.Options{}, fmt.Errorf("%s: %w", o.name("config"), err)
	}
	if err := o.addTagFilters(&opts); err != nil {
		return pin.Options{}, err
	}
	ropts, err := o.Registry.options(o, logf)
	if err != nil {
		return pin.Options{}, err
	}
	opts.ResolveOptions = ropts
	if opts.Cache, err = o.Redis.cache(o, opts.CacheTTL, o.Registry.RequestTimeout, warnf, logf); err != nil {
		return pin.Options{}, err
	}
	opts.Renderer.Warnf = warnf
	opts.Logf = logf
	opts.OptionNames = o.OptionName
	return opts, nil
}

// discard is the logger of nil.
func discard(string, ...any) {}

// addTagFilters sets --tag-allow, then --tag-ignore, on the tag policies
// of the flags and the configuration file, so that neither their order
// nor the file's matters. A filter replaces the file's of the same image.
func (o *Options) addTagFilters(opts *pin.Options) error {
	if len(o.TagAllow)+len(o.TagIgnore) == 0 {
		return nil
	}
	ps := opts.TagPolicies.Clone()
	for _, f := range []struct {
		flag    string
		entries []string
		add     func(image, value string) error
	}{
		{"tag-allow", o.TagAllow, ps.Allow},
		{"tag-ignore", o.TagIgnore, ps.Ignore},
	} {
		for _, e := range f.entries {
			if err := pin.AddTagEntry(e, "IMAGE=REGEXP", f.add); err != nil {
				return fmt.Errorf("invalid %s %q: %w", o.name(f.flag), e, err)
			}
		}
	}
	opts.TagPolicies = ps
	return nil
}

// ResolveOptions are the registry resolver's options that the registry
// flags (o.Registry) and UserAgent set, with logf for its debug
// messages (nil discards them): the resolver of PinOptions, without the
// rest of the pinning, for a command that reaches registries as the
// pinning does and pins nothing (digestpin flux push). It reads the pull
// secrets. resolve.New checks the options; LibraryError names their
// flags.
func (o *Options) ResolveOptions(logf func(format string, args ...any)) ([]resolve.Option, error) {
	if logf == nil {
		logf = discard
	}
	return o.Registry.options(o, logf)
}

// options yields the registry resolver's options: credentials from the
// pull secrets in the order given, then the docker config with its
// credential helpers. resolve.New checks them.
func (r *RegistryFlags) options(o *Options, logf func(string, ...any)) ([]resolve.Option, error) {
	var keychains []authn.Keychain
	for _, f := range r.PullSecrets {
		kc, err := credentials.ReadPullSecret(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.name("pull-secret"), err)
		}
		keychains = append(keychains, kc)
	}
	opts := []resolve.Option{
		resolve.WithKeychain(credentials.Keychains(append(keychains, credentials.DockerKeychain)...)),
		resolve.WithJobs(r.Jobs),
		resolve.WithRequestTimeout(r.RequestTimeout),
		resolve.WithInsecureRegistries(r.Insecure...),
		resolve.WithCAFiles(r.CAFiles...),
		resolve.WithMirrorOnly(r.MirrorOnly),
		resolve.WithMirrorLag(r.MirrorLag),
	}
	if o.UserAgent != "" {
		opts = append(opts, resolve.WithUserAgent(o.UserAgent))
	}
	opts = append(opts, resolve.WithLogf(logf))
	for _, m := range r.Mirrors {
		opts = append(opts, resolve.WithMirror(m.From, m.To))
	}
	return opts, nil
}

// optionFlags names the flag that sets each pin.Options field and
// resolve option, for the library's errors (LibraryError) and messages
// (pin.Options.OptionNames, which a Pin carries on its context to the
// renderer and the resolver): the one place where the library's names
// map to the flags'. "" leaves the name out: the renderer's errors say
// what they are about.
var optionFlags = map[string]string{
	"Lock":          "lock",
	"Frozen":        "frozen",
	"Check":         "check",
	"CacheDir":      "cache-dir",
	"CacheTTL":      "cache-ttl",
	"StaleIfError":  "stale-if-error",
	"MinAge":        "min-age",
	"MinAgeCreated": "min-age-from created",
	"Cache":         "cache",
	"Platform":      "platform",
	"TagPolicies":   "tag-policy",
	"Verify":        "verify",
	"MaxTags":       "max-tags",
	"Renderer":      "",
	"DiffAgainst":   "diff-against",
	"Summary":       "summary",
	"SummaryText":   "summary-text",
	// The renderer's fields, for its messages.
	"Mode":           "mode",
	"ImagePaths":     "image-path",
	"Strict":         "strict",
	"KeepUnresolved": "on-error",

	"WithJobs":               "concurrency",
	"WithRequestTimeout":     "request-timeout",
	"WithPlatform":           "platform",
	"WithInsecureRegistries": "insecure-registry",
	"WithCAFiles":            "ca-file",
	"WithMirrorOnly":         "mirror-only",
	"WithMirror":             "registry-mirror",
	"WithMirrorLag":          "mirror-lag",
}

// OptionName is how the person set a pin.Options field or resolve
// option: its flag (FlagName), or the configuration file's tagPolicies
// when the tag policies are the file's alone; "" for the renderer's
// options as a whole, whose errors say what they are about; the option
// itself when no flag sets it. It is pin.Options.OptionNames of the
// options PinOptions returns.
func (o *Options) OptionName(option string) string {
	flag, ok := optionFlags[option]
	switch {
	case !ok:
		return option
	case flag == "":
		return ""
	case option == "TagPolicies" && o.configTagPolicies:
		return fmt.Sprintf("%s: %s: tagPolicies", o.name("config"), o.Config)
	}
	return o.name(flag)
}

// LibraryError puts an error of pin.New in the person's words: a
// *pin.OptionError or *resolve.OptionError names flags (OptionName)
// instead of the library's fields and options. Other errors are
// returned as they are.
func (o *Options) LibraryError(err error) error {
	var pe *pin.OptionError
	var re *resolve.OptionError
	switch {
	case errors.As(err, &pe):
		return errors.New(pe.Message(o.OptionName))
	case errors.As(err, &re):
		return errors.New(re.Message(o.OptionName))
	}
	return err
}
