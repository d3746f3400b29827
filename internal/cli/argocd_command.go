package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// ArgocdUsage is the help of digestpin argocd refresh, before its flags.
const ArgocdUsage = `Usage: digestpin argocd refresh [flags] IMAGE...

Asks Argo CD for a hard refresh of exactly the Applications that run one of
the pushed images: those whose status.summary.images (the images of their
live resources) include the IMAGE's repository and tag, with or without a
digest. Run it after pushing a tag again (CI: after the push), so that
Argo CD renders those Applications again instead of waiting for its
manifest cache to expire. It sets the annotation
argocd.argoproj.io/refresh: hard through the Kubernetes API (merge patch;
RBAC: list and patch applications.argoproj.io).

IMAGE is REPOSITORY[:TAG], normalised as the kubelet does (nginx is
docker.io/library/nginx:latest); a digest in it is ignored.

Flags:
`

// runArgocd is `digestpin argocd SUBCOMMAND`: refresh, or generate (the
// Argo CD plugin's generate command, argocd_generate.go).
func runArgocd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "generate" {
		// It reports its errors itself, as the plugin always did.
		return runArgocdGenerate(ctx, args[1:], stdout, stderr)
	}
	err := func() error {
		if len(args) == 0 || args[0] != "refresh" {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				fmt.Fprint(stderr, ArgocdUsage)
				return pflag.ErrHelp
			}
			if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				if near := nearestWord(args[0], []string{"generate", "refresh"}); near != "" {
					return &UsageError{fmt.Errorf("unknown command %q: did you mean \"argocd %s\"? (see digestpin --help)", "argocd "+args[0], near)}
				}
			}
			return &UsageError{errors.New("usage: digestpin argocd refresh [flags] IMAGE... (see digestpin argocd refresh --help), or digestpin argocd generate (the plugin's generate command)")}
		}
		return runHelm(ctx, "argocd refresh", args[1:], stdout, stderr)
	}()
	if err != nil && !errors.Is(err, pflag.ErrHelp) {
		return reported(stderr, err)
	}
	return err
}
