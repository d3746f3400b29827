package helmaction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/cli/output"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/kube"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	"helm.sh/helm/v4/pkg/postrenderer"
	ri "helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"sigs.k8s.io/yaml"
)

// defaultTimeout is Helm's default --timeout of install and upgrade.
const defaultTimeout = 5 * time.Minute

// statusComputeWorkers is what the Helm CLI gives its waits
// (kube.WithStatusComputeWorkers), where the SDK's default is none.
const statusComputeWorkers = 8

// Deploy are the flags helm install and helm upgrade share, with Helm's
// names, defaults and meaning.
type Deploy struct {
	// CreateNamespace is --create-namespace (for upgrade: when it
	// installs).
	CreateNamespace bool
	// ForceReplace is --force-replace (and the deprecated --force).
	ForceReplace bool
	// ForceConflicts is --force-conflicts; it excludes ForceReplace.
	ForceConflicts           bool
	NoHooks                  bool // --no-hooks
	DisableOpenAPIValidation bool // --disable-openapi-validation
	SkipCRDs                 bool // --skip-crds
	// Timeout is Helm's --timeout: how long any one Kubernetes operation
	// (a hook's Job, --wait) may take. Bind makes it 5m, Helm's default.
	Timeout time.Duration
	// Wait is --wait: kube.HookOnlyStrategy (Bind's default),
	// StatusWatcherStrategy (--wait alone) or LegacyStrategy.
	Wait        kube.WaitStrategy
	WaitForJobs bool // --wait-for-jobs
	// RollbackOnFailure is --rollback-on-failure (and the deprecated
	// --atomic).
	RollbackOnFailure bool
	SubNotes          bool              // --render-subchart-notes
	HideNotes         bool              // --hide-notes
	HideSecret        bool              // --hide-secret, with DryRun only
	TakeOwnership     bool              // --take-ownership
	Description       string            // --description
	Labels            map[string]string // -l/--labels
	// DryRun is --dry-run: action.DryRunNone (Bind's default and "": do
	// it), DryRunClient (no cluster at all; the manifests are printed) or
	// DryRunServer.
	DryRun action.DryRunStrategy
	// Output is -o/--output: output.Table (Bind's default), JSON or YAML.
	Output output.Format
	// PostRenderer, when not nil, gets the rendered manifests and hooks
	// (Helm 4 hands it both, each document annotated with its template's
	// file) before Helm installs them.
	PostRenderer postrenderer.PostRenderer

	warnings []string
}

// warn records a warning of the command line.
func (d *Deploy) warn(msg string) { d.warnings = append(d.warnings, msg) }

// Warnings returns the warnings Helm gives for the legacy flags of the
// command line (--force, --atomic, --wait=true, --dry-run alone), in the
// order they were given.
func (d *Deploy) Warnings() []string { return d.warnings }

// dryRun is DryRun, with "" as action.DryRunNone.
func (d *Deploy) dryRun() action.DryRunStrategy {
	if d.DryRun == "" {
		return action.DryRunNone
	}
	return d.DryRun
}

// IsDryRun reports whether the command only simulates (--dry-run=client
// or server).
func (d *Deploy) IsDryRun() bool { return d.dryRun() != action.DryRunNone }

// UsesCluster reports whether the command talks to the Kubernetes
// cluster: always, but with --dry-run=client. Only then does Helm's lookup
// read the cluster; with --dry-run=client it finds nothing.
func (d *Deploy) UsesCluster() bool { return d.dryRun() != action.DryRunClient }

// Check refuses flags that exclude each other; Install and Upgrade check
// too.
func (d *Deploy) Check() error {
	if d.ForceReplace && d.ForceConflicts {
		return errors.New("--force-replace (or --force) and --force-conflicts exclude each other")
	}
	return nil
}

// waitOptions are the options the Helm CLI waits with.
func waitOptions() []kube.WaitOption {
	return []kube.WaitOption{kube.WithStatusComputeWorkers(statusComputeWorkers)}
}

