package helmcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"helm.sh/helm/v4/pkg/action"
	helmcli "helm.sh/helm/v4/pkg/cli"
	release "helm.sh/helm/v4/pkg/release/v1"

	"github.com/digestpin/digestpin/detgen"
	"github.com/digestpin/digestpin/helmaction"
	"github.com/digestpin/digestpin/internal/cli"
	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/postrender"
)

// configureHelm makes the action configuration of an install or upgrade
// as Helm's CLI does: from settings, HELM_DRIVER and
// HELM_MEMORY_DRIVER_DATA. Tests replace it.
type configureHelm func(settings *helmcli.EnvSettings, log io.Writer) (*action.Configuration, error)

// helmConfiguration is the configureHelm of the command.
func helmConfiguration(settings *helmcli.EnvSettings, log io.Writer) (*action.Configuration, error) {
	return helmaction.NewConfiguration(settings, os.Getenv("HELM_DRIVER"), os.Getenv("HELM_MEMORY_DRIVER_DATA"), log)
}

// deployCmd is one run of digestpin install or digestpin upgrade.
type deployCmd struct {
	name      string // "install" or "upgrade"
	configure configureHelm
	o         *cli.Options // the pinning flags
	install   helmaction.InstallOptions
	upgrade   helmaction.UpgradeOptions
}

// source and deploy are the options of the command's Helm flags.
func (c *deployCmd) source() *helmaction.Source {
	if c.name == "install" {
		return &c.install.Source
	}
	return &c.upgrade.Source
}

func (c *deployCmd) deploy() *helmaction.Deploy {
	if c.name == "install" {
		return &c.install.Deploy
	}
	return &c.upgrade.Deploy
}

// flags are the flags of digestpin install or upgrade: Helm's onto c's
// Helm options, the pinning flags onto c.o (renderFlags), the seed file
// onto seedFile; docs/reference.md is written from them.
func (c *deployCmd) flags(seedFile *string) (fs, helmFS, pinFS *pflag.FlagSet) {
	helmFS = pflag.NewFlagSet("helm", pflag.ContinueOnError)
	helmFS.SortFlags = false
	if c.name == "install" {
		c.install.Bind(helmFS)
	} else {
		c.upgrade.Bind(helmFS)
	}
	fs, pinFS = renderFlags(c.name, c.o, helmFS, cli.DeployRenames, seedFile)
	pinFS.Lookup("pin-timeout").Usage = "bound on pinning the images (every registry request of the run); Helm's --timeout bounds each Kubernetes operation"
	return fs, helmFS, pinFS
}

// runDeploy is `digestpin install [NAME] CHART` and `digestpin upgrade
// NAME CHART`: helm install and helm upgrade through Helm 4's SDK, with
// their flags, rendering the chart with deterministic generator functions
// derived from the seed and the release, and pinning every image (hooks
// included) in-process before Helm applies the manifests. stdout gets
// what Helm prints (the release's status; after a dry run also the hooks
// and the manifest), only when everything succeeded.
func runDeploy(ctx context.Context, name string, args []string, stdout, stderr io.Writer, configure configureHelm) error {
	o := cli.NewOptions()
	c := &deployCmd{name: name, configure: configure, o: o}
	var seedFile string
	fs, helmFS, pinFS := c.flags(&seedFile)

	perr := fs.Parse(args)
	if errors.Is(perr, pflag.ErrHelp) {
		deployUsage(stderr, name, helmFS, pinFS)
		return perr
	}
	// The seed and the values files are inputs: a lock file, report or log
	// onto one of them is refused, as for digestpin template.
	log, err := o.Preamble(ctx, pinFS, perr, "digestpin "+name+" --help", nil, nil, stdout, stderr, func() []cli.NamedInput {
		return renderInputs(o, seedFile, c.source().Values.ValueFiles)
	})
	defer log.Close() //nolint:staticcheck // SA5001: Preamble returns its logger with its error, for the logger to report
	err = func() error {
		if err != nil {
			return err
		}
		if err := c.checkArgs(fs.Args()); err != nil {
			return err
		}
		seed, err := readSeed(o, name, seedFile)
		if err != nil {
			return err
		}
		popts, err := o.PinOptions(log)
		if err != nil {
			return &cli.UsageError{Err: err}
		}
		src, dep := c.source(), c.deploy()
		for _, w := range dep.Warnings() {
			log.Warnf("%s", w)
		}
		// Helm logs most errors before it returns them: they wait for the
		// outcome, so that a failure is one line. Helm's packages log to
		// slog's default logger too.
		hlog := &heldErrors{w: helmLog{log}}
		prev := slog.Default()
		slog.SetDefault(helmaction.NewLogger(hlog, src.Settings.Debug))
		defer slog.SetDefault(prev)
		cfg, err := c.configure(src.Settings, hlog)
		if err != nil {
			return err
		}

		// The lock file and the report wait for Helm to succeed.
		held := &heldResults{}
		settle := held.settle
		gen, err := c.pinning(ctx, seed, popts, cfg, hlog, held, log)
		if err != nil {
			return err
		}

		var out bytes.Buffer
		if err := c.run(ctx, cfg, &out); err != nil {
			_ = settle(false)
			return err
		}
		hlog.flush()
		warnGenerated(log, gen)
		return writeDeployed(stdout, out.Bytes(), dep.IsDryRun(), settle)
	}()
	if err != nil {
		log.Fail(err)
	}
	return err
}

