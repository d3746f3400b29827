// Command digestpin pins the container images of a Kubernetes manifest
// stream to the digests their registries serve now, and adds a stable
// checksum/images annotation to each pod template. It reads the stream on
// stdin (or -f FILE) and writes it to stdout, as a Helm post-renderer, in an
// Argo CD Config Management Plugin, or in a CI pipeline.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

// version is stamped by the Makefile from plugin.yaml.
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		os.Exit(exitCode(err))
	}
}

// exitCode maps an error from run to the process exit status: 2 for usage
// errors, 1 for everything else.
func exitCode(err error) int {
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, pflag.ErrHelp) {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	return 1
}

// usageError is a bad command line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// run is the whole program: it parses args, reads the stream, pins it and
// writes it to stdout only when everything succeeded. Every message goes to
// stderr; run reports the error it returns there itself.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	o := newOptions()
	fs := pflag.NewFlagSet("digestpin", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o.bind(fs)
	fs.Usage = func() { usage(stderr, fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		fmt.Fprintf(stderr, "digestpin: %v (see digestpin --help)\n", err)
		return &usageError{err}
	}
	if err := o.fromEnv(fs, os.LookupEnv); err != nil {
		fmt.Fprintf(stderr, "digestpin: %v\n", err)
		return &usageError{err}
	}
	if o.version {
		fmt.Fprintf(stdout, "digestpin %s\n", version)
		return nil
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q: digestpin reads the manifests on stdin or from -f FILE", fs.Arg(0))
		fmt.Fprintf(stderr, "digestpin: %v\n", err)
		return &usageError{err}
	}
	rep := newReporter(stderr, o)
	defer rep.close()
	err := pin(ctx, o, stdin, stdout, rep)
	if err != nil {
		rep.fail(err)
	}
	return err
}