// InstallOptions are one helm install: its arguments and flags, and the
// caller's template functions and post-renderer.
type InstallOptions struct {
	Source
	Deploy

	// ServerSideApply is --server-side; Bind makes it true, Helm's
	// default.
	ServerSideApply bool
	// Replace is --replace: reuse the name of a release that was
	// uninstalled or failed.
	Replace bool
	// GenerateName (-g) and NameTemplate (--name-template) make the
	// release's name, for SetArgs, when none is given.
	GenerateName bool
	NameTemplate string
}

// Bind defines helm install's flags (Helm 4.3.1, with their names,
// defaults and meaning) on fs, writing into o, but for --post-renderer
// and --post-renderer-args: the post-renderer is the caller's. Settings,
// when nil, becomes cli.New() and gets the global flags.
func (o *InstallOptions) Bind(fs *pflag.FlagSet) {
	o.bindSettings(fs)
	o.bindDeploy(fs, "install")
	fs.BoolVar(&o.ServerSideApply, "server-side", true, "object updates run in the server instead of the client")
	fs.BoolVar(&o.Replace, "replace", false, "reuse the given name, only if that name is a deleted release which remains in the history. This is unsafe in production")
	fs.BoolVarP(&o.GenerateName, "generate-name", "g", false, "generate the name (and omit the NAME parameter)")
	fs.StringVar(&o.NameTemplate, "name-template", "", "specify template used to name the release")
	o.bindRender(fs)
	bindValues(fs, &o.Values)
	bindChartPath(fs, &o.ChartPath)
}

// SetArgs takes helm install's arguments, [NAME] CHART, and names the
// release as Helm does: NAME, else from NameTemplate, else with
// GenerateName from the chart's name and the time.
func (o *InstallOptions) SetArgs(args []string) error {
	if len(args) == 0 {
		return errors.New("want [NAME] CHART, got no arguments")
	}
	// Helm's own naming; the configuration is not used.
	c := action.NewInstall(action.NewConfiguration())
	c.GenerateName, c.NameTemplate = o.GenerateName, o.NameTemplate
	name, ch, err := c.NameAndChart(args)
	if err != nil {
		return err
	}
	o.ReleaseName, o.Chart = name, ch
	return nil
}

// Install installs the chart as helm install does, with cfg: the caller
// initialises it (NewConfiguration for Helm's CLI settings), and Install
// sets its CustomTemplateFuncs to Funcs. It returns the release Helm
// recorded, or with --dry-run the one it would; on error, the release when
// Helm returned one, which says how far it got. With Rewrite, the release
// records the chart's own template sources, not the rewritten ones, when
// there is a PostRenderer (otherwise the rewritten ones).
func Install(ctx context.Context, cfg *action.Configuration, o InstallOptions) (*release.Release, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	settings := o.settings()
	client := action.NewInstall(cfg)
	client.ChartPathOptions = o.ChartPath
	client.CreateNamespace = o.CreateNamespace
	client.ForceReplace = o.ForceReplace
	client.ForceConflicts = o.ForceConflicts
	client.ServerSideApply = o.ServerSideApply
	client.DryRunStrategy = o.dryRun()
	client.HideSecret = o.HideSecret
	client.DisableHooks = o.NoHooks
	client.Replace = o.Replace
	client.WaitStrategy = o.Wait
	client.WaitOptions = append(client.WaitOptions, waitOptions()...)
	client.WaitForJobs = o.WaitForJobs
	client.Devel = o.Devel
	client.DependencyUpdate = o.DependencyUpdate
	client.Timeout = o.Timeout
	client.ReleaseName = o.ReleaseName
	client.Description = o.Description
	client.RollbackOnFailure = o.RollbackOnFailure
	client.SkipCRDs = o.SkipCRDs
	client.SubNotes = o.SubNotes
	client.HideNotes = o.HideNotes
	client.SkipSchemaValidation = o.SkipSchemaValidation
	client.DisableOpenAPIValidation = o.DisableOpenAPIValidation
	client.Labels = o.Labels
	client.EnableDNS = o.EnableDNS
	client.TakeOwnership = o.TakeOwnership

	rc, err := registryClient(settings, o.ChartPath, o.logWriter())
	if err != nil {
		return nil, err
	}
	client.SetRegistryClient(rc)
	ch, vals, restore, err := o.load(&client.ChartPathOptions, rc, cfg.Logger())
	if err != nil {
		return nil, err
	}
	client.Namespace = settings.Namespace()
	client.PostRenderer = restoring(o.PostRenderer, restore)
	cfg.CustomTemplateFuncs = o.Funcs

	r, err := client.RunWithContext(ctx, ch, vals)
	rel, cerr := v1Release(r)
	if cerr != nil && err == nil {
		err = cerr
	}
	return rel, err
}

