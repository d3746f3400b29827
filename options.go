package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/config"
	"github.com/digestpin/digestpin/internal/redisstore"
	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolve"
	"github.com/digestpin/digestpin/verify"
)

// options are the command line, after flags and environment.
type options struct {
	filename           string
	mode               string
	checksumAnnotation string
	platform           string
	podSpecPaths       []string
	imagePaths         []string
	checksumPaths      []string
	config             string
	concurrency        int
	timeout            time.Duration
	requestTimeout     time.Duration
	onError            string
	strict             bool
	insecureRegistries []string
	caFiles            []string
	pullSecrets        []string
	registryMirrors    []string
	mirrorOnly         bool
	writeLock          string
	lock               string
	frozen             bool
	check              bool
	cacheDir           string
	cacheTTL           time.Duration
	report             string
	tagPolicies        []string
	tagAllow           []string
	tagIgnore          []string
	maxTags            int
	keelAnnotations    bool
	verify             []string
	trustedRoot        string
	cacheURL           string
	redisPasswordFile  string
	redisCAFile        string
	redisPrefix        string
	logFile            string
	ttyErrors          bool
	verbose            bool
	version            bool

	// fromEnv holds the flags set from their DIGESTPIN_* variable, so
	// that a message names what the person wrote.
	fromEnv map[string]bool

	// configTagPolicies says that the configuration file declared tag
	// policies, for messages about them.
	configTagPolicies bool
}

func newOptions() *options { return &options{fromEnv: map[string]bool{}} }

