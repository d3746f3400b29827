// Command argocd-cmp-server is Argo CD's Config Management Plugin server,
// the command the plugin's sidecar runs, built from Argo CD's own package:
// the argocd binary runs the same command when it is called by this name.
// make test builds it into the cache folder for the tests of this module.
package main

import (
	"os"

	"github.com/argoproj/argo-cd/v3/cmd/argocd-cmp-server/commands"
)

func main() {
	if err := commands.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
