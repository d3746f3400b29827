package helmcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	helmcli "helm.sh/helm/v4/pkg/cli"

	"github.com/digestpin/digestpin/detgen"
	"github.com/digestpin/digestpin/helmaction"
	"github.com/digestpin/digestpin/internal/cli"
	"github.com/digestpin/digestpin/pin"
)

// templateOptions are digestpin template's own options: helm template's
// and the seed's. The pinning flags live in options.
type templateOptions struct {
	seedFile string
	render   helmaction.Options
}

// newTemplateOptions are template's options before its flags are parsed.
func newTemplateOptions() *templateOptions {
	return &templateOptions{render: helmaction.Options{Source: helmaction.Source{Settings: helmcli.New()}}}
}

// runTemplate is `digestpin template [NAME] CHART [flags]`: it renders the
// chart with Helm 4's engine and deterministic generator functions derived
// from the seed and the release, then pins the result exactly as the
// filter does, and writes it to stdout only when everything succeeded.
func runTemplate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := cli.NewOptions()
	t := newTemplateOptions()
	fs, helmFS, pinFS := t.flags(o)

	perr := fs.Parse(args)
	if errors.Is(perr, pflag.ErrHelp) {
		templateUsage(stderr, helmFS, pinFS)
		return perr
	}
	log, err := o.Preamble(ctx, pinFS, perr, "digestpin template --help", nil, nil, stdout, stderr, func() []cli.NamedInput {
		return renderInputs(o, t.seedFile, t.render.Values.ValueFiles)
	})
	defer log.Close() //nolint:staticcheck // SA5001: Preamble returns its logger with its error, for the logger to report
	err = func() error {
		if err != nil {
			return err
		}
		if err := t.setArgs(fs.Args()); err != nil {
			return err
		}
		seed, err := readSeed(o, "template", t.seedFile)
		if err != nil {
			return err
		}
		popts, err := o.PinOptions(log)
		if err != nil {
			return &cli.UsageError{Err: err}
		}
		name := t.render.ReleaseName
		if name == "" {
			name = helmaction.DefaultReleaseName
		}
		gen := detgen.New(seed, detgen.Release{Name: name, Namespace: t.render.Settings.Namespace()}, time.Now)
		if kc := keyCache(ctx, popts, log); kc != nil {
			gen.SetKeyCache(kc)
		}
		popts.Generated = func() *pin.Generated { return generatedReport(gen) }
		p, err := pin.New(popts)
		if err != nil {
			return &cli.UsageError{Err: o.LibraryError(err)}
		}
		t.render.Funcs = gen.Funcs()
		t.render.Rewrite = detgen.Rewrite
		// Helm logs the errors it returns: they wait for the outcome, so
		// that a failure is one line (as for install and upgrade).
		hlog := &heldErrors{w: helmLog{log}}
		t.render.Log = hlog
		render := t.renderer(log, hlog, gen)
		return o.PinStream(ctx, p, render, stdout, log)
	}()
	if err != nil {
		log.Fail(err)
	}
	return err
}

// renderInputs are the files a command that renders a chart reads, which
// a lock file, report or log must not be written over: its seed file and
// its values files.
func renderInputs(o *cli.Options, seedFile string, valueFiles []string) []cli.NamedInput {
	inputs := []cli.NamedInput{{What: "the seed file of " + o.Name("seed-file"), Path: seedFile}}
	for _, v := range valueFiles {
		inputs = append(inputs, cli.NamedInput{What: "the values file " + v, Path: v})
	}
	return inputs
}

// setArgs takes the release name and chart from args, and refuses what a
// deterministic render cannot do: DNS lookups, and values on stdin that
// would never end (cli.StdinStops).
func (t *templateOptions) setArgs(args []string) error {
	if err := t.render.SetArgs(args); err != nil {
		return &cli.UsageError{Err: fmt.Errorf("%w (usage: digestpin template [NAME] CHART --seed-file FILE [flags])", err)}
	}
	if t.render.EnableDNS {
		// Every answer of getHostByName could differ from the last; a
		// deterministic render does without them, as helm template does
		// by default.
		return &cli.UsageError{Err: errors.New("--enable-dns: digestpin template renders without DNS lookups (getHostByName gives \"\", as helm template does without the flag)")}
	}
	if t.render.ReadsStdin() {
		return cli.StdinStops(os.Stdin, "values", "a values file")
	}
	return nil
}

