package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/resolve"
)

// options are the command line, after flags and environment.
type options struct {
	filename           string
	mode               string
	checksumAnnotation string
	platform           string
	podSpecPaths       []string
	concurrency        int
	timeout            time.Duration
	requestTimeout     time.Duration
	onError            string
	insecureRegistries []string
	caFiles            []string
	pullSecrets        []string
	registryMirrors    []string
	mirrorOnly         bool
	gitops             gitopsOptions // lock, cache and report flags (gitops.go)
	logFile            string
	ttyErrors          bool
	verbose            bool
	version            bool
}

func newOptions() *options { return &options{} }

// bind defines every flag on fs, writing into o.
func (o *options) bind(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.StringVarP(&o.filename, "filename", "f", "", "read the manifests from `FILE` instead of stdin (\"-\" is stdin)")
	fs.StringVar(&o.mode, "mode", "pin", "image field form: pin (name:tag@sha256:…), digest (name@sha256:…) or annotate (field untouched, checksum only)")
	fs.StringVar(&o.checksumAnnotation, "checksum-annotation", "checksum/images", "pod-template annotation that holds the checksum of its images")
	fs.StringVar(&o.platform, "platform", "", "pin one platform's manifest (`os/arch[/variant]`) instead of the multi-platform index")
	fs.StringSliceVar(&o.podSpecPaths, "pod-spec-path", nil, "also scan pod specs at `[GROUP/]KIND=FIELD.PATH` (repeatable; \"*\" steps into every list item)")
	fs.IntVar(&o.concurrency, "concurrency", resolve.DefaultJobs, "distinct references resolved at once")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "bound on the whole run")
	fs.DurationVar(&o.requestTimeout, "request-timeout", 30*time.Second, "bound on one registry request")
	fs.StringVar(&o.onError, "on-error", "fail", "an image that cannot be resolved: fail the run, or keep it unpinned with a warning")
	fs.StringSliceVar(&o.insecureRegistries, "insecure-registry", nil, "allow plain HTTP and unverified TLS for `HOST[:PORT]` only (repeatable)")
	fs.StringSliceVar(&o.caFiles, "ca-file", nil, "also trust the PEM CA certificates in `FILE` for registries (repeatable)")
	fs.StringSliceVar(&o.pullSecrets, "pull-secret", nil, "registry credentials from `FILE`: a Kubernetes image pull secret's .dockerconfigjson (as mounted) or the Secret as JSON; tried before the docker config (repeatable)")
	fs.StringSliceVar(&o.registryMirrors, "registry-mirror", nil, "ask mirror TO about the images of registry FROM (`FROM=TO`): FROM as docker.io for Docker Hub, TO as host[:port][/path-prefix]; the output keeps the original name (repeatable; mirrors in order, then FROM)")
	fs.BoolVar(&o.mirrorOnly, "mirror-only", false, "never ask a registry that has a --registry-mirror itself")
	o.gitops.bind(fs)
	fs.StringVar(&o.logFile, "log-file", "", "also append messages to `FILE`")
	fs.BoolVar(&o.ttyErrors, "tty-errors", false, "also write the reason of a failure to the controlling terminal when stderr is not a terminal (the Helm 4 plugin sets it: Helm 4 discards a post-renderer's stderr)")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log each resolution to stderr")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
}

// envName is the environment variable that sets flag f when it is not on
// the command line: --cache-ttl is DIGESTPIN_CACHE_TTL.
func envName(flag string) string {
	return "DIGESTPIN_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// fromEnv sets every flag not given on the command line from its
// DIGESTPIN_* environment variable. Lists are comma-separated.
func (o *options) fromEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		v, ok := lookup(envName(f.Name))
		if !ok || v == "" {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("invalid %s=%q: %w", envName(f.Name), v, serr)
		}
	})
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

Flags:
%s
Every flag can also be set as DIGESTPIN_<FLAG> (e.g. DIGESTPIN_MODE=digest,
DIGESTPIN_INSECURE_REGISTRY=localhost:5000); flags win.
`, "checksum/images", fs.FlagUsages())
}
