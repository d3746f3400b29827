// Package helmcmd holds the commands of digestpin's full build, which need
// Helm 4's engine (template, install, upgrade) or Kubernetes' client
// (argocd refresh), or render a Flux HelmRelease's chart (flux pin):
// package cli runs them through Commands, in
// digestpin-helm only, so that digestpin itself links neither.
package helmcmd

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/internal/cli"
)

// Commands is the cli.Helm of the full build.
type Commands struct{}

var _ cli.Helm = Commands{}

// Run runs digestpin template, install, upgrade, argocd refresh or flux
// pin (name)
// in this process.
func (Commands) Run(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	switch name {
	case "template":
		return runTemplate(ctx, args, stdout, stderr)
	case "install", "upgrade":
		return runDeploy(ctx, name, args, stdout, stderr, helmConfiguration)
	case "argocd refresh":
		return runArgocdRefresh(ctx, args, stdout, stderr)
	case "flux pin":
		return runFluxPin(ctx, args, stdout, stderr)
	}
	return fmt.Errorf("digestpin-helm has no command %q", name)
}

// Flags returns the flags of command name (as Run takes it), for
// completion: Helm's and the pinning flags together, as the command
// parses them.
func (Commands) Flags(name string) *pflag.FlagSet {
	switch name {
	case "template":
		t := newTemplateOptions()
		fs, _, _ := t.flags(cli.NewOptions())
		return fs
	case "install", "upgrade":
		c := &deployCmd{name: name, o: cli.NewOptions()}
		var seedFile string
		fs, _, _ := c.flags(&seedFile)
		return fs
	case "argocd refresh":
		var o refreshOptions
		return o.flags()
	case "flux pin":
		var o fluxOptions
		return o.flags()
	}
	return nil
}
