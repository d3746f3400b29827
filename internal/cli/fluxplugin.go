package cli

import (
	"path/filepath"
	"strings"
)

// FluxPluginBin is the name `flux plugin install digestpin` gives the
// binary (the bin of scripts/flux/digestpin.yaml): flux runs
// `flux digestpin ARGS` as flux-digestpin ARGS.
const FluxPluginBin = "flux-digestpin"

// fluxPluginArgs is args with "flux" after the program's name when the
// program runs as the Flux CLI plugin, so that `flux digestpin push ...`
// runs `digestpin flux push ...`; --version and version stay digestpin's.
func fluxPluginArgs(args []string) []string {
	if len(args) == 0 || strings.TrimSuffix(filepath.Base(args[0]), ".exe") != FluxPluginBin {
		return args
	}
	if len(args) > 1 && (args[1] == "--version" || args[1] == "version") {
		return args
	}
	return append([]string{args[0], "flux"}, args[1:]...)
}
