package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/pin/pinflags"
	"github.com/digestpin/digestpin/renderer"
)

// Options are the command line, after flags and environment: the
// pinning flags (pinflags.Options), which bind onto the library, and the
// command's own settings.
type Options struct {
	pinflags.Options

	filename  string
	logFile   string
	ttyErrors bool
	progress  string
	verbose   bool
	version   bool

	// fromEnv holds the flags set from their DIGESTPIN_* variable, so
	// that a message names what the person wrote.
	fromEnv map[string]bool
	// renames are the flags the command names otherwise (TemplateRenames,
	// DeployRenames); nil for the filter.
	Renames map[string]string
}

// NewOptions returns the options of a command line, whose messages name
// the pinning flags as the person set them (Name).
func NewOptions() *Options {
	o := &Options{fromEnv: map[string]bool{}}
	o.FlagName = o.Name
	o.UserAgent = "digestpin/" + versionString()
	return o
}

// Bind defines every flag on fs, writing into o: --filename, the
// pinning flags (pinflags.Options.AddFlags), then the command's own.
func (o *Options) Bind(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.StringVarP(&o.filename, "filename", "f", "", "read the manifests from `FILE` instead of stdin (\"-\" is stdin)")
	o.AddFlags(fs)
	fs.StringVar(&o.logFile, "log-file", "", "also append messages to `FILE`")
	fs.BoolVar(&o.ttyErrors, "tty-errors", false, "also write the reason of a failure to the controlling terminal when stderr is not a terminal (the Helm 4 plugin sets it: Helm 4 discards a post-renderer's stderr)")
	fs.Var(newProgressValue(&o.progress), "progress", "show how far the resolutions have come on stderr, on one line, in runs over a second: auto (when stderr is a terminal and CI is not set), always (a line a second when stderr is not a terminal) or never")
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

// Name is how the person set flag: "--mode", or "DIGESTPIN_MODE" when it
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

// PinOptions completes the options that the flags bound for a Pinner
// (pinflags.Options.PinOptions), with the loggers of log: pin.New checks
// them, with messages that LibraryError puts in the person's words.
// --verbose prints the changes on stderr (summary.go), and --progress
// shows the resolutions as they go (progress.go).
func (o *Options) PinOptions(log *Logger) (pin.Options, error) {
	opts, err := o.Options.PinOptions(log.Warnf, log.Debugf)
	if err != nil {
		return pin.Options{}, err
	}
	opts.Changes = o.verbose
	if log.progress != nil {
		opts.Progress = log.progress.update
	}
	return opts, nil
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
	{"Registries", []string{"concurrency", "request-timeout", "insecure-registry", "ca-file", "pull-secret", "registry-mirror", "mirror-only", "mirror-lag"}},
	{"Lock file, report, summary and cache", []string{"lock", "write-lock", "frozen", "check", "report", "summary", "summary-text", "diff-against", "cache-dir", "cache-ttl", "stale-if-error", "min-age", "min-age-from"}},
	{"Tag policies", []string{"tag-policy", "tag-allow", "tag-ignore", "max-tags", "keel-annotations"}},
	{"Signatures", []string{"verify", "trusted-root"}},
	{"Shared cache on Redis", []string{"cache", "redis-password-file", "redis-ca-file", "redis-prefix"}},
	{"Messages", []string{"log-file", "tty-errors", "progress"}},
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
