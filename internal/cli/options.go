package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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

// Options are the command line, after flags and environment: what the
// flags bind onto the library, and the command's own settings.
type Options struct {
	// pin holds what the flags set of a Pinner's options: the
	// renderer's settings, the lock, cache and report files, the tag and
	// signature policies. pinOptions completes them.
	pin      pin.Options
	registry registryFlags
	redis    redisFlags
	// tagAllow and tagIgnore are the tag filters, IMAGE=REGEXP: they
	// filter the policies of the flags and of the configuration file
	// alike, so they are set once the file is read (addTagFilters).
	tagAllow, tagIgnore []string
	// verify are --verify's signature policies, which pinOptions
	// completes and gives to the Pinner (pin.Options.Verify); nil for
	// none.
	verify *verify.Policies
	// trustedRoot is --trusted-root's file, read before the
	// configuration file, whose trustedRoot it replaces unread.
	trustedRoot string

	filename  string
	config    string
	Timeout   time.Duration
	logFile   string
	ttyErrors bool
	verbose   bool
	version   bool

	// fromEnv holds the flags set from their DIGESTPIN_* variable, so
	// that a message names what the person wrote.
	fromEnv map[string]bool
	// renames are the flags the command names otherwise (TemplateRenames,
	// DeployRenames); nil for the filter.
	Renames map[string]string

	// configTagPolicies says that the tag policies are the
	// configuration file's alone, for messages about them.
	configTagPolicies bool
}

// registryFlags are the flags of the registry resolver: options yields
// its resolve.Options.
type registryFlags struct {
	jobs           int
	requestTimeout time.Duration
	insecure       []string
	caFiles        []string
	pullSecrets    []string
	mirrors        []resolve.Mirror
	mirrorOnly     bool
}

func NewOptions() *Options { return &Options{fromEnv: map[string]bool{}} }

