// Command digestpin pins the container images of a Kubernetes manifest
// stream to the digests their registries serve now, and adds a stable
// checksum/images annotation to each pod template: the slim build, without
// Helm's engine, a few lines over package cli. It reads the stream on
// stdin (or -f FILE) and writes it to stdout, as a Helm post-renderer, in an
// Argo CD Config Management Plugin, or in a CI pipeline.
//
// Without Helm's engine it starts faster and in less memory on every
// render: it hands digestpin template, install, upgrade and argocd refresh
// to digestpin-helm (cmd/digestpin-helm), the full build, found beside it
// or on PATH.
package main

import (
	"os"

	"github.com/digestpin/digestpin/internal/cli"
)

// version is stamped by the Makefile from plugin.yaml (-X main.version).
var version = "dev"

func main() {
	os.Exit(cli.Main(cli.Build{Version: version}))
}