// UpgradeOptions are one helm upgrade: its arguments and flags, and the
// caller's template functions and post-renderer.
type UpgradeOptions struct {
	Source
	Deploy

	// Install is -i/--install: install the release when there is none
	// of the name (or it was uninstalled).
	Install bool
	// ServerSideApply is --server-side: "true", "false" or "auto" (Bind's
	// default: the previous release's method).
	ServerSideApply      string
	ResetValues          bool // --reset-values
	ReuseValues          bool // --reuse-values
	ResetThenReuseValues bool // --reset-then-reuse-values
	// MaxHistory is --history-max; Bind makes it HELM_MAX_HISTORY, else
	// 10; 0 keeps every revision.
	MaxHistory    int
	CleanupOnFail bool // --cleanup-on-fail
}

// Bind defines helm upgrade's flags (Helm 4.3.1, with their names,
// defaults and meaning) on fs, writing into o, but for --post-renderer
// and --post-renderer-args: the post-renderer is the caller's. Settings,
// when nil, becomes cli.New() and gets the global flags.
func (o *UpgradeOptions) Bind(fs *pflag.FlagSet) {
	o.bindSettings(fs)
	fs.BoolVarP(&o.Install, "install", "i", false, "if a release by this name doesn't already exist, run an install")
	o.bindDeploy(fs, "upgrade")
	fs.StringVar(&o.ServerSideApply, "server-side", "auto", `must be "true", "false" or "auto". Object updates run in the server instead of the client ("auto" defaults the value from the previous chart release's method)`)
	fs.BoolVar(&o.ResetValues, "reset-values", false, "when upgrading, reset the values to the ones built into the chart")
	fs.BoolVar(&o.ReuseValues, "reuse-values", false, "when upgrading, reuse the last release's values and merge in any overrides from the command line via --set and -f. If '--reset-values' is specified, this is ignored")
	fs.BoolVar(&o.ResetThenReuseValues, "reset-then-reuse-values", false, "when upgrading, reset the values to the ones built into the chart, apply the last release's values and merge in any overrides from the command line via --set and -f. If '--reset-values' or '--reuse-values' is specified, this is ignored")
	fs.IntVar(&o.MaxHistory, "history-max", o.Settings.MaxHistory, "limit the maximum number of revisions saved per release. Use 0 for no limit")
	fs.BoolVar(&o.CleanupOnFail, "cleanup-on-fail", false, "allow deletion of new resources created in this upgrade when upgrade fails")
	o.bindRender(fs)
	bindValues(fs, &o.Values)
	bindChartPath(fs, &o.ChartPath)
}

// SetArgs takes helm upgrade's arguments: RELEASE CHART.
func (o *UpgradeOptions) SetArgs(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("want RELEASE CHART, got %d arguments", len(args))
	}
	o.ReleaseName, o.Chart = args[0], args[1]
	return nil
}

