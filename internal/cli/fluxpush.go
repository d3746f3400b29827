package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/internal/fluxoci"
	"github.com/digestpin/digestpin/internal/readfile"
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
pushed, and the digest it holds is printed; with a signing flag, that
artifact is signed if it carries no signature of that kind. With --sign-key, a pushed
artifact is signed as cosign sign --key does (the .sig tag, no
transparency log), for an OCIRepository's spec.verify with provider
cosign; the key's password is read from COSIGN_PASSWORD.

With --sign-keyless, a pushed artifact is signed as cosign sign does
without a key: an ephemeral key, a short-lived certificate from Fulcio for
the CI job's OIDC identity, the signature in Rekor's transparency log, and
the bundle attached to the artifact as an OCI referrer, for an
OCIRepository's spec.verify.matchOIDCIdentity. The identity token is read
from --identity-token's FILE, else SIGSTORE_ID_TOKEN, else asked of GitHub
Actions (a job with permissions id-token: write). The Sigstore instance is
the public one unless --fulcio-url and --rekor-url (or DIGESTPIN_FULCIO_URL
and DIGESTPIN_REKOR_URL) name your own.

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
	// keyless signing: --sign-keyless, the token's file, the instance.
	keyless                        bool
	tokenFile, fulcioURL, rekorURL string
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
	fs.BoolVar(&o.keyless, "sign-keyless", false, "sign the pushed artifact keylessly, as cosign sign does without a key: a Fulcio certificate for the job's OIDC identity, logged in Rekor")
	fs.StringVar(&o.tokenFile, "identity-token", "", "the `FILE` holding the OIDC identity token for --sign-keyless (default: $SIGSTORE_ID_TOKEN, else GitHub Actions' token for audience sigstore)")
	fs.StringVar(&o.fulcioURL, "fulcio-url", DefaultFulcioURL, "the Fulcio `URL` --sign-keyless gets its certificate from")
	fs.StringVar(&o.rekorURL, "rekor-url", DefaultRekorURL, "the Rekor `URL` --sign-keyless logs the signature in")
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
	keylessFlags := fs.Changed("identity-token") || fs.Changed("fulcio-url") || fs.Changed("rekor-url")
	// The Sigstore instance from DIGESTPIN_FULCIO_URL and
	// DIGESTPIN_REKOR_URL, as the registry flags from theirs.
	for _, n := range []string{"fulcio-url", "rekor-url"} {
		if v := os.Getenv(envName(n)); v != "" && !fs.Changed(n) {
			_ = fs.Set(n, v)
		}
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
	var signedFor string
	switch {
	case o.signKey != "" && o.keyless:
		return &UsageError{errors.New("digestpin flux push: --sign-key and --sign-keyless: choose one")}
	case !o.keyless && keylessFlags:
		return &UsageError{errors.New("digestpin flux push: --identity-token, --fulcio-url and --rekor-url are for --sign-keyless")}
	case o.keyless:
		k, err := o.keylessSigner(ctx)
		if err != nil {
			return err
		}
		sign = func(ctx context.Context, d name.Digest) error {
			bundle, id, err := fluxoci.SignKeyless(ctx, d, k)
			if err != nil {
				return err
			}
			signedFor = " for " + id.Subject + " (issuer " + id.Issuer + ")"
			return res.Push(ctx, d, func(ctx context.Context, opts ...remote.Option) error {
				return fluxoci.Attach(ctx, d, bundle, opts...)
			})
		}
	case o.signKey != "":
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
		// An artifact a run pushed but failed to sign is signed now.
		var signed bool
		if sign != nil {
			err = res.Push(ctx, out.Digest, func(ctx context.Context, opts ...remote.Option) error {
				var serr error
				signed, serr = fluxoci.Signed(ctx, out.Digest, o.keyless, opts...)
				return serr
			})
			if err != nil {
				return fmt.Errorf("digestpin flux push: %w", err)
			}
		}
		if sign == nil || signed {
			fmt.Fprintf(stdout, "%s: unchanged, not pushed (the tag holds %s: %s)\n", ref, what, out.Digest.DigestStr())
			return nil
		}
		if err := sign(ctx, out.Digest); err != nil {
			return fmt.Errorf("digestpin flux push: %s holds %s unsigned, and signing it failed: %w", ref, out.Digest.DigestStr(), err)
		}
		fmt.Fprintf(stdout, "%s: unchanged, not pushed (the tag holds %s: %s), which had no signature: signed it%s\n", ref, what, out.Digest.DigestStr(), signedFor)
		return nil
	}
	if sign != nil {
		if err := sign(ctx, out.Digest); err != nil {
			return fmt.Errorf("digestpin flux push: pushed %s, but not its signature: %w", out.Digest.DigestStr(), err)
		}
		fmt.Fprintf(stdout, "%s: pushed and signed %s%s\n", ref, out.Digest.DigestStr(), signedFor)
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

// The public Sigstore instance, cosign's defaults.
const (
	DefaultFulcioURL = "https://fulcio.sigstore.dev"
	DefaultRekorURL  = "https://rekor.sigstore.dev"
)

// keylessSigner is where --sign-keyless gets its certificate and log
// entry, with the identity token: a token that is no JWT, names no issuer
// or has expired is refused here, before anything is pushed.
func (o *fluxPushOptions) keylessSigner(ctx context.Context) (fluxoci.Keyless, error) {
	k := fluxoci.Keyless{FulcioURL: o.fulcioURL, RekorURL: o.rekorURL, Timeout: o.reg.Registry.RequestTimeout}
	for _, u := range []struct{ flag, url string }{{"--fulcio-url", o.fulcioURL}, {"--rekor-url", o.rekorURL}} {
		if p, err := url.Parse(u.url); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return k, &UsageError{fmt.Errorf("digestpin flux push: %s %q is no http(s) URL", u.flag, u.url)}
		}
	}
	token, from, err := identityToken(ctx, o.tokenFile, os.Getenv, http.DefaultClient)
	if err != nil {
		return k, &UsageError{fmt.Errorf("digestpin flux push: --sign-keyless: %w", err)}
	}
	if err := fluxoci.CheckToken(token, time.Now()); err != nil {
		return k, &UsageError{fmt.Errorf("digestpin flux push: --sign-keyless: %s: %w", from, err)}
	}
	k.Token = token
	return k, nil
}

// identityToken is the OIDC identity token for keyless signing, and where
// it came from: the file named, else $SIGSTORE_ID_TOKEN, else GitHub
// Actions' token for the audience sigstore (its
// ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN, which a job with permissions
// id-token: write has), as cosign finds one.
func identityToken(ctx context.Context, file string, getenv func(string) string, client *http.Client) (string, string, error) {
	switch {
	case file != "":
		b, err := readfile.Regular(file, 1<<20)
		if err != nil {
			return "", "", fmt.Errorf("reading the identity token: %w", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, "--identity-token " + file, nil
		}
		return "", "", fmt.Errorf("the identity token file %s is empty", file)
	case strings.TrimSpace(getenv("SIGSTORE_ID_TOKEN")) != "":
		return strings.TrimSpace(getenv("SIGSTORE_ID_TOKEN")), "SIGSTORE_ID_TOKEN", nil
	case getenv("ACTIONS_ID_TOKEN_REQUEST_URL") != "":
		t, err := githubToken(ctx, getenv("ACTIONS_ID_TOKEN_REQUEST_URL"), getenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN"), client)
		return t, "GitHub Actions' identity token", err
	}
	return "", "", errors.New("no OIDC identity token: name its file with --identity-token, set SIGSTORE_ID_TOKEN, or run in GitHub Actions with permissions id-token: write")
}

// githubToken asks GitHub Actions for an identity token for the audience
// sigstore, as its documented token request does.
func githubToken(ctx context.Context, reqURL, bearer string, client *http.Client) (string, error) {
	u, err := url.Parse(reqURL)
	if err != nil {
		return "", fmt.Errorf("ACTIONS_ID_TOKEN_REQUEST_URL is no URL: %w", err)
	}
	q := u.Query()
	q.Set("audience", "sigstore")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("asking GitHub Actions for an identity token: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("asking GitHub Actions for an identity token: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("reading GitHub Actions' identity token: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GitHub Actions refused an identity token: %s (does the job have permissions id-token: write?)", resp.Status)
	}
	var v struct{ Value string }
	if err := json.Unmarshal(body, &v); err != nil || v.Value == "" {
		return "", fmt.Errorf("GitHub Actions' answer holds no identity token (%d bytes)", len(body))
	}
	return v.Value, nil
}