// bind defines every flag on fs, writing into o.
func (o *options) bind(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.StringVarP(&o.filename, "filename", "f", "", "read the manifests from `FILE` instead of stdin (\"-\" is stdin)")
	fs.StringVar(&o.mode, "mode", "pin", "image field form: pin (name:tag@sha256:…), digest (name@sha256:…) or annotate (field untouched, checksum only)")
	fs.StringVar(&o.checksumAnnotation, "checksum-annotation", renderer.DefaultChecksumAnnotation, "pod-template annotation that holds the checksum of its images")
	fs.StringVar(&o.platform, "platform", "", "pin one platform's manifest (`os/arch[/variant]`) instead of the multi-platform index")
	fs.StringSliceVar(&o.podSpecPaths, "pod-spec-path", nil, "also scan pod specs at `[GROUP/]KIND=FIELD.PATH` (repeatable; \"*\" steps into every list item)")
	fs.StringSliceVar(&o.imagePaths, "image-path", nil, "also pin the image reference in the string field at `[GROUP/]KIND=FIELD.PATH` (repeatable; \"*\" steps into every list item, FIELD[KEY=VALUE] into the items whose KEY is VALUE, as in env[name=AGENT_IMAGE].value; the last field names the image field, or a flag's value in a list of arguments, as in args[flag=--reloader-image])")
	fs.StringSliceVar(&o.checksumPaths, "checksum-path", nil, "write the checksum of a kind's --image-path fields into metadata.annotations of the mapping at `[GROUP/]KIND=FIELD.PATH` (\".\": the object), covering the image fields inside it (repeatable; default: no checksum)")
	fs.StringVar(&o.config, "config", "", "read pod spec, image and checksum paths and tag policies from the configuration `FILE` (apiVersion digestpin.dev/v1alpha1, kind Config); flags add to it")
	fs.IntVar(&o.concurrency, "concurrency", resolve.DefaultJobs, "distinct references resolved at once")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "bound on the whole run, reading the input included")
	fs.DurationVar(&o.requestTimeout, "request-timeout", 30*time.Second, "bound on one registry request")
	fs.StringVar(&o.onError, "on-error", "fail", "an image that cannot be resolved: fail the run, or keep it unpinned with a warning")
	fs.BoolVar(&o.strict, "strict", false, "fail the run when a value that looks like an image reference is left as a tag because no image field leads to it (an argument, an env var, a field of a custom resource), instead of warning")
	fs.StringSliceVar(&o.insecureRegistries, "insecure-registry", nil, "allow plain HTTP and unverified TLS for `HOST[:PORT]` only (repeatable)")
	fs.StringSliceVar(&o.caFiles, "ca-file", nil, "also trust the PEM CA certificates in `FILE` for registries (repeatable)")
	fs.StringSliceVar(&o.pullSecrets, "pull-secret", nil, "registry credentials from `FILE`: a Kubernetes image pull secret's .dockerconfigjson (as mounted) or the Secret as JSON; tried before the docker config (repeatable)")
	fs.StringSliceVar(&o.registryMirrors, "registry-mirror", nil, "ask mirror TO about the images of registry FROM (`FROM=TO`): FROM as docker.io for Docker Hub, TO as host[:port][/path-prefix]; the output keeps the original name (repeatable; mirrors in order, then FROM)")
	fs.BoolVar(&o.mirrorOnly, "mirror-only", false, "never ask a registry that has a --registry-mirror itself")
	fs.StringVar(&o.writeLock, "write-lock", "", "after a successful run, write every resolution to the lock `FILE` (may be the --lock file)")
	fs.StringVar(&o.lock, "lock", "", "take digests from the lock `FILE`; references missing from it are resolved, or fail with --frozen")
	fs.BoolVar(&o.frozen, "frozen", false, "with --lock: never contact a registry; a reference missing from the lock file is an error")
	fs.BoolVar(&o.check, "check", false, "with --lock: resolve every reference at its registry and fail, naming each image, when a digest differs from the lock file")
	fs.StringVar(&o.cacheDir, "cache-dir", "", "keep resolutions in `DIR` for --cache-ttl (default: digestpin in the user cache folder, $XDG_CACHE_HOME or ~/.cache)")
	fs.DurationVar(&o.cacheTTL, "cache-ttl", 0, "reuse a cached resolution younger than `DURATION` (e.g. 5m) without asking the registry; 0 disables the cache")
	fs.StringVar(&o.report, "report", "", "after a successful run, write a JSON report of every image (reference, digest, source, workloads) to `FILE`")
	fs.StringArrayVar(&o.tagPolicies, "tag-policy", nil, "choose the tag of repository IMAGE's images (`IMAGE=STRATEGY`): semver:CONSTRAINT (highest version, Helm's syntax, e.g. semver:~1.4), latest (newest image), name:REGEXP (alphabetically last match) or digest (the tag as written); repeatable")
	fs.StringArrayVar(&o.verify, "verify", nil, "verify the signature of the digest pinned for the images of repositories matching IMAGE-GLOB (`IMAGE-GLOB=POLICY`): key:FILE (a cosign public key), keyless:IDENTITY@ISSUER or keyless:/REGEXP/@ISSUER (needs --trusted-root), or none; terms joined by \" or \" (any one) or \" and \" (all); repeatable")
	fs.StringVar(&o.trustedRoot, "trusted-root", "", "the Sigstore trusted root (trusted_root.json) that keyless --verify policies are checked against; never fetched")
	fs.StringArrayVar(&o.tagAllow, "tag-allow", nil, "the --tag-policy of IMAGE considers only tags matching REGEXP (`IMAGE=REGEXP`; repeatable)")
	fs.StringArrayVar(&o.tagIgnore, "tag-ignore", nil, "the --tag-policy of IMAGE never considers tags matching REGEXP (`IMAGE=REGEXP`; repeatable)")
	fs.IntVar(&o.maxTags, "max-tags", resolve.DefaultMaxTags, "the latest tag policy reads the creation time of at most `N` candidates, the highest in natural order")
	fs.BoolVar(&o.keelAnnotations, "keel-annotations", false, "give the images of each workload with Keel's keel.sh/policy annotation (or label) the tag policy it means (all, major, minor, patch, force with keel.sh/match-tag, glob:, regexp:), relative to each image's tag")
	fs.StringVar(&o.cacheURL, "cache", "", "keep resolutions for --cache-ttl on the Redis at `URL` (redis://[USER@]HOST[:PORT][/DB], or rediss:// for TLS), shared by every process that uses it; excludes --cache-dir")
	fs.StringVar(&o.redisPasswordFile, "redis-password-file", "", "the Redis password is in `FILE` (default: the URL's, else $DIGESTPIN_REDIS_PASSWORD, else $REDIS_PASSWORD)")
	fs.StringVar(&o.redisCAFile, "redis-ca-file", "", "trust the PEM CA certificates in `FILE` for a rediss:// Redis instead of the system's")
	fs.StringVar(&o.redisPrefix, "redis-prefix", redisstore.DefaultPrefix, "begin every Redis key with `PREFIX`")
	fs.StringVar(&o.logFile, "log-file", "", "also append messages to `FILE`")
	fs.BoolVar(&o.ttyErrors, "tty-errors", false, "also write the reason of a failure to the controlling terminal when stderr is not a terminal (the Helm 4 plugin sets it: Helm 4 discards a post-renderer's stderr)")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log each resolution to stderr")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	bindRetired(fs)
}