// bind defines every flag on fs, writing into o.
//
// Each flag is bound straight onto the option it sets: the Pinner's
// (o.pin), the registry resolver's (o.registry), the Redis cache's
// (o.redis), or the command's own. The path flags add to the built-in
// paths, which the Renderer holds from the start.
func (o *Options) Bind(fs *pflag.FlagSet) {
	fs.SortFlags = false
	p, r := &o.pin, &o.pin.Renderer
	r.PodSpecPaths = slices.Clone(kindpath.DefaultPodSpecs)
	r.ImagePaths = slices.Clone(kindpath.DefaultImages)
	fs.StringVarP(&o.filename, "filename", "f", "", "read the manifests from `FILE` instead of stdin (\"-\" is stdin)")
	fs.Var(newModeValue(&r.Mode, renderer.ModePin), "mode", "image field form: pin (name:tag@sha256:…), digest (name@sha256:…) or annotate (field untouched, checksum only)")
	fs.Var(newAnnotationValue(&r.ChecksumAnnotation, renderer.DefaultChecksumAnnotation), "checksum-annotation", "pod-template annotation that holds the checksum of its images")
	fs.Var(platformValue{&p.Platform}, "platform", "pin one platform's manifest (`os/arch[/variant]`) instead of the multi-platform index")
	fs.Var(newListValue(&r.PodSpecPaths, true, kindpath.ParsePodSpec), "pod-spec-path", "also scan pod specs at `[GROUP/]KIND=FIELD.PATH` (repeatable; \"*\" steps into every list item)")
	fs.Var(newListValue(&r.ImagePaths, true, kindpath.ParseImage), "image-path", "also pin the image reference in the string field at `[GROUP/]KIND=FIELD.PATH` (repeatable; \"*\" steps into every list item, FIELD[KEY=VALUE] into the items whose KEY is VALUE, as in env[name=AGENT_IMAGE].value; the last field names the image field, or a flag's value in a list of arguments, as in args[flag=--reloader-image])")
	fs.Var(newListValue(&r.ChecksumPaths, true, kindpath.ParseChecksum), "checksum-path", "write the checksum of a kind's --image-path fields into metadata.annotations of the mapping at `[GROUP/]KIND=FIELD.PATH` (\".\": the object), covering the image fields inside it (repeatable; default: no checksum)")
	fs.StringVar(&o.config, "config", "", "read pod spec, image and checksum paths and tag policies from the configuration `FILE` (apiVersion digestpin.dev/v1alpha1, kind Config); flags add to it")
	fs.Var(newPositiveIntValue(&o.registry.jobs, resolve.DefaultJobs), "concurrency", "distinct references resolved at once")
	fs.Var(newPositiveDurationValue(&o.Timeout, 2*time.Minute, "2m"), "timeout", "bound on the whole run, reading the input included")
	fs.Var(newPositiveDurationValue(&o.registry.requestTimeout, 30*time.Second, "30s"), "request-timeout", "bound on one registry request")
	fs.Var(newOnErrorValue(&r.KeepUnresolved), "on-error", "an image that cannot be resolved: fail the run, or keep it unpinned with a warning")
	fs.BoolVar(&r.Strict, "strict", false, "fail the run when a value that looks like an image reference is left as a tag because no image field leads to it (an argument, an env var, a field of a custom resource), instead of warning")
	fs.StringSliceVar(&o.registry.insecure, "insecure-registry", nil, "allow plain HTTP and unverified TLS for `HOST[:PORT]` only (repeatable)")
	fs.StringSliceVar(&o.registry.caFiles, "ca-file", nil, "also trust the PEM CA certificates in `FILE` for registries (repeatable)")
	fs.StringSliceVar(&o.registry.pullSecrets, "pull-secret", nil, "registry credentials from `FILE`: a Kubernetes image pull secret's .dockerconfigjson (as mounted) or the Secret as JSON; tried before the docker config (repeatable)")
	fs.Var(newListValue(&o.registry.mirrors, true, parseMirror), "registry-mirror", "ask mirror TO about the images of registry FROM (`FROM=TO`): FROM as docker.io for Docker Hub, TO as host[:port][/path-prefix]; the output keeps the original name (repeatable; mirrors in order, then FROM)")
	fs.BoolVar(&o.registry.mirrorOnly, "mirror-only", false, "never ask a registry that has a --registry-mirror itself")
	fs.StringVar(&p.WriteLock, "write-lock", "", "after a successful run, write every resolution to the lock `FILE` (may be the --lock file)")
	fs.StringVar(&p.Lock, "lock", "", "take digests from the lock `FILE`; references missing from it are resolved, or fail with --frozen")
	fs.BoolVar(&p.Frozen, "frozen", false, "with --lock: never contact a registry; a reference missing from the lock file is an error")
	fs.BoolVar(&p.Check, "check", false, "with --lock: resolve every reference at its registry and fail, naming each image, when a digest differs from the lock file")
	fs.StringVar(&p.CacheDir, "cache-dir", "", "keep resolutions in `DIR` for --cache-ttl (default: digestpin in the user cache folder, $XDG_CACHE_HOME or ~/.cache)")
	fs.DurationVar(&p.CacheTTL, "cache-ttl", 0, "reuse a cached resolution younger than `DURATION` (e.g. 5m) without asking the registry; 0 disables the cache")
	fs.StringVar(&p.Report, "report", "", "after a successful run, write a JSON report of every image (reference, digest, source, workloads; the digest before and what changed, when there is a lock file or --diff-against to compare with) to `FILE`")
	fs.StringVar(&p.DiffAgainst, "diff-against", "", "compare the images with those pinned in `FILE`, an earlier output of digestpin (read without asking a registry), rather than with the --lock file or the --write-lock file as it was")
	fs.StringVar(&p.Summary, "summary", "", "write what moved to `FILE` in Markdown (a table of old → new digest per image and the workloads that roll, for a pull request or $GITHUB_STEP_SUMMARY), after a successful run or a --check that differs")
	fs.StringVar(&p.SummaryText, "summary-text", "", "write what moved to `FILE` as plain text, one line per image (for a commit message), as --summary does")
	fs.Var(tagPolicyValue(&p.TagPolicies), "tag-policy", "choose the tag of repository IMAGE's images (`IMAGE=STRATEGY`): semver:CONSTRAINT (highest version, Helm's syntax, e.g. semver:~1.4), latest (newest image), name:REGEXP (alphabetically last match) or digest (the tag as written); repeatable")
	fs.Var(verifyValue(&o.verify), "verify", "verify the signature of the digest pinned for the images of repositories matching IMAGE-GLOB (`IMAGE-GLOB=POLICY`): key:FILE (a cosign public key), keyless:IDENTITY@ISSUER or keyless:/REGEXP/@ISSUER (needs --trusted-root), or none; terms joined by \" or \" (any one) or \" and \" (all); repeatable")
	fs.StringVar(&o.trustedRoot, "trusted-root", "", "the Sigstore trusted root (trusted_root.json) that keyless --verify policies are checked against; never fetched")
	fs.Var(newListValue(&o.tagAllow, false, parseTagFilter), "tag-allow", "the --tag-policy of IMAGE considers only tags matching REGEXP (`IMAGE=REGEXP`; repeatable)")
	fs.Var(newListValue(&o.tagIgnore, false, parseTagFilter), "tag-ignore", "the --tag-policy of IMAGE never considers tags matching REGEXP (`IMAGE=REGEXP`; repeatable)")
	fs.Var(newPositiveIntValue(&p.MaxTags, tagpolicy.DefaultMaxTags), "max-tags", "the latest tag policy reads the creation time of at most `N` candidates, the highest in natural order")
	fs.BoolVar(&p.KeelAnnotations, "keel-annotations", false, "give the images of each workload with Keel's keel.sh/policy annotation (or label) the tag policy it means (all, major, minor, patch, force with keel.sh/match-tag, glob:, regexp:), relative to each image's tag")
	fs.StringVar(&o.redis.url, "cache", "", "keep resolutions for --cache-ttl on the Redis at `URL` (redis://[USER@]HOST[:PORT][/DB], or rediss:// for TLS), shared by every process that uses it; excludes --cache-dir")
	fs.StringVar(&o.redis.passwordFile, "redis-password-file", "", "the Redis password is in `FILE` (default: the URL's, else $DIGESTPIN_REDIS_PASSWORD, else $REDIS_PASSWORD)")
	fs.StringVar(&o.redis.caFile, "redis-ca-file", "", "trust the PEM CA certificates in `FILE` for a rediss:// Redis instead of the system's")
	fs.StringVar(&o.redis.prefix, "redis-prefix", redisstore.DefaultPrefix, "begin every Redis key with `PREFIX`")
	fs.StringVar(&o.logFile, "log-file", "", "also append messages to `FILE`")
	fs.BoolVar(&o.ttyErrors, "tty-errors", false, "also write the reason of a failure to the controlling terminal when stderr is not a terminal (the Helm 4 plugin sets it: Helm 4 discards a post-renderer's stderr)")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log each resolution to stderr")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	bindRetired(fs)
	groupFlags(fs)
}

