// Package cli is digestpin's command line: the filter that reads a
// manifest stream on stdin and the commands beside it (seed, argocd,
// completion, version), their flags and environment bound onto
// pin.Options, the one preamble the pinning commands share, exit codes and
// messages. Both binaries run it: digestpin (the module's root main)
// without Helm's engine, which hands template, install, upgrade and
// argocd refresh to digestpin-helm, and digestpin-helm
// (cmd/digestpin-helm), which runs them in-process through a Helm (package
// helmcmd).
package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/internal/readfile"
	"github.com/digestpin/digestpin/pin"
)

// Build is what a main hands Main: its version and, in the full build,
// the commands that need Helm's engine or Kubernetes' client.
type Build struct {
	// Version is the version the Makefile stamped into the main package
	// ("dev" when it did not); see VersionString.
	Version string
	// Helm runs template, install, upgrade and argocd refresh in this
	// process; nil in the build without Helm's engine, which hands them
	// to digestpin-helm (helmexec.go).
	Helm Helm
}

// Helm runs the commands of the full build: name is "template",
// "install", "upgrade", "argocd refresh" or "flux pin", args what
// follows it.
type Helm interface {
	Run(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error
}

// current is the Build that Main or Run runs; until one sets it (in the
// tests of this package), the build without Helm's engine.
var current atomic.Pointer[Build]

// build returns the current Build.
func build() Build {
	if b := current.Load(); b != nil {
		return *b
	}
	return Build{Version: "dev"}
}

// VersionString is the version --version prints: the stamped one, else,
// for `go install github.com/digestpin/digestpin@v1.2.3`, the module
// version Go recorded in the binary, else "dev".
func VersionString() string {
	if v := build().Version; v != "" && v != "dev" {
		return v
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return strings.TrimPrefix(bi.Main.Version, "v")
	}
	return "dev"
}

// versionString is VersionString, as this package calls it.
func versionString() string { return VersionString() }

// Main runs the command line of the process and returns its exit status.
func Main(b Build) int {
	current.Store(&b)
	// Run as the Flux CLI plugin (flux-digestpin), its commands are
	// digestpin flux's.
	os.Args = fluxPluginArgs(os.Args)
	// First, before any signal handler is set: a digestpin run by a
	// digestpin of another version refuses (execversion.go), and the
	// build without Helm's engine hands template, install and upgrade to
	// digestpin-helm (helmexec.go), which then starts as if run directly.
	if done, err := handOff(os.Args, b.Helm != nil); done {
		return handedOff(err, os.Stderr)
	}
	ctx, stop := notifyContext(context.Background())
	// A closed stdout (`digestpin | head -c 0`) must fail the write, so
	// that the run fails and writes no lock file or report, rather than
	// kill the process with SIGPIPE in the middle of it.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	return ExitCode(err)
}

// Run is Main's run for a caller that is not a main (the tests of the
// full build): build's commands, args without the program's name.
func Run(ctx context.Context, b Build, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	current.Store(&b)
	return run(ctx, args, stdin, stdout, stderr)
}

// runHelm runs a command of the full build: in this process when this is
// the full build, else in digestpin-helm (forwardHelm).
func runHelm(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	if h := build().Helm; h != nil {
		return h.Run(ctx, name, args, stdout, stderr)
	}
	words := append([]string{os.Args[0]}, strings.Fields(name)...)
	_, err := forwardHelm(append(words, args...), false)
	return err
}

// SignalError is the cause of a run that SIGINT or SIGTERM stopped.
type SignalError struct{ Sig os.Signal }

func (e *SignalError) Error() string {
	return fmt.Sprintf("stopped by %s: nothing written", e.Sig)
}

// ExitCode is 128+N for signal N, as a shell reports a process the
// signal killed; 1 for a signal that has no number.
func (e *SignalError) ExitCode() int {
	if s, ok := e.Sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// notifyContext returns a context that SIGINT or SIGTERM cancels with a
// *SignalError as its cause. After the first signal the default action is
// back, so a second one ends the process at once.
func notifyContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			signal.Stop(ch)
			cancel(&SignalError{sig})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(context.Canceled)
	}
}

// ExitCode maps an error from run to the process exit status: 0 for
// none and --help, the status an ExitCoder in it gives (2 for usage
// errors, 128+N for signal N, a command's own), 3 for a --check that
// found the registry differs from the lock file, 1 for everything else.
func ExitCode(err error) int {
	var ec ExitCoder
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ec):
		return ec.ExitCode()
	case errors.Is(err, pin.ErrLockDiffers):
		return 3
	}
	return 1
}