// envName is the environment variable that sets flag f when it is not on
// the command line: --cache-ttl is DIGESTPIN_CACHE_TTL.
// A flag that digestpin template renames (templateRenames) keeps its
// variable: --registry-ca-file there is --ca-file here, DIGESTPIN_CA_FILE
// in both.
func envName(flag string) string {
	for from, to := range templateRenames {
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
func (o *options) setFromEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
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
				err = fmt.Errorf("invalid %s=%q: %w", envName(f.Name), v, serr)
			}
			return
		}
		o.fromEnv[f.Name] = true
	})
	return err
}

// name is how the person set flag: "--mode", or "DIGESTPIN_MODE" when it
// came from the environment.
func (o *options) name(flag string) string {
	if o.fromEnv[flag] {
		return envName(flag)
	}
	return "--" + flag
}

// invalid is the error of a flag whose value cannot work, naming the flag
// or variable the person set.
func (o *options) invalid(flag string, value any, format string, args ...any) error {
	return fmt.Errorf("invalid %s %q: %s", o.name(flag), fmt.Sprint(value), fmt.Sprintf(format, args...))
}

// pinOptions turns the options into a Pinner's, checking each value; a
// message names the flag or environment variable that set it.
func (o *options) pinOptions(log *logger) (pin.Options, error) {
	mode, err := renderer.ParseMode(o.mode)
	if err != nil {
		return pin.Options{}, o.invalid("mode", o.mode, "want pin, digest or annotate")
	}
	var keep bool
	switch o.onError {
	case "fail":
	case "keep":
		keep = true
	default:
		return pin.Options{}, o.invalid("on-error", o.onError, "want fail or keep")
	}
	switch {
	case o.checksumAnnotation == "":
		return pin.Options{}, fmt.Errorf("%s is empty: want an annotation name", o.name("checksum-annotation"))
	case renderer.CheckAnnotationName(o.checksumAnnotation) != nil:
		return pin.Options{}, fmt.Errorf("invalid %s: %w", o.name("checksum-annotation"), renderer.CheckAnnotationName(o.checksumAnnotation))
	case o.timeout <= 0:
		return pin.Options{}, o.invalid("timeout", o.timeout, "want a positive duration, e.g. 2m")
	case o.requestTimeout <= 0:
		return pin.Options{}, o.invalid("request-timeout", o.requestTimeout, "want a positive duration, e.g. 30s")
	case o.concurrency < 1:
		return pin.Options{}, o.invalid("concurrency", o.concurrency, "want at least 1")
	}
	// The paths and tag policies: the built-in ones, then the
	// configuration file's (as the library applies one), then the flags'.
	var cfg config.Config
	if o.config != "" {
		if cfg, err = config.Load(o.config); err != nil {
			return pin.Options{}, fmt.Errorf("%s: %w", o.name("config"), err)
		}
	}
	var base pin.Options
	if err := base.AddConfig(cfg); err != nil {
		return pin.Options{}, fmt.Errorf("%s: %w", o.name("config"), err)
	}
	paths := base.Renderer.PodSpecPaths
	for _, s := range o.podSpecPaths {
		p, err := renderer.ParsePodSpecPath(s)
		if err != nil {
			return pin.Options{}, fmt.Errorf("%s: %w", o.name("pod-spec-path"), err)
		}
		paths = append(paths[:len(paths):len(paths)], p)
	}
	imagePaths := base.Renderer.ImagePaths
	for _, s := range o.imagePaths {
		p, err := renderer.ParseImagePath(s)
		if err != nil {
			return pin.Options{}, fmt.Errorf("%s: %w", o.name("image-path"), err)
		}
		imagePaths = append(imagePaths[:len(imagePaths):len(imagePaths)], p)
	}
	checksumPaths := base.Renderer.ChecksumPaths
	for _, s := range o.checksumPaths {
		p, err := renderer.ParseChecksumPath(s)
		if err != nil {
			return pin.Options{}, fmt.Errorf("%s: %w", o.name("checksum-path"), err)
		}
		checksumPaths = append(checksumPaths[:len(checksumPaths):len(checksumPaths)], p)
	}
	platform, err := o.parsePlatform()
	if err != nil {
		return pin.Options{}, err
	}
	// Credentials: the pull secrets in the order given, then the docker
	// config with its credential helpers.
	var keychains []authn.Keychain
	for _, f := range o.pullSecrets {
		kc, err := resolve.ReadPullSecret(f)
		if err != nil {
			return pin.Options{}, fmt.Errorf("%s: %w", o.name("pull-secret"), err)
		}
		keychains = append(keychains, kc)
	}
	ropts := []resolve.Option{
		resolve.WithKeychain(resolve.Keychains(append(keychains, resolve.DockerKeychain)...)),
		resolve.WithJobs(o.concurrency),
		resolve.WithRequestTimeout(o.requestTimeout),
		resolve.WithInsecureRegistries(o.insecureRegistries...),
		resolve.WithCAFiles(o.caFiles...),
		resolve.WithMirrorOnly(o.mirrorOnly),
		resolve.WithUserAgent("digestpin/" + versionString()),
		resolve.WithLogf(log.debugf),
	}
	for _, m := range o.registryMirrors {
		from, to, ok := strings.Cut(m, "=")
		if !ok {
			return pin.Options{}, o.invalid("registry-mirror", m, "want FROM=TO")
		}
		ropts = append(ropts, resolve.WithMirror(from, to))
	}
	policies, err := o.parseTagPolicies(base.TagPolicies, cfg)
	if err != nil {
		return pin.Options{}, err
	}
	signatures, err := o.parseVerify(cfg)
	if err != nil {
		return pin.Options{}, err
	}
	cache, err := o.redis(log)
	if err != nil {
		return pin.Options{}, err
	}
	opts := pin.Options{
		Renderer: renderer.Renderer{
			Mode:               mode,
			ChecksumAnnotation: o.checksumAnnotation,
			PodSpecPaths:       paths,
			ImagePaths:         imagePaths,
			ChecksumPaths:      checksumPaths,
			KeepUnresolved:     keep,
			Strict:             o.strict,
			Warnf:              log.warnf,
		},
		ResolveOptions: ropts,
		Platform:       platform,
		Lock:           o.lock,
		Frozen:         o.frozen,
		Check:          o.check,
		CacheDir:       o.cacheDir,
		CacheTTL:       o.cacheTTL,
		Cache:          cache,
		WriteLock:      o.writeLock,
		Report:         o.report,
		Logf:           log.debugf,

		// Tag policies.
		TagPolicies:     policies,
		MaxTags:         o.maxTags,
		KeelAnnotations: o.keelAnnotations,

		// Signature policies.
		Verify: signatures,
	}
	// A checksum path that covers no image path, from the flags or the
	// file, is the person's to fix: say so before reading the input.
	if err := opts.Renderer.Validate(); err != nil {
		return pin.Options{}, err
	}
	return opts, nil
}