// renderer returns the render of t's chart with gen's functions, for
// pinStream: Helm's held errors flushed to log once it succeeds, and the
// generators' warnings said.
func (t *templateOptions) renderer(log *cli.Logger, hlog *heldErrors, gen *detgen.Generator) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		// Helm's engine does not stop a template that runs long when
		// ctx ends, so the render runs on its own goroutine, which is
		// left behind by a process about to exit (as o.read's is).
		type result struct {
			b   []byte
			err error
		}
		done := make(chan result, 1)
		go func() {
			b, err := helmaction.Template(ctx, t.render)
			done <- result{b, err}
		}()
		var r result
		select {
		case r = <-done:
		case <-ctx.Done():
			return nil, fmt.Errorf("rendering chart %s: %w", t.render.Chart, ctx.Err())
		}
		if r.err != nil {
			msg := oneLine(r.err)
			if pw := t.render.ChartPath.Password; pw != "" {
				msg = strings.ReplaceAll(msg, pw, "[REDACTED]")
			}
			return nil, fmt.Errorf("rendering chart %s: %s", t.render.Chart, msg)
		}
		hlog.flush()
		warnGenerated(log, gen)
		return r.b, nil
	}
}

// flags are the flags of digestpin template: Helm's onto t, the pinning
// flags onto o (renderFlags); docs/reference.md is written from them.
func (t *templateOptions) flags(o *cli.Options) (fs, helmFS, pinFS *pflag.FlagSet) {
	helmFS = pflag.NewFlagSet("helm", pflag.ContinueOnError)
	helmFS.SortFlags = false
	t.render.Bind(helmFS)
	fs, pinFS = renderFlags("template", o, helmFS, cli.TemplateRenames, &t.seedFile)
	return fs, helmFS, pinFS
}