// writeDeployed writes Helm's output of an install or upgrade to stdout,
// then settles the held lock files and reports: committed, as what was
// deployed, even when stdout fails, but for a dry run, which did nothing
// but print.
func writeDeployed(stdout io.Writer, out []byte, dryRun bool, settle func(commit bool) error) error {
	if _, err := stdout.Write(out); err != nil {
		if dryRun {
			_ = settle(false)
		} else if cerr := settle(true); cerr != nil {
			return errors.Join(fmt.Errorf("writing output: %w", err), cerr)
		}
		return fmt.Errorf("writing output: %w", err)
	}
	return settle(true)
}

// pinning sets c's render up for a deterministic render with seed and
// pinned by a post-renderer made with popts, whose results held keeps,
// with the key cache of popts (keyCache), and returns the render's
// generators; lookup reads the cluster of cfg when Helm's would.
func (c *deployCmd) pinning(ctx context.Context, seed detgen.Seed, popts pin.Options, cfg *action.Configuration, hlog *heldErrors, held *heldResults, log *cli.Logger) (*detgen.Generator, error) {
	src, dep := c.source(), c.deploy()
	gen := detgen.New(seed, detgen.Release{Name: src.ReleaseName, Namespace: src.Settings.Namespace()}, time.Now)
	if kc := keyCache(ctx, popts, log); kc != nil {
		gen.SetKeyCache(kc)
	}
	if lookup := helmaction.ClusterLookup(cfg); lookup != nil && dep.UsesCluster() {
		gen.SetLookup(lookup)
	}
	popts.Generated = func() *pin.Generated { return generatedReport(gen) }
	pr, err := postrender.New(popts)
	if err != nil {
		return nil, &cli.UsageError{Err: c.o.LibraryError(err)}
	}
	pr.Timeout = c.o.Timeout
	pr.Keep = held.keep
	dep.PostRenderer = pr.WithContext(ctx)
	src.Funcs = gen.Funcs()
	src.Rewrite = detgen.Rewrite
	src.Log = hlog
	return gen, nil
}

// checkArgs takes the release and chart from args, and refuses what
// c cannot do: options Helm's action refuses, DNS lookups (as digestpin
// template: getHostByName's answers could differ from one render to the
// next), and values on stdin that would never end.
func (c *deployCmd) checkArgs(args []string) error {
	if err := c.setArgs(args); err != nil {
		return err
	}
	if err := c.deploy().Check(); err != nil {
		return &cli.UsageError{Err: err}
	}
	if c.source().EnableDNS {
		return &cli.UsageError{Err: fmt.Errorf("--enable-dns: digestpin %s renders without DNS lookups (getHostByName gives \"\", as helm %s does without the flag)", c.name, c.name)}
	}
	if c.source().ReadsStdin() {
		return cli.StdinStops(os.Stdin, "values", "a values file")
	}
	return nil
}

// heldResults are the Pin results of one install or upgrade (a Helm
// post-renderer runs for each render), whose lock file and report wait
// for Helm to succeed. It is safe for concurrent use.
type heldResults struct {
	mu      sync.Mutex
	results []*pin.Result
}

// keep holds r.
func (h *heldResults) keep(r *pin.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.results = append(h.results, r)
}

// settle commits every result held (commit), or discards them, and holds
// none after.
func (h *heldResults) settle(commit bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, r := range h.results {
		if commit {
			errs = append(errs, r.Commit())
		} else {
			r.Discard()
		}
	}
	h.results = nil
	return errors.Join(errs...)
}

// heldErrors passes Helm's log records to w, but holds its errors until
// flush: Helm logs most errors of an install before it returns them, and a
// failure is one line. A success flushes what was held (an error Helm
// logs and goes on from, as "failed to record the release").
type heldErrors struct {
	mu   sync.Mutex
	w    io.Writer
	held [][]byte
}

func (h *heldErrors) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if bytes.Contains(p, []byte("level=ERROR ")) {
		h.held = append(h.held, bytes.Clone(p))
		return len(p), nil
	}
	return h.w.Write(p)
}