// ExitCoder is an error that says the exit status of the process it ends;
// ExitCode finds it in the error's chain.
type ExitCoder interface {
	error
	ExitCode() int
}

// UsageError is a bad command line or environment: exit status 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ExitCode is 2, as for every usage error of a Unix command.
func (e *UsageError) ExitCode() int { return 2 }

// timeoutError is the cause of a run that --timeout stopped.
type timeoutError struct {
	flag string // --timeout or DIGESTPIN_TIMEOUT
	d    time.Duration
}

func (e *timeoutError) Error() string { return fmt.Sprintf("%s %s ran out", e.flag, e.d) }

// run is the whole program: it finds the command args name (newRoot) and
// runs it. The filter reads the stream, pins it and writes it to stdout
// only when everything succeeded. Every message goes to stderr (and
// --log-file, and with --tty-errors the terminal); each command reports
// the error it returns there itself.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRoot(ctx, streams{stdin: stdin, stdout: stdout, stderr: stderr, completing: completing(append([]string{""}, args...))})
	if args == nil {
		args = []string{} // cobra reads os.Args for nil
	}
	root.SetArgs(args)
	// Each command writes its own help and returns pflag.ErrHelp, which
	// cobra would answer with its help and turn into success: the help
	// is written once, and the error kept for ExitCode.
	var ran error
	visit(root, func(c *cobra.Command) {
		if f := c.RunE; f != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				ran = f(cmd, args)
				return ran
			}
		}
	})
	root.SetHelpFunc(func(*cobra.Command, []string) {})
	if err := root.Execute(); err != nil || ran == nil {
		return err
	}
	return ran
}

// visit calls f for c and every command below it.
func visit(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		visit(sub, f)
	}
}

// runFilter is the root command, digestpin itself: the filter.
func runFilter(ctx context.Context, cmd *cobra.Command, o *Options, fs *pflag.FlagSet, args []string, s streams) error {
	perr := fs.Parse(args)
	if errors.Is(perr, pflag.ErrHelp) {
		usage(s.stderr, fs)
		return perr
	}
	// Variables that set nothing (a misspelt name) are warned about where
	// settings matter: not for --version.
	warn := func() bool { return !o.version }
	log, perr := o.Preamble(ctx, fs, perr, "digestpin --help", warn, s.stdin, s.stdout, s.stderr, nil)
	defer log.Close() //nolint:staticcheck // SA5001: Preamble returns its logger with its error, for the logger to report
	err := func() error {
		switch {
		case perr != nil:
			return perr
		case o.version:
			fmt.Fprintf(s.stdout, "digestpin %s\n", versionString())
			return nil
		case fs.NArg() > 0:
			return unexpectedArgument(cmd, fs.Arg(0))
		}
		popts, err := o.PinOptions(log)
		if err != nil {
			return &UsageError{err}
		}
		p, err := pin.New(popts)
		if err != nil {
			return &UsageError{o.LibraryError(err)}
		}
		return o.pinInput(ctx, p, s.stdin, s.stdout, log)
	}()
	if err != nil {
		log.Fail(err)
	}
	return err
}

// unexpectedArgument is the filter's error for an argument: a command
// misspelt, or a file given without -f. The filter reads the manifests
// on stdin or from -f FILE.
func unexpectedArgument(root *cobra.Command, arg string) error {
	if near := nearestCommand(root, arg); near != "" {
		return &UsageError{fmt.Errorf("unknown command %q: did you mean %q? (see digestpin --help)", arg, near)}
	}
	return &UsageError{fmt.Errorf("unexpected argument %q: digestpin reads the manifests on stdin or from -f FILE", arg)}
}

