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
       digestpin argocd refresh --moved [flags]

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

With --moved, it finds what moved itself, for tags that move without
anyone here pushing them (a vendor's redis:7, a base image): it lists the
Applications that render through the plugin, resolves each tag they run
once (as a render would: the registry flags, cache, Redis, mirrors,
waiting periods and signature policies below), and refreshes exactly
those that run a digest the registry has moved past. Applications with a
lock file (DIGESTPIN_LOCK) are left to it. Run it on a schedule (a
CronJob: docs/argocd.md).

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