// renderFlags are the flags of a command that renders a chart (template,
// install, upgrade): Helm's, bound on helmFS already, then the pinning
// flags under renames and --seed-file, on pinFS; fs parses both.
func renderFlags(command string, o *cli.Options, helmFS *pflag.FlagSet, renames map[string]string, seedFile *string) (fs, pinFS *pflag.FlagSet) {
	pinFS = pflag.NewFlagSet("pinning", pflag.ContinueOnError)
	pinFS.SortFlags = false
	cli.BindPinning(o, pinFS, renames)
	pinFS.StringVar(seedFile, "seed-file", "", "derive every generated value (passwords, keys, certificates) from the seed in `FILE` (make one with: digestpin seed > FILE)")
	fs = pflag.NewFlagSet("digestpin "+command, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	fs.AddFlagSet(helmFS)
	fs.AddFlagSet(pinFS)
	return fs, pinFS
}

// helmLog carries Helm's own messages to the log, each line a warning.
type helmLog struct{ log *cli.Logger }

func (h helmLog) Write(p []byte) (int, error) {
	for l := range strings.SplitSeq(strings.TrimRight(string(p), "\n"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			h.log.Printf("helm: ", "%s", l)
		}
	}
	return len(p), nil
}

// oneLine is err's message on one line: Helm's template errors span
// several (the template, the call, the cause), and name the located
// generator functions digestpin put in by their own names.
func oneLine(err error) string {
	var parts []string
	for l := range strings.SplitSeq(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return detgen.CleanMessage(strings.Join(parts, ": "))
}

// where says where a generator call is: the template file rendered and,
// when the call is written in another (a named template, a tpl string),
// that one, with the line.
func where(file, enclosing string, line int) string {
	switch {
	case enclosing == "" || enclosing == file:
		if line > 0 {
			return fmt.Sprintf("%s:%d", file, line)
		}
		return file
	case line > 0:
		return fmt.Sprintf("%s (in %s, line %d)", file, enclosing, line)
	default:
		return fmt.Sprintf("%s (in %s)", file, enclosing)
	}
}

// warnGenerated names, one line each, every use of something that still
// varies from one render to the next and every call whose value follows
// the order it runs in, and says when each generated certificate is
// re-issued.
func warnGenerated(log *cli.Logger, gen *detgen.Generator) {
	for _, u := range gen.Varying() {
		detail := ""
		if u.Detail != "" {
			detail = " (" + u.Detail + ")"
		}
		log.Warnf("%s: %s varies from one render to the next, and so does the manifest%s", where(u.Template, u.Enclosing, u.Line), u.Function, detail)
	}
	for _, u := range gen.Ordered() {
		log.Warnf("%s: %s", where(u.Template, u.Enclosing, u.Line), u.Detail)
	}
	certs := gen.Certificates()
	if len(certs) > 0 {
		next := certs[0]
		for _, c := range certs[1:] {
			if c.ReissueAt.Before(next.ReissueAt) {
				next = c
			}
		}
		what := fmt.Sprintf("%d generated certificates stay the same until their re-issue; the next", len(certs))
		if len(certs) == 1 {
			what = "1 generated certificate stays the same until its re-issue; it"
		}
		log.Warnf("%s, %s %q in %s, is re-issued from %s, and pods that hash it restart once (-v lists each)",
			what, next.Function, next.CommonName, where(next.Template, next.Enclosing, next.Line), next.ReissueAt.UTC().Format(time.RFC3339))
	}
	warnKeyCache(log, gen)
	for _, c := range certs {
		log.Debugf("%s: %s certificate %q valid %s to %s, re-issued from %s", where(c.Template, c.Enclosing, c.Line), c.Function, c.CommonName,
			c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339), c.ReissueAt.UTC().Format(time.RFC3339))
	}
}

// generatedReport is the report's account of what gen generated.
func generatedReport(gen *detgen.Generator) *pin.Generated {
	g := &pin.Generated{}
	for _, c := range gen.Certificates() {
		g.Certificates = append(g.Certificates, pin.GeneratedCertificate{
			Template: where(c.Template, c.Enclosing, c.Line), Function: c.Function, CommonName: c.CommonName,
			NotBefore: c.NotBefore.UTC(), NotAfter: c.NotAfter.UTC(), ReissueAt: c.ReissueAt.UTC(),
		})
	}
	for _, u := range gen.Varying() {
		g.Varying = append(g.Varying, pin.GeneratedUse{Template: where(u.Template, u.Enclosing, u.Line), Function: u.Function})
	}
	for _, u := range gen.Ordered() {
		g.Ordered = append(g.Ordered, pin.GeneratedUse{Template: where(u.Template, u.Enclosing, u.Line), Function: u.Function})
	}
	if len(g.Certificates) == 0 && len(g.Varying) == 0 && len(g.Ordered) == 0 {
		return nil
	}
	return g
}

// templateUsage is digestpin template --help.
func templateUsage(w io.Writer, helmFS, pinFS *pflag.FlagSet) {
	fmt.Fprintf(w, `digestpin template renders a Helm chart with Helm 4's engine, as helm template
does, with every generator function (randAlphaNum, genCA, htpasswd, ...) made
deterministic: each value derives from the secret seed, the release and the
call, so the same seed, chart and values give the same bytes, and any change
of a generator's input gives a new value. It then pins every image as
digestpin does, and writes the manifests to stdout.

Usage:
  digestpin template [NAME] CHART --seed-file FILE [flags]
  digestpin seed > FILE

Helm flags (helm template's, same meaning):
%s
Pinning flags (digestpin's; --ca-file is --registry-ca-file here):
%s
Every pinning flag can also be set as DIGESTPIN_<FLAG>; HELM_* variables set
Helm's (HELM_NAMESPACE, HELM_REGISTRY_CONFIG, ...); flags win.
`, helmFS.FlagUsages(), cli.GroupedUsages(pinFS))
}

// readSeed reads the seed of digestpin cmd (template, install, upgrade)
// from --seed-file or DIGESTPIN_SEED_FILE; none, or a file that is not a
// good seed, is a usage error that names the flag or variable.
func readSeed(o *cli.Options, cmd, file string) (detgen.Seed, error) {
	if file == "" {
		return detgen.Seed{}, &cli.UsageError{Err: fmt.Errorf("digestpin %s needs a seed: --seed-file FILE or DIGESTPIN_SEED_FILE (make one with: digestpin seed > FILE)", cmd)}
	}
	seed, err := detgen.ReadSeedFile(file)
	if err != nil {
		return detgen.Seed{}, &cli.UsageError{Err: fmt.Errorf("%s: %w", o.Name("seed-file"), err)}
	}
	return seed, nil
}