// filterFlags are the flags of digestpin itself, the filter, bound onto
// o; docs/reference.md is written from them.
func filterFlags(o *Options) *pflag.FlagSet {
	fs := pflag.NewFlagSet("digestpin", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.Bind(fs)
	return fs
}

// PinStream gets the input (reads it, or renders the chart), pins it,
// writes it to stdout and only then puts the lock file and the report in
// place. A signal or --timeout at any point before the output is written
// means nothing is written at all; one while it is written (a reader that
// does not read) ends the run at once, and the error says how much of the
// output got out.
func (o *Options) PinStream(ctx context.Context, p *pin.Pinner, input func(context.Context) ([]byte, error), stdout io.Writer, log *Logger) error {
	ctx, cancel := context.WithTimeoutCause(ctx, o.Timeout, &timeoutError{flag: o.Name("timeout"), d: o.Timeout})
	defer cancel()
	log.bound(ctx)
	in, err := input(ctx)
	if err != nil {
		return stopped(ctx, err)
	}
	res, err := p.Pin(ctx, in)
	if err != nil {
		if ctx.Err() == nil {
			err = o.differs(err, log) // --check: the report and summaries still
		}
		return stopped(ctx, err)
	}
	if len(bytes.Trim(in, " \t\r\n")) == 0 {
		// What Helm hands a post-renderer for a release without
		// manifests: valid, and said so, since nothing else is.
		log.Debugf("the input is empty: an empty release, nothing to pin")
	}
	if ctx.Err() != nil {
		res.Discard()
		return stopped(ctx, ctx.Err())
	}
	if err := writeOutput(ctx, stdout, res); err != nil {
		res.Discard()
		return err
	}
	o.printChanges(res.Changes, log)
	return res.Commit()
}

// stopped returns err, or when a signal or --timeout stopped the run, that
// cause: for a timeout with what was going on (which images were still
// being resolved), for a signal alone.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	var te *timeoutError
	switch {
	case !errors.As(cause, &te):
		return cause
	case strings.Contains(err.Error(), cause.Error()):
		// The error says it already (net/http reports the cause).
		return err
	}
	return fmt.Errorf("%w: %w", cause, err)
}

// StdinStops refuses a stdin that is a terminal of which this process
// is not in the foreground: reading it would stop the process (SIGTTIN)
// until someone types fg, which a script never does. what is what would
// be read; instead says what to do rather than read the terminal.
func StdinStops(stdin io.Reader, what, instead string) error {
	if f, _ := stdin.(*os.File); f != nil && isTerminal(f) && inBackground(f) {
		return fmt.Errorf("reading %s from stdin: stdin is a terminal and digestpin runs in the background (as under timeout without --foreground), where reading it would stop the process: pipe the %s in, or use %s", what, what, instead)
	}
	return nil
}

// read returns the whole input, from stdin or -f FILE, in a slice of its
// exact size (readfile.All: a file is read at the size it has, a pipe in
// chunks, not into a slice grown to twice the input), outside the Go heap
// when it is large (inputMemory). Call free once nothing refers to the
// input any more. Opening a FIFO and reading a pipe block in the kernel,
// so the read runs on its own goroutine and read returns when ctx ends:
// that goroutine is left behind, which is fine for a process about to
// exit, and frees the memory it read into when it ends.
func (o *Options) Read(ctx context.Context, stdin io.Reader, log *Logger) (in []byte, free func(), err error) {
	what, fromFile := "stdin", o.filename != "" && o.filename != "-"
	if fromFile {
		what = o.filename
	} else if isTerminal(stdin) {
		if err := StdinStops(stdin, "manifests", "-f FILE"); err != nil {
			return nil, nil, err
		}
		// Someone typed `digestpin` alone: say what it waits for.
		log.Printf("", "reading manifests from stdin (end with Ctrl-D); usually: helm template … | digestpin, or digestpin -f FILE")
	}
	type result struct {
		b   []byte
		err error
	}
	mem := new(inputMemory)
	// claimed says who has the input: read, when the goroutine hands it
	// over, or the goroutine itself, which frees it, when read has gone.
	var claimed atomic.Bool
	done := make(chan result, 1)
	go func() {
		b, err := readInput(o.filename, fromFile, stdin, mem)
		if err != nil || !claimed.CompareAndSwap(false, true) {
			mem.free()
		}
		done <- result{b, err}
	}()
	select {
	case <-ctx.Done():
		if !claimed.CompareAndSwap(false, true) {
			// The goroutine handed the input over just then.
			mem.free()
			<-done
		}
		return nil, nil, fmt.Errorf("reading manifests from %s: %w", what, ctx.Err())
	case r := <-done:
		if r.err != nil {
			return nil, nil, fmt.Errorf("reading manifests from %s: %w", what, r.err)
		}
		return r.b, mem.free, nil
	}
}

// readInput reads the file name, when fromFile, or else stdin, into mem.
func readInput(name string, fromFile bool, stdin io.Reader, mem *inputMemory) ([]byte, error) {
	r := stdin
	if fromFile {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	return readfile.AllIn(r, -1, mem.memory())
}