// BindPinning defines the pinning flags of o on fs, under the names
// renames gives them (TemplateRenames, deployRenames).
func BindPinning(o *Options, fs *pflag.FlagSet, renames map[string]string) {
	o.Renames = renames
	all := pflag.NewFlagSet("pinning", pflag.ContinueOnError)
	o.Bind(all)
	all.VisitAll(func(f *pflag.Flag) {
		name, renamed := renames[f.Name]
		if renamed && name == "" {
			return
		}
		g := *f
		if renamed {
			g.Name = name
			g.Shorthand = ""
		}
		if fs.Lookup(g.Name) != nil || (g.Shorthand != "" && fs.ShorthandLookup(g.Shorthand) != nil) {
			g.Shorthand = ""
		}
		fs.AddFlag(&g)
	})
}

// TemplateRenames are the pinning flags that digestpin template names
// otherwise, because helm template has a flag of that name with another
// meaning: -f is --values there, --version the chart's version, --ca-file
// the chart repository's CA. "" means the flag does not exist there.
var TemplateRenames = map[string]string{
	"filename": "",
	"version":  "",
	"ca-file":  "registry-ca-file",
}

// DeployRenames are the pinning flags that digestpin install and upgrade
// name otherwise: template's (cli.TemplateRenames), and --timeout, which is
// Helm's there (how long one Kubernetes operation may take), so that
// digestpin's bound on pinning is --pin-timeout.
var DeployRenames = map[string]string{
	"filename": "",
	"version":  "",
	"ca-file":  "registry-ca-file",
	"timeout":  "pin-timeout",
}