// parsePlatform parses --platform once, for every layer: nil without
// one. An OS and an architecture are required: "linux" alone would pin
// whichever architecture the index lists first.
func (o *options) parsePlatform() (*v1.Platform, error) {
	if o.platform == "" {
		return nil, nil
	}
	p, err := v1.ParsePlatform(o.platform)
	if err != nil {
		return nil, o.invalid("platform", o.platform, "%v", err)
	}
	if p.OS == "" || p.Architecture == "" {
		return nil, o.invalid("platform", o.platform, "want os/arch[/variant], e.g. linux/amd64")
	}
	return p, nil
}

// parseTagPolicies parses --tag-policy, then --tag-allow and
// --tag-ignore, so that their order does not matter, onto the
// configuration file's policies (pin.Options.ApplyConfig made them);
// nil without policies. A flag adds to the file's, and replaces its
// strategy or filter of the same image; a filter of the file needs a
// policy in the file.
func (o *options) parseTagPolicies(fromConfig *resolve.TagPolicies, cfg config.Config) (*resolve.TagPolicies, error) {
	if len(o.tagPolicies) == 0 && len(o.tagAllow) == 0 && len(o.tagIgnore) == 0 && fromConfig == nil {
		return nil, nil
	}
	if o.maxTags < 1 {
		return nil, o.invalid("max-tags", o.maxTags, "want at least 1")
	}
	o.configTagPolicies = len(cfg.TagPolicies) > 0
	ps := fromConfig.Clone()
	for _, f := range []struct {
		flag, want string
		values     []string
		add        func(image, value string) error
	}{
		{"tag-policy", "IMAGE=STRATEGY", o.tagPolicies, ps.Add},
		{"tag-allow", "IMAGE=REGEXP", o.tagAllow, ps.Allow},
		{"tag-ignore", "IMAGE=REGEXP", o.tagIgnore, ps.Ignore},
	} {
		for _, v := range f.values {
			if err := pin.AddTagEntry(v, f.want, f.add); err != nil {
				return nil, o.invalid(f.flag, v, "%v", err)
			}
		}
	}
	return ps, nil
}