// Upgrade upgrades the release as helm upgrade does, with cfg (see
// Install), and returns the release Helm recorded, or with --dry-run the
// one it would. With Install, a release that does not exist (or was
// uninstalled) is installed instead, as helm upgrade --install does, and
// installed says so. On error, the release when Helm returned one.
func Upgrade(ctx context.Context, cfg *action.Configuration, o UpgradeOptions) (rel *release.Release, installed bool, err error) {
	if err := o.Check(); err != nil {
		return nil, false, err
	}
	settings := o.settings()
	if o.ServerSideApply != "true" && o.ServerSideApply != "false" && o.ServerSideApply != "auto" {
		return nil, false, fmt.Errorf(`invalid --server-side %q: want "true", "false" or "auto"`, o.ServerSideApply)
	}
	if o.Install {
		// As Helm's CLI: look at the history first.
		h := action.NewHistory(cfg)
		h.Max = 1
		versions, err := h.Run(o.ReleaseName)
		uninstalled := isUninstalled(versions)
		switch {
		case errors.Is(err, driver.ErrReleaseNotFound) || uninstalled:
			inst := InstallOptions{Source: o.Source, Deploy: o.Deploy, ServerSideApply: o.ServerSideApply != "false", Replace: uninstalled}
			rel, err := Install(ctx, cfg, inst)
			return rel, true, err
		case err != nil:
			return nil, false, err
		}
	}

	client := action.NewUpgrade(cfg)
	client.ChartPathOptions = o.ChartPath
	client.Install = o.Install
	client.Devel = o.Devel
	client.Namespace = settings.Namespace()
	client.HideSecret = o.HideSecret
	client.ForceReplace = o.ForceReplace
	client.ForceConflicts = o.ForceConflicts
	client.ServerSideApply = o.ServerSideApply
	client.DisableHooks = o.NoHooks
	client.DisableOpenAPIValidation = o.DisableOpenAPIValidation
	client.SkipCRDs = o.SkipCRDs
	client.Timeout = o.Timeout
	client.ResetValues = o.ResetValues
	client.ReuseValues = o.ReuseValues
	client.ResetThenReuseValues = o.ResetThenReuseValues
	client.WaitStrategy = o.Wait
	client.WaitOptions = append(client.WaitOptions, waitOptions()...)
	client.WaitForJobs = o.WaitForJobs
	client.RollbackOnFailure = o.RollbackOnFailure
	client.MaxHistory = o.MaxHistory
	client.CleanupOnFail = o.CleanupOnFail
	client.SubNotes = o.SubNotes
	client.HideNotes = o.HideNotes
	client.SkipSchemaValidation = o.SkipSchemaValidation
	client.Labels = o.Labels
	client.Description = o.Description
	client.DependencyUpdate = o.DependencyUpdate
	client.EnableDNS = o.EnableDNS
	client.TakeOwnership = o.TakeOwnership
	client.DryRunStrategy = o.dryRun()

	rc, err := registryClient(settings, o.ChartPath, o.logWriter())
	if err != nil {
		return nil, false, err
	}
	client.SetRegistryClient(rc)
	ch, vals, restore, err := o.load(&client.ChartPathOptions, rc, cfg.Logger())
	if err != nil {
		return nil, false, err
	}
	client.PostRenderer = restoring(o.PostRenderer, restore)
	cfg.CustomTemplateFuncs = o.Funcs

	r, err := client.RunWithContext(ctx, o.ReleaseName, ch, vals)
	rel, cerr := v1Release(r)
	if cerr != nil && err == nil {
		err = cerr
	}
	return rel, false, err
}

// isUninstalled reports whether the last of versions was uninstalled
// (with --keep-history).
func isUninstalled(versions []ri.Releaser) bool {
	if len(versions) == 0 {
		return false
	}
	rel, err := v1Release(versions[len(versions)-1])
	return err == nil && rel != nil && rel.Info != nil && rel.Info.Status == rcommon.StatusUninstalled
}

// v1Release is r as a chart v2 release; nil for nil.
func v1Release(r ri.Releaser) (*release.Release, error) {
	switch rel := r.(type) {
	case nil:
		return nil, nil
	case *release.Release:
		return rel, nil
	case release.Release:
		return &rel, nil
	}
	return nil, fmt.Errorf("helm returned a release of type %T", r)
}

// restoring wraps pr so that restore runs before it: Helm calls the
// post-renderer once, after the engine rendered every template and before
// it records the release, whose chart is the one rendered. Without pr or
// restore, it is pr.
func restoring(pr postrenderer.PostRenderer, restore func()) postrenderer.PostRenderer {
	if pr == nil || restore == nil {
		return pr
	}
	return &restorer{next: pr, restore: restore}
}