// envName is the environment variable that sets flag f when it is not on
// the command line: --cache-ttl is DIGESTPIN_CACHE_TTL.
// A flag that digestpin template renames (TemplateRenames) keeps its
// variable: --registry-ca-file there is --ca-file here, DIGESTPIN_CA_FILE
// in both.
func envName(flag string) string {
	for from, to := range TemplateRenames {
		if to != "" && flag == to {
			flag = from
		}
	}
	return "DIGESTPIN_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// setFromEnv sets every flag not given on the command line from its
// DIGESTPIN_* environment variable, but those of notFromEnv. Lists are
// comma-separated. It sets every flag it can and returns the first
// failure.
func (o *Options) setFromEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || notFromEnv[f.Name] {
			return
		}
		v, ok := lookup(envName(f.Name))
		if !ok || v == "" {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			if err == nil {
				err = invalidValue(serr, fs, func(string) string { return envName(f.Name) })
			}
			return
		}
		o.fromEnv[f.Name] = true
	})
	return err
}

// name is how the person set flag: "--mode", or "DIGESTPIN_MODE" when it
// came from the environment. Under digestpin template, install and
// upgrade, a renamed flag goes by its name there: --ca-file is
// --registry-ca-file.
func (o *Options) Name(flag string) string {
	if to := o.Renames[flag]; to != "" {
		flag = to
	}
	if o.fromEnv[flag] {
		return envName(flag)
	}
	return "--" + flag
}

// pinOptions completes the options that the flags bound for a Pinner:
// the configuration file beneath them, the trusted root and the tag
// filters, the registry resolver's options, the Redis cache and the
// loggers. pin.New checks the rest, with messages that libraryError
// puts in the person's words.
func (o *Options) PinOptions(log *Logger) (pin.Options, error) {
	opts := o.pin
	var cfg config.Config
	if o.config != "" {
		var err error
		if cfg, err = config.Load(o.config); err != nil {
			return pin.Options{}, fmt.Errorf("%s: %w", o.Name("config"), err)
		}
	}
	// The signature policies are verified with package verify, which
	// takes the file's too (AddConfig): set even without a policy.
	// --trusted-root before the file, whose trustedRoot it replaces
	// unread; never read for no policy at all.
	ps := o.verify
	if o.trustedRoot != "" {
		if ps.Len() == 0 && len(cfg.Verify) == 0 {
			return pin.Options{}, fmt.Errorf("%s: no %s policy needs it", o.Name("trusted-root"), o.Name("verify"))
		}
		ps = ps.Clone()
		if err := ps.SetTrustedRoot(o.trustedRoot); err != nil {
			return pin.Options{}, fmt.Errorf("%s: %w", o.Name("trusted-root"), err)
		}
	}
	if ps == nil {
		ps = &verify.Policies{}
	}
	opts.Verify = ps
	o.configTagPolicies = opts.TagPolicies == nil && len(cfg.TagPolicies) > 0
	if err := opts.AddConfig(cfg); err != nil {
		return pin.Options{}, fmt.Errorf("%s: %w", o.Name("config"), err)
	}
	if err := o.addTagFilters(&opts); err != nil {
		return pin.Options{}, err
	}
	ropts, err := o.registry.options(o, log)
	if err != nil {
		return pin.Options{}, err
	}
	opts.ResolveOptions = ropts
	if opts.Cache, err = o.redis.cache(o, opts.CacheTTL, o.registry.requestTimeout, log); err != nil {
		return pin.Options{}, err
	}
	opts.Renderer.Warnf = log.Warnf
	opts.Logf = log.Debugf
	opts.Changes = o.verbose // printed on stderr (summary.go)
	opts.OptionNames = o.optionName
	return opts, nil
}