// parseVerify parses the configuration file's verify entries, then
// --verify, and the trusted root (--trusted-root wins over the file's
// trustedRoot); nil without policies.
func (o *options) parseVerify(cfg config.Config) (*verify.Policies, error) {
	root := cmp.Or(o.trustedRoot, cfg.TrustedRoot)
	if len(o.verify) == 0 && len(cfg.Verify) == 0 {
		if o.trustedRoot != "" {
			return nil, fmt.Errorf("%s: no --verify policy needs it", o.name("trusted-root"))
		}
		return nil, nil
	}
	ps := &verify.Policies{}
	for _, e := range cfg.Verify {
		if err := ps.Add(e.Value); err != nil {
			return nil, fmt.Errorf("%s: %s, line %d: verify: invalid %q: %w", o.name("config"), cmp.Or(cfg.Name, o.config), e.Line, e.Value, err)
		}
	}
	for _, v := range o.verify {
		if err := ps.Add(v); err != nil {
			return nil, o.invalid("verify", v, "%v", err)
		}
	}
	if root != "" {
		if err := ps.SetTrustedRoot(root); err != nil {
			if o.trustedRoot != "" {
				return nil, fmt.Errorf("%s: %w", o.name("trusted-root"), err)
			}
			return nil, fmt.Errorf("%s: trustedRoot: %w", o.name("config"), err)
		}
	}
	if err := ps.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", o.name("verify"), err)
	}
	return ps, nil
}

// pinFields names the flag of each pin.Options field, for messages.
var pinFields = map[string]string{
	"Lock":        "lock",
	"Frozen":      "frozen",
	"Check":       "check",
	"CacheDir":    "cache-dir",
	"CacheTTL":    "cache-ttl",
	"Cache":       "cache",
	"WriteLock":   "write-lock",
	"Report":      "report",
	"Platform":    "platform",
	"TagPolicies": "tag-policy",
	"Verify":      "verify",
	"MaxTags":     "max-tags",
}

// resolveOptions names the flag of each resolve option, for messages.
// WithMirrorOnly comes before WithMirror, which it starts with.
var resolveOptions = []string{
	"WithJobs", "concurrency",
	"WithRequestTimeout", "request-timeout",
	"WithPlatform", "platform",
	"WithInsecureRegistries", "insecure-registry",
	"WithCAFiles", "ca-file",
	"WithMirrorOnly", "mirror-only",
	"WithMirror", "registry-mirror",
}

// optionError rewrites an error of pin.New in the person's words: flags
// (or the variables that set them) instead of the names of pin.Options
// fields and resolve options.
func (o *options) optionError(err error) error {
	var pairs []string
	for i := 0; i < len(resolveOptions); i += 2 {
		pairs = append(pairs, resolveOptions[i], o.name(resolveOptions[i+1]))
	}
	for field, flag := range pinFields {
		pairs = append(pairs, field, o.name(flag))
	}
	r := strings.NewReplacer(longestFirst(pairs)...)
	var oe *pin.OptionError
	if errors.As(err, &oe) {
		name := o.name(pinFields[oe.Field])
		if oe.Field == "TagPolicies" && len(o.tagPolicies) == 0 && o.configTagPolicies {
			name = fmt.Sprintf("%s: %s: tagPolicies", o.name("config"), o.config)
		}
		return errors.New(oe.Message(func(f string) string {
			if f == oe.Field {
				return name
			}
			return o.name(pinFields[f])
		}))
	}
	return errors.New(r.Replace(strings.TrimPrefix(err.Error(), "configuring resolver: ")))
}

// longestFirst orders old/new pairs for strings.NewReplacer so that a name
// is tried before any name that is a prefix of it ("CacheTTL" before
// "Cache"): the replacer takes the first pair, in argument order, that
// matches at a position.
func longestFirst(pairs []string) []string {
	type pair struct{ old, new string }
	ps := make([]pair, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		ps = append(ps, pair{pairs[i], pairs[i+1]})
	}
	slices.SortStableFunc(ps, func(a, b pair) int { return len(b.old) - len(a.old) })
	out := make([]string, 0, len(pairs))
	for _, p := range ps {
		out = append(out, p.old, p.new)
	}
	return out
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

Flags:
%s
Every flag can also be set as DIGESTPIN_<FLAG> (e.g. DIGESTPIN_MODE=digest,
DIGESTPIN_INSECURE_REGISTRY=localhost:5000); flags win.
`, renderer.DefaultChecksumAnnotation, fs.FlagUsages())
}
