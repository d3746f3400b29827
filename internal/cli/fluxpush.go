package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/internal/fluxoci"
	"github.com/digestpin/digestpin/resolution"
	"github.com/digestpin/digestpin/resolve"
)

// FluxPushUsage is the help of digestpin flux push, before its flags.
const FluxPushUsage = `Usage: digestpin flux push oci://REGISTRY/REPOSITORY:TAG --path DIR|FILE|- [flags]

Pushes manifests as the OCI artifact Flux's OCIRepository reads, in the
format of flux push artifact (the same media types and source, revision
and created annotations), with a deterministic tar and the created time
1970-01-01T00:00:00Z, so that the same files give the same digest. The
manifests are pushed as given: pin them first (helm template ... |
digestpin | digestpin flux push ... --path -).

When the tag already holds an artifact of the same files, nothing is
pushed, and the digest it holds is printed. With --sign-key, a pushed
artifact is signed as cosign sign --key does (the .sig tag, no
transparency log), for an OCIRepository's spec.verify with provider
cosign; the key's password is read from COSIGN_PASSWORD.

The registry is reached as the pinning commands reach registries: with
the credentials of --pull-secret, then of the Docker config (docker
login) and its credential helpers; the CAs of --ca-file; plain HTTP or
unverified TLS only for an --insecure-registry; --request-timeout per
request, with the same retries; the same User-Agent. These four flags
are also read from their DIGESTPIN_* variables, as the pinning commands
read them. Mirrors (--registry-mirror) do not apply: a push goes to the
registry named.

Flags:
`

// fluxPushOptions are the flags of digestpin flux push.
type fluxPushOptions struct {
	path, name, source, revision, signKey string
	timeout                               time.Duration
	// reg holds the registry flags, bound as the pinning commands bind
	// them (fluxPushRegistryFlags); regFlags are those flags alone, which
	// the environment sets too.
	reg      *Options
	regFlags *pflag.FlagSet
}

// fluxPushRegistryFlags are the pinning flags that say how digestpin
// flux push reaches the registry: the resolver's settings, but the
// mirrors, since a push goes to the registry named.
var fluxPushRegistryFlags = []string{"pull-secret", "ca-file", "insecure-registry", "request-timeout"}

// flags are the flags of digestpin flux push; docs/reference.md is
// written from them. --path/-f, --source and --revision are flux push
// artifact's.
func (o *fluxPushOptions) flags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("digestpin flux push", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.StringVarP(&o.path, "path", "f", "", "the manifests: a `DIR` (every file under it), a FILE, or - for stdin")
	fs.StringVar(&o.name, "name", "", "the `NAME` of the file in the artifact for a FILE or stdin (default: the FILE's name; manifests.yaml for stdin)")
	fs.StringVar(&o.source, "source", "", "the source address, e.g. the Git `URL` (annotation org.opencontainers.image.source)")
	fs.StringVar(&o.revision, "revision", "", "the source `REVISION`, e.g. main@sha1:COMMIT (annotation org.opencontainers.image.revision)")
	fs.StringVar(&o.signKey, "sign-key", "", "sign the pushed artifact with this cosign private `KEY` file (cosign generate-key-pair; password in COSIGN_PASSWORD)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound on the whole run")
	// The registry flags, as the pinning commands define them.
	o.reg = NewOptions()
	pinning := pflag.NewFlagSet("pinning", pflag.ContinueOnError)
	o.reg.Bind(pinning)
	o.regFlags = pflag.NewFlagSet("registry", pflag.ContinueOnError)
	for _, n := range fluxPushRegistryFlags {
		f := pinning.Lookup(n)
		fs.AddFlag(f)
		o.regFlags.AddFlag(f)
	}
	return fs
}

// FluxPushFlags are the flags of digestpin flux push, for the reference.
func FluxPushFlags() *pflag.FlagSet {
	var o fluxPushOptions
	return o.flags()
}