// addTagFilters sets --tag-allow, then --tag-ignore, on the tag policies
// of the flags and the configuration file, so that neither their order
// nor the file's matters. A filter replaces the file's of the same image.
func (o *Options) addTagFilters(opts *pin.Options) error {
	if len(o.tagAllow)+len(o.tagIgnore) == 0 {
		return nil
	}
	ps := opts.TagPolicies.Clone()
	for _, f := range []struct {
		flag    string
		entries []string
		add     func(image, value string) error
	}{
		{"tag-allow", o.tagAllow, ps.Allow},
		{"tag-ignore", o.tagIgnore, ps.Ignore},
	} {
		for _, e := range f.entries {
			if err := pin.AddTagEntry(e, "IMAGE=REGEXP", f.add); err != nil {
				return fmt.Errorf("invalid %s %q: %w", o.Name(f.flag), e, err)
			}
		}
	}
	opts.TagPolicies = ps
	return nil
}

// options yields the registry resolver's options: credentials from the
// pull secrets in the order given, then the docker config with its
// credential helpers. resolve.New checks them.
func (r *registryFlags) options(o *Options, log *Logger) ([]resolve.Option, error) {
	var keychains []authn.Keychain
	for _, f := range r.pullSecrets {
		kc, err := credentials.ReadPullSecret(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Name("pull-secret"), err)
		}
		keychains = append(keychains, kc)
	}
	opts := []resolve.Option{
		resolve.WithKeychain(credentials.Keychains(append(keychains, credentials.DockerKeychain)...)),
		resolve.WithJobs(r.jobs),
		resolve.WithRequestTimeout(r.requestTimeout),
		resolve.WithInsecureRegistries(r.insecure...),
		resolve.WithCAFiles(r.caFiles...),
		resolve.WithMirrorOnly(r.mirrorOnly),
		resolve.WithUserAgent("digestpin/" + versionString()),
		resolve.WithLogf(log.Debugf),
	}
	for _, m := range r.mirrors {
		opts = append(opts, resolve.WithMirror(m.From, m.To))
	}
	return opts, nil
}

// optionFlags names the flag that sets each pin.Options field and
// resolve option, for the library's errors (libraryError) and messages
// (pin.Options.OptionNames, which a Pin carries on its context to the
// renderer and the resolver): the one place where the command maps the
// library's names to its own. "" leaves the
// name out: the renderer's errors say what they are about.
var optionFlags = map[string]string{
	"Lock":        "lock",
	"Frozen":      "frozen",
	"Check":       "check",
	"CacheDir":    "cache-dir",
	"CacheTTL":    "cache-ttl",
	"Cache":       "cache",
	"Platform":    "platform",
	"TagPolicies": "tag-policy",
	"Verify":      "verify",
	"MaxTags":     "max-tags",
	"Renderer":    "",
	"DiffAgainst": "diff-against",
	"Summary":     "summary",
	"SummaryText": "summary-text",
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
}

// optionName is how the person set a pin.Options field or resolve
// option: its flag, or the variable that set it, or the configuration
// file's tagPolicies when the tag policies are the file's alone.
func (o *Options) optionName(option string) string {
	flag, ok := optionFlags[option]
	switch {
	case !ok:
		return option
	case flag == "":
		return ""
	case option == "TagPolicies" && o.configTagPolicies:
		return fmt.Sprintf("%s: %s: tagPolicies", o.Name("config"), o.config)
	}
	return o.Name(flag)
}