// flush writes the errors held.
func (h *heldErrors) flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.held {
		_, _ = h.w.Write(p)
	}
	h.held = nil
}

// setArgs takes the command's arguments; a bad count is a usage error.
func (c *deployCmd) setArgs(args []string) error {
	var err error
	usage := "digestpin install [NAME] CHART --seed-file FILE [flags]"
	if c.name == "install" {
		err = c.install.SetArgs(args)
	} else {
		usage = "digestpin upgrade NAME CHART --seed-file FILE [flags]"
		err = c.upgrade.SetArgs(args)
	}
	if err != nil {
		return &cli.UsageError{Err: fmt.Errorf("%w (usage: %s)", err, usage)}
	}
	return nil
}

// run installs or upgrades, and writes the status to out.
func (c *deployCmd) run(ctx context.Context, cfg *action.Configuration, out io.Writer) error {
	var (
		rel       *release.Release
		installed bool
		err       error
	)
	if c.name == "install" {
		rel, err = helmaction.Install(ctx, cfg, c.install)
	} else {
		rel, installed, err = helmaction.Upgrade(ctx, cfg, c.upgrade)
	}
	if err != nil {
		verb := "installing"
		if c.name == "upgrade" && !installed {
			verb = "upgrading"
		}
		return c.failed(ctx, verb, err)
	}
	if c.name == "install" {
		return c.install.WriteStatus(out, rel)
	}
	return c.upgrade.WriteStatus(out, rel, installed)
}

// failed is the error of an install or upgrade that failed: on one line,
// and wrapping err, so that a lock file that differs (pin.ErrLockDiffers)
// still exits 3. A signal says that the release was cancelled.
func (c *deployCmd) failed(ctx context.Context, verb string, err error) error {
	name := c.source().ReleaseName
	var se *cli.SignalError
	if ctx.Err() != nil && errors.As(context.Cause(ctx), &se) {
		return &cancelledError{release: name, sig: se}
	}
	msg := oneLine(err)
	// The post-renderer's timeout is --pin-timeout here.
	var te *postrender.TimeoutError
	if errors.As(err, &te) {
		msg = strings.Replace(msg, te.Error(), fmt.Sprintf("%s %s ran out", c.o.Name("pin-timeout"), te.Timeout), 1)
	}
	return &lineError{msg: fmt.Sprintf("%s release %s: %s", verb, name, msg), err: err}
}

// lineError is an error shown as msg, which says what err says on one
// line, and which unwraps to err.
type lineError struct {
	msg string
	err error
}

func (e *lineError) Error() string { return e.msg }
func (e *lineError) Unwrap() error { return e.err }

// cancelledError is an install or upgrade that a signal stopped: Helm may
// have applied part of it.
type cancelledError struct {
	release string
	sig     *cli.SignalError
}

func (e *cancelledError) Error() string {
	return fmt.Sprintf("release %s has been cancelled by %s; Helm may have applied part of it (helm history %s)", e.release, e.sig.Sig, e.release)
}

func (e *cancelledError) Unwrap() error { return e.sig }

// deployUsage is digestpin install --help and digestpin upgrade --help.
func deployUsage(w io.Writer, name string, helmFS, pinFS *pflag.FlagSet) {
	what, usage := `digestpin install installs a chart as helm install does, through Helm 4's
SDK`, "digestpin install [NAME] CHART --seed-file FILE [flags]"
	if name == "upgrade" {
		what, usage = `digestpin upgrade upgrades a release as helm upgrade does, through Helm 4's
SDK`, "digestpin upgrade NAME CHART --seed-file FILE [flags]"
	}
	fmt.Fprintf(w, `%s, with every generator function (randAlphaNum, genCA, htpasswd, ...)
made deterministic as digestpin template makes them, and every image (hooks
and test pods included) pinned to the digest its registry serves, before
Helm applies the manifests. It prints what helm %s prints. With Helm 4
and the digestpin plugin: helm digestpin %s ...

Usage:
  %s

Helm flags (helm %s's, same meaning; the post-renderer is digestpin):
%s
Pinning flags (digestpin's; --ca-file is --registry-ca-file here):
%s
Two timeouts: --timeout is Helm's, how long each Kubernetes operation may
take (a hook's Job, --wait; default 5m0s); --pin-timeout is digestpin's, how
long pinning the images may take (default 2m0s).

Every pinning flag can also be set as DIGESTPIN_<FLAG> (DIGESTPIN_PIN_TIMEOUT,
DIGESTPIN_SEED_FILE, ...); HELM_* variables set Helm's (HELM_NAMESPACE,
HELM_KUBECONTEXT, HELM_DRIVER, ...); flags win.
`, what, name, name, usage, name, helmFS.FlagUsages(), cli.GroupedUsages(pinFS))
}