// restorer puts the chart's template sources back, then post-renders.
type restorer struct {
	next    postrenderer.PostRenderer
	restore func()
	once    sync.Once
}

func (r *restorer) Run(b *bytes.Buffer) (*bytes.Buffer, error) {
	r.once.Do(r.restore)
	return r.next.Run(b)
}

// NewConfiguration returns the action configuration that Helm's CLI
// makes from settings for install and upgrade, with Helm's messages to
// log (nil: discarded), its debug lines with settings.Debug: the cluster
// of settings (kubeconfig, context, namespace, ...) and releases stored by
// driver (HELM_DRIVER): "secret" (the default, also ""), "configmap",
// "sql" (HELM_DRIVER_SQL_CONNECTION_STRING), or "memory". As Helm's CLI,
// "memory" starts with the releases of the YAML files memoryData
// (HELM_MEMORY_DRIVER_DATA) lists, colon-separated, and a Kubernetes
// client that changes nothing; it still reads the cluster's version
// unless the command runs with --dry-run=client.
func NewConfiguration(settings *cli.EnvSettings, driverName, memoryData string, log io.Writer) (*action.Configuration, error) {
	if log == nil {
		log = io.Discard
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(NewLogger(log, settings.Debug).Handler()))
	if err := cfg.Init(settings.RESTClientGetter(), settings.Namespace(), driverName); err != nil {
		return nil, fmt.Errorf("HELM_DRIVER %q: %w", driverName, err)
	}
	cfg.SetHookOutputFunc(func(_, _, _ string) io.Writer { return log })
	if driverName != "memory" {
		return cfg, nil
	}
	mem, ok := cfg.Releases.Driver.(*driver.Memory)
	if !ok {
		return nil, fmt.Errorf("HELM_DRIVER memory: Helm made a %T", cfg.Releases.Driver)
	}
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	for _, p := range filepath.SplitList(memoryData) {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading HELM_MEMORY_DRIVER_DATA: %w", err)
		}
		var releases []*release.Release
		if err := yaml.Unmarshal(b, &releases); err != nil {
			return nil, fmt.Errorf("reading HELM_MEMORY_DRIVER_DATA %s: %w", p, err)
		}
		for _, r := range releases {
			if err := cfg.Releases.Create(r); err != nil {
				return nil, fmt.Errorf("reading HELM_MEMORY_DRIVER_DATA %s: %w", p, err)
			}
		}
	}
	// Create stored each release under its own namespace.
	mem.SetNamespace(settings.Namespace())
	return cfg, nil
}

// NewLogger returns a logger of Helm's messages to w: warnings and errors,
// and with debug the debug and information lines too, each record written
// in one Write, as Helm's CLI writes them (slog's text format without the
// time).
func NewLogger(w io.Writer, debug bool) *slog.Logger {
	level := slog.LevelWarn
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// ClusterLookup returns Helm's lookup function on the cluster of cfg, as
// helm install and upgrade render with it, for a caller that replaces
// lookup in Funcs; nil when cfg has no cluster (no RESTClientGetter). It
// reads the cluster's configuration at its first call, so that a command
// that never calls it never needs one. Use it only when the command
// UsesCluster: Helm's lookup finds nothing with --dry-run=client.
func ClusterLookup(cfg *action.Configuration) func(apiVersion, kind, namespace, name string) (map[string]any, error) {
	getter := cfg.RESTClientGetter
	if getter == nil {
		return nil
	}
	var (
		once   sync.Once
		lookup func(apiVersion, kind, namespace, name string) (map[string]any, error)
		lerr   error
	)
	return func(apiVersion, kind, namespace, name string) (map[string]any, error) {
		once.Do(func() {
			rc, err := getter.ToRESTConfig()
			if err != nil {
				lerr = fmt.Errorf("lookup: reading the cluster's configuration: %w", err)
				return
			}
			lookup = engine.NewLookupFunction(rc)
		})
		if lerr != nil {
			return nil, lerr
		}
		return lookup(apiVersion, kind, namespace, name)
	}
}