// libraryError puts an error of pin.New in the person's words: a
// *pin.OptionError or *resolve.OptionError names flags (or the variables
// that set them) instead of the library's fields and options.
func (o *Options) LibraryError(err error) error {
	var pe *pin.OptionError
	var re *resolve.OptionError
	switch {
	case errors.As(err, &pe):
		return errors.New(pe.Message(o.optionName))
	case errors.As(err, &re):
		return errors.New(re.Message(o.optionName))
	}
	return err
}

// usage prints the help text.
func usage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, `digestpin pins the container images of Kubernetes manifests to the digests
their registries serve now, and adds a %s annotation to each pod
template, so the manifest changes exactly when an image changes.

It reads a YAML stream on stdin and writes it to stdout; messages go to stderr.
On any error nothing is written to stdout.

Usage:
  helm template my-release ./chart | digestpin [flags]
  helm install my-release ./chart --post-renderer digestpin [--post-renderer-args=--mode=digest]
  kubectl kustomize overlay/ | digestpin --mode digest
  digestpin template [NAME] CHART --seed-file FILE [helm template flags] (see digestpin template --help)
  digestpin install|upgrade NAME CHART --seed-file FILE [helm install|upgrade flags]
  digestpin seed > FILE
  digestpin argocd refresh IMAGE... (hard-refresh the Argo CD Applications that run it)
  digestpin completion bash|zsh|fish
  digestpin version
  digestpin help [COMMAND]

%s
Every flag can also be set as DIGESTPIN_<FLAG> (e.g. DIGESTPIN_MODE=digest,
DIGESTPIN_INSECURE_REGISTRY=localhost:5000); flags win.
`, renderer.DefaultChecksumAnnotation, GroupedUsages(fs))
}

// flagGroup is the annotation that files a flag under a topic of --help.
const flagGroup = "digestpin_group"

// flagGroups are the topics of --help, in order, the common flags first;
// every flag of the filter is under one (TestFlagGroups). The flags of a
// command that are not the filter's (--seed-file) are common ones.
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Common flags", []string{"filename", "mode", "on-error", "strict", "config", "timeout", "verbose", "version"}},
	{"Pod specs, image fields and checksums", []string{"checksum-annotation", "pod-spec-path", "image-path", "checksum-path", "platform"}},
	{"Registries", []string{"concurrency", "request-timeout", "insecure-registry", "ca-file", "pull-secret", "registry-mirror", "mirror-only"}},
	{"Lock file, report, summary and cache", []string{"lock", "write-lock", "frozen", "check", "report", "summary", "summary-text", "diff-against", "cache-dir", "cache-ttl"}},
	{"Tag policies", []string{"tag-policy", "tag-allow", "tag-ignore", "max-tags", "keel-annotations"}},
	{"Signatures", []string{"verify", "trusted-root"}},
	{"Shared cache on Redis", []string{"cache", "redis-password-file", "redis-ca-file", "redis-prefix"}},
	{"Messages", []string{"log-file", "tty-errors"}},
}

// groupFlags files each flag of fs under its topic (flagGroups).
func groupFlags(fs *pflag.FlagSet) {
	for _, g := range flagGroups {
		for _, name := range g.flags {
			if fs.Lookup(name) != nil {
				_ = fs.SetAnnotation(name, flagGroup, []string{g.title})
			}
		}
	}
}

// GroupedUsages is the help of fs's flags under their topics, in the
// order of flagGroups, each flag in the order of fs; a flag of no topic
// is a common one.
func GroupedUsages(fs *pflag.FlagSet) string {
	sets := map[string]*pflag.FlagSet{}
	fs.VisitAll(func(f *pflag.Flag) {
		title := flagGroups[0].title
		if t := f.Annotations[flagGroup]; len(t) == 1 {
			title = t[0]
		}
		if sets[title] == nil {
			sets[title] = pflag.NewFlagSet(title, pflag.ContinueOnError)
			sets[title].SortFlags = false
		}
		sets[title].AddFlag(f)
	})
	var b strings.Builder
	for _, g := range flagGroups {
		if s := sets[g.title]; s != nil && s.HasAvailableFlags() {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "%s:\n%s", g.title, s.FlagUsages())
		}
	}
	return b.String()
}
