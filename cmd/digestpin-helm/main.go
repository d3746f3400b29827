// Command digestpin-helm is digestpin's full build: every command of
// digestpin, with template, install, upgrade and argocd refresh run in this
// process through Helm 4's engine and Kubernetes' client. digestpin runs it
// for those commands; it can also be run directly.
package main

import (
	"os"

	"github.com/digestpin/digestpin/internal/cli"
	"github.com/digestpin/digestpin/internal/cli/helmcmd"
)

// version is stamped by the Makefile from plugin.yaml (-X main.version).
var version = "dev"

func main() {
	os.Exit(cli.Main(cli.Build{Version: version, Helm: helmcmd.Commands{}}))
}