// runFluxPush is `digestpin flux push REF --path ...`.
func runFluxPush(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var o fluxPushOptions
	fs := o.flags()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stderr, FluxPushUsage+fs.FlagUsages())
			return err
		}
		return &UsageError{fmt.Errorf("digestpin flux push: %w", err)}
	}
	if err := o.reg.setFromEnv(o.regFlags, os.LookupEnv); err != nil {
		return &UsageError{fmt.Errorf("digestpin flux push: %w", err)}
	}
	switch {
	case fs.NArg() != 1:
		return &UsageError{errors.New("digestpin flux push: name one artifact, oci://REGISTRY/REPOSITORY:TAG")}
	case o.path == "":
		return &UsageError{errors.New("digestpin flux push: --path names the manifests (a DIR, a FILE, or - for stdin)")}
	}
	raw := fs.Arg(0)
	ref, err := name.NewTag(trimOCI(raw), name.StrictValidation)
	if err != nil {
		return &UsageError{fmt.Errorf("digestpin flux push: the artifact %q is no oci://REGISTRY/REPOSITORY:TAG: %w", raw, err)}
	}
	files, err := o.files(stdin)
	if err != nil {
		return err
	}
	// The registry as the resolver reaches it: its HTTP layer and
	// keychain, through Resolver.Push, with messages that name the flags.
	ropts, err := o.reg.ResolveOptions(nil)
	if err != nil {
		return &UsageError{fmt.Errorf("digestpin flux push: %w", err)}
	}
	res, err := resolve.New(ropts...)
	if err != nil {
		return &UsageError{fmt.Errorf("digestpin flux push: %w", o.reg.LibraryError(err))}
	}
	var sign func(context.Context, name.Digest) error
	if o.signKey != "" {
		s, err := fluxoci.LoadSigner(o.signKey, []byte(os.Getenv("COSIGN_PASSWORD")))
		if err != nil {
			return &UsageError{err}
		}
		sign = func(ctx context.Context, d name.Digest) error {
			return res.Push(ctx, d, func(ctx context.Context, opts ...remote.Option) error {
				return fluxoci.Sign(ctx, d, s, opts...)
			})
		}
	}
	img, err := fluxoci.Artifact(files, o.source, o.revision)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(resolution.WithOptionNames(ctx, o.reg.OptionName), o.timeout)
	defer cancel()
	var out *fluxoci.Outcome
	err = res.Push(ctx, ref, func(ctx context.Context, opts ...remote.Option) error {
		var perr error
		out, perr = fluxoci.Push(ctx, ref, img, opts...)
		return perr
	})
	if err != nil {
		return fmt.Errorf("digestpin flux push: %w", err)
	}
	if !out.Pushed {
		what := "the same files"
		if out.Same {
			what = "this artifact"
		}
		fmt.Fprintf(stdout, "%s: unchanged, not pushed (the tag holds %s: %s)\n", ref, what, out.Digest.DigestStr())
		return nil
	}
	if sign != nil {
		if err := sign(ctx, out.Digest); err != nil {
			return fmt.Errorf("digestpin flux push: pushed %s, but not its signature: %w", out.Digest.DigestStr(), err)
		}
		fmt.Fprintf(stdout, "%s: pushed and signed %s\n", ref, out.Digest.DigestStr())
		return nil
	}
	fmt.Fprintf(stdout, "%s: pushed %s\n", ref, out.Digest.DigestStr())
	return nil
}

// trimOCI is ref without the oci:// of Flux's URLs.
func trimOCI(ref string) string {
	if len(ref) > len("oci://") && ref[:len("oci://")] == "oci://" {
		return ref[len("oci://"):]
	}
	return ref
}

// files are the files of the artifact: a folder's, one file's, or stdin.
func (o *fluxPushOptions) files(stdin io.Reader) ([]fluxoci.File, error) {
	if o.path == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading the manifests on stdin: %w", err)
		}
		n := o.name
		if n == "" {
			n = "manifests.yaml"
		}
		return []fluxoci.File{{Name: n, Data: b}}, nil
	}
	st, err := os.Stat(o.path)
	if err != nil {
		return nil, &UsageError{fmt.Errorf("digestpin flux push: --path %s: %w", o.path, err)}
	}
	if st.IsDir() {
		if o.name != "" {
			return nil, &UsageError{fmt.Errorf("digestpin flux push: --name names the file of a FILE or stdin, and --path %s is a folder", o.path)}
		}
		return fluxoci.ReadDir(o.path)
	}
	b, err := os.ReadFile(o.path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", o.path, err)
	}
	n := o.name
	if n == "" {
		n = filepath.Base(o.path)
	}
	return []fluxoci.File{{Name: n, Data: b}}, nil
}
