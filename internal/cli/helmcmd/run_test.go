package helmcmd

import (
	"context"
	"io"

	"github.com/digestpin/digestpin/internal/cli"
)

// run is the full build's command line, as digestpin-helm runs it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return cli.Run(ctx, cli.Build{Version: "dev", Helm: Commands{}}, args, stdin, stdout, stderr)
}

// repoRoot is the module's root folder, from this package's folder.
const repoRoot = "../../.."
