// Package helmaction runs Helm 4's template, install and upgrade in-process,
// as `helm template`, `helm install` and `helm upgrade` do, with their
// flags (Bind), template functions the caller replaces and template
// sources the caller may rewrite first. digestpin template, install and
// upgrade use it with the deterministic generators of package detgen and
// digestpin's pinning post-renderer. It never touches a registry of
// images itself; Install and Upgrade reach the Kubernetes cluster of the
// action.Configuration they are given, Template none.
//
// Template's output is the stream `helm template` prints for the same
// chart, values and flags (Helm 4.3.1): the release manifest, then the
// hooks, each with its `# Source:` comment, and with ShowOnly the chosen
// templates in Helm's order. WriteStatus prints a release as helm install
// and helm upgrade do.
package helmaction

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/spf13/pflag"
	"helm.sh/helm/v4/pkg/action"
	ci "helm.sh/helm/v4/pkg/chart"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/registry"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

// DefaultReleaseName is the release name helm template uses when none is
// given.
const DefaultReleaseName = "release-name"

// Source is what helm template, install and upgrade share: the release's
// name, the chart and where it comes from, its values, Helm's environment,
// and the caller's template functions and source rewriting.
type Source struct {
	// ReleaseName is the release's name; for Template, "" means
	// DefaultReleaseName.
	ReleaseName string
	// Chart is the chart reference: a folder, a .tgz, repo/name, a URL,
	// an oci:// reference, or a name in ChartPath.RepoURL.
	Chart string
	// Settings are Helm's environment (HELM_* variables, namespace,
	// cluster, repository and registry configuration); nil means
	// cli.New().
	Settings *cli.EnvSettings
	// ChartPath locates the chart: version, repository and its
	// credentials, TLS files, verification.
	ChartPath action.ChartPathOptions
	// Values are -f/--values, --set, --set-string, --set-file,
	// --set-json and --set-literal.
	Values values.Options

	DependencyUpdate     bool // --dependency-update
	Devel                bool // --devel
	SkipSchemaValidation bool // --skip-schema-validation
	EnableDNS            bool // --enable-dns

	// Funcs replace or add template functions (Helm's
	// action.Configuration.CustomTemplateFuncs).
	Funcs template.FuncMap
	// Rewrite, when set, gets the source of every template of the chart
	// and its subcharts, under the name Helm renders it by (e.g.
	// "mychart/templates/secret.yaml"), before rendering, and returns the
	// source to render.
	Rewrite func(name, src string) (string, error)
	// Loaded, when set, gets the chart once it is loaded, before Rewrite
	// and the render, and may change it: Flux's HelmChart valuesFiles
	// replace the chart's default values (Chart.Values) so.
	Loaded func(ch *chart.Chart) error

	// Log receives Helm's own messages (warnings and, with
	// Settings.Debug, debug lines); nil discards them.
	Log io.Writer
}

// Options are one render as helm template does it: helm template's
// arguments and flags, and the caller's template functions.
type Options struct {
	Source

	// KubeVersion is --kube-version, "" for Helm's default.
	KubeVersion string
	// APIVersions are --api-versions.
	APIVersions []string
	IncludeCRDs bool // --include-crds
	SkipCRDs    bool // --skip-crds
	SkipTests   bool // --skip-tests
	NoHooks     bool // --no-hooks
	IsUpgrade   bool // --is-upgrade
	// ShowOnly are --show-only: template paths or globs in the chart.
	ShowOnly []string

	// dryRun is --dry-run, which may only be "client".
	dryRun string
}

// Bind defines helm template's flags (Helm 4.3.1, with their names,
// defaults and meaning) on fs, writing into o; Settings, when nil, becomes
// cli.New() and gets the global flags (-n, --kube-context, --debug,
// --registry-config, ...). Flags that matter to an install only are
// accepted and hidden, as helm template accepts them.
func (o *Options) Bind(fs *pflag.FlagSet) {
	r := o
	o.bindSettings(fs)

	// helm template's own flags.
	bindValues(fs, &r.Values)
	bindChartPath(fs, &r.ChartPath)
	fs.StringArrayVarP(&r.ShowOnly, "show-only", "s", nil, "only show manifests rendered from the given templates")
	fs.BoolVar(&r.IncludeCRDs, "include-crds", false, "include CRDs in the templated output")
	fs.BoolVar(&r.SkipCRDs, "skip-crds", false, "if set, no CRDs will be installed")
	fs.BoolVar(&r.SkipTests, "skip-tests", false, "skip tests from templated output")
	fs.BoolVar(&r.NoHooks, "no-hooks", false, "prevent hooks from running during install")
	fs.BoolVar(&r.IsUpgrade, "is-upgrade", false, "set .Release.IsUpgrade instead of .Release.IsInstall")
	fs.StringVar(&r.KubeVersion, "kube-version", "", "Kubernetes version used for Capabilities.KubeVersion")
	fs.StringSliceVarP(&r.APIVersions, "api-versions", "a", nil, "Kubernetes api versions used for Capabilities.APIVersions (multiple can be specified)")
	o.bindRender(fs)
	fs.StringVar(&o.dryRun, "dry-run", "client", `simulates the operation client-side ("client", the only one digestpin template does)`)
	fs.Lookup("dry-run").NoOptDefVal = "client"

	// Install flags helm template accepts and ignores.
	for _, b := range []string{"create-namespace", "force-replace", "force-conflicts", "server-side", "replace", "wait-for-jobs", "disable-openapi-validation", "rollback-on-failure", "atomic", "take-ownership", "hide-notes", "render-subchart-notes", "force"} {
		fs.Bool(b, b == "server-side", "accepted for helm template's sake; no effect on the output")
		_ = fs.MarkHidden(b)
	}
	for _, s := range []string{"description", "wait"} {
		fs.String(s, "", "accepted for helm template's sake; no effect on the output")
		_ = fs.MarkHidden(s)
	}
	fs.Lookup("wait").NoOptDefVal = "watcher"
	fs.StringToStringP("labels", "l", nil, "accepted for helm template's sake; no effect on the output")
	_ = fs.MarkHidden("labels")
}

// bindSettings makes Settings cli.New() when it is nil and defines Helm's
// global flags on fs.
func (s *Source) bindSettings(fs *pflag.FlagSet) {
	if s.Settings == nil {
		s.Settings = cli.New()
	}
	s.Settings.AddFlags(fs)
}

// bindRender defines the flags of how the chart is loaded and rendered
// that every command has.
func (s *Source) bindRender(fs *pflag.FlagSet) {
	fs.BoolVar(&s.DependencyUpdate, "dependency-update", false, "update dependencies if they are missing before installing the chart")
	fs.BoolVar(&s.Devel, "devel", false, "use development versions, too. Equivalent to version '>0.0.0-0'. If --version is set, this is ignored")
	fs.BoolVar(&s.SkipSchemaValidation, "skip-schema-validation", false, "if set, disables JSON schema validation")
	fs.BoolVar(&s.EnableDNS, "enable-dns", false, "enable DNS lookups when rendering templates")
}

// bindValues defines -f/--values and the --set flags on fs.
func bindValues(fs *pflag.FlagSet, v *values.Options) {
	fs.StringSliceVarP(&v.ValueFiles, "values", "f", nil, "specify values in a YAML file or a URL (can specify multiple)")
	fs.StringArrayVar(&v.Values, "set", nil, "set values on the command line (can specify multiple or separate values with commas: key1=val1,key2=val2)")
	fs.StringArrayVar(&v.StringValues, "set-string", nil, "set STRING values on the command line (can specify multiple or separate values with commas: key1=val1,key2=val2)")
	fs.StringArrayVar(&v.FileValues, "set-file", nil, "set values from respective files specified via the command line (can specify multiple or separate values with commas: key1=path1,key2=path2)")
	fs.StringArrayVar(&v.JSONValues, "set-json", nil, "set JSON values on the command line (can specify multiple or separate values with commas: key1=jsonval1,key2=jsonval2 or using json format: {\"key1\": jsonval1, \"key2\": \"jsonval2\"})")
	fs.StringArrayVar(&v.LiteralValues, "set-literal", nil, "set a literal STRING value on the command line")
}

// bindChartPath defines the flags that locate the chart on fs.
func bindChartPath(fs *pflag.FlagSet, c *action.ChartPathOptions) {
	fs.StringVar(&c.Version, "version", "", "specify a version constraint for the chart version to use (e.g. 1.1.1 or ^2.0.0); default: the latest")
	fs.BoolVar(&c.Verify, "verify", false, "verify the chart package before using it")
	fs.StringVar(&c.Keyring, "keyring", defaultKeyring(), "location of public keys used for verification")
	fs.StringVar(&c.RepoURL, "repo", "", "chart repository url where to locate the requested chart")
	fs.StringVar(&c.Username, "username", "", "chart repository username where to locate the requested chart")
	fs.StringVar(&c.Password, "password", "", "chart repository password where to locate the requested chart")
	fs.StringVar(&c.CertFile, "cert-file", "", "identify HTTPS client using this SSL certificate file")
	fs.StringVar(&c.KeyFile, "key-file", "", "identify HTTPS client using this SSL key file")
	fs.BoolVar(&c.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "skip tls certificate checks for the chart download")
	fs.BoolVar(&c.PlainHTTP, "plain-http", false, "use insecure HTTP connections for the chart download")
	fs.StringVar(&c.CaFile, "ca-file", "", "verify certificates of HTTPS-enabled chart servers using this CA bundle (for image registries: --registry-ca-file)")
	fs.BoolVar(&c.PassCredentialsAll, "pass-credentials", false, "pass credentials to all domains")
}

// defaultKeyring is Helm's default --keyring: ~/.gnupg/pubring.gpg.
func defaultKeyring() string {
	if v, ok := os.LookupEnv("GNUPGHOME"); ok {
		return v + "/pubring.gpg"
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return home + "/.gnupg/pubring.gpg"
}

// SetArgs takes helm template's arguments: [NAME] CHART.
func (o *Options) SetArgs(args []string) error {
	switch len(args) {
	case 1:
		o.Chart = args[0]
	case 2:
		o.ReleaseName, o.Chart = args[0], args[1]
	default:
		return fmt.Errorf("want [NAME] CHART, got %d arguments", len(args))
	}
	return nil
}

// Template renders the chart as `helm template` does and returns the
// stream it prints.
func Template(ctx context.Context, o Options) ([]byte, error) {
	if o.dryRun != "" && o.dryRun != "client" {
		return nil, fmt.Errorf("invalid --dry-run %q: only client-side rendering (--dry-run=client) is done here", o.dryRun)
	}
	settings := o.settings()
	logger := o.logger()

	cfg := action.NewConfiguration()
	cfg.SetLogger(logger.Handler())
	cfg.CustomTemplateFuncs = o.Funcs

	client := action.NewInstall(cfg)
	client.ChartPathOptions = o.ChartPath
	client.DryRunStrategy = action.DryRunClient
	client.Replace = true // helm template skips the name check
	client.IncludeCRDs = o.IncludeCRDs
	client.SkipCRDs = o.SkipCRDs
	client.DisableHooks = o.NoHooks
	client.IsUpgrade = o.IsUpgrade
	client.DependencyUpdate = o.DependencyUpdate
	client.Devel = o.Devel
	client.SkipSchemaValidation = o.SkipSchemaValidation
	client.EnableDNS = o.EnableDNS
	client.APIVersions = common.VersionSet(o.APIVersions)
	client.Namespace = settings.Namespace()
	client.ReleaseName = o.ReleaseName
	if client.ReleaseName == "" {
		client.ReleaseName = DefaultReleaseName
	}
	if o.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(o.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("--kube-version %q: %w", o.KubeVersion, err)
		}
		client.KubeVersion = kv
	}

	rc, err := registryClient(settings, o.ChartPath, o.logWriter())
	if err != nil {
		return nil, err
	}
	client.SetRegistryClient(rc)
	ch, vals, _, err := o.load(&client.ChartPathOptions, rc, logger)
	if err != nil {
		return nil, err
	}

	ri, err := client.RunWithContext(ctx, ch, vals)
	if err != nil {
		return nil, err
	}
	rel, ok := ri.(*release.Release)
	if !ok || rel == nil {
		return nil, fmt.Errorf("rendering chart %s: Helm returned a release of type %T", o.Chart, ri)
	}
	return printRelease(rel, o)
}

// ReadsStdin reports whether a values flag names "-" (-f -, or
// --set-file key=-), which Helm reads from the process's stdin.
func (s *Source) ReadsStdin() bool {
	for _, f := range s.Values.ValueFiles {
		if strings.TrimSpace(f) == "-" {
			return true
		}
	}
	for _, kv := range s.Values.FileValues {
		for _, pair := range strings.Split(kv, ",") {
			if _, path, ok := strings.Cut(pair, "="); ok && strings.TrimSpace(path) == "-" {
				return true
			}
		}
	}
	return false
}

// settings is s.Settings, or cli.New() when it is nil.
func (s *Source) settings() *cli.EnvSettings {
	if s.Settings == nil {
		s.Settings = cli.New()
	}
	return s.Settings
}

// logWriter is s.Log, or io.Discard when it is nil.
func (s *Source) logWriter() io.Writer {
	if s.Log == nil {
		return io.Discard
	}
	return s.Log
}

// logger writes Helm's warnings (and with --debug its debug lines) to Log.
func (s *Source) logger() *slog.Logger { return NewLogger(s.logWriter(), s.settings().Debug) }

// load does what helm template, install and upgrade do before their
// action runs: it locates the chart through cp (an action's chart options,
// with its registry client rc), merges the values, loads the chart and,
// with DependencyUpdate, brings its missing dependencies; then it refuses a
// chart that is not installable and hands the templates to Rewrite. With
// Rewrite, restore puts the chart's own sources back (nil otherwise).
func (s *Source) load(cp *action.ChartPathOptions, rc *registry.Client, logger *slog.Logger) (ch *chart.Chart, vals map[string]any, restore func(), err error) {
	settings := s.settings()
	if cp.Version == "" && s.Devel {
		cp.Version = ">0.0.0-0"
	}
	chartPath, err := cp.LocateChart(s.Chart, settings)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("locating chart %s: %w", s.Chart, err)
	}
	getters := getter.All(settings)
	vals, err = s.Values.MergeValues(getters)
	if err != nil {
		return nil, nil, nil, err
	}
	ch, err = loadChart(chartPath, s.DependencyUpdate, cp.Keyring, rc, settings, getters, s.logWriter())
	if err != nil {
		return nil, nil, nil, err
	}
	// Helm's upgrade does not check the type: a library chart would
	// upgrade a release to an empty manifest. It is refused here for all.
	switch ch.Metadata.Type {
	case "", "application":
	default:
		return nil, nil, nil, fmt.Errorf("chart %s: %s charts are not installable", s.Chart, ch.Metadata.Type)
	}
	if ch.Metadata.Deprecated {
		logger.Warn("this chart is deprecated")
	}
	if s.Loaded != nil {
		if err := s.Loaded(ch); err != nil {
			return nil, nil, nil, err
		}
	}
	if s.Rewrite != nil {
		if restore, err = rewrite(ch, s.Rewrite); err != nil {
			return nil, nil, nil, err
		}
	}
	return ch, vals, restore, nil
}

// loadChart loads the chart at chartPath and, with update, brings its
// missing dependencies, as helm template, install and upgrade do.
func loadChart(chartPath string, update bool, keyring string, rc *registry.Client, settings *cli.EnvSettings, getters getter.Providers, out io.Writer) (*chart.Chart, error) {
	load := func() (*chart.Chart, ci.Accessor, error) {
		c, err := loader.Load(chartPath)
		if err != nil {
			return nil, nil, fmt.Errorf("loading chart %s: %w", chartPath, err)
		}
		ch, ok := c.(*chart.Chart)
		if !ok {
			return nil, nil, fmt.Errorf("loading chart %s: a chart of type %T is not supported; digestpin renders apiVersion v1 and v2 charts", chartPath, c)
		}
		ac, err := ci.NewAccessor(ch)
		if err != nil {
			return nil, nil, fmt.Errorf("loading chart %s: %w", chartPath, err)
		}
		return ch, ac, nil
	}
	ch, ac, err := load()
	if err != nil {
		return nil, err
	}
	reqs := ac.MetaDependencies()
	if len(reqs) == 0 {
		return ch, nil
	}
	if err := action.CheckDependencies(ch, reqs); err != nil {
		if !update {
			return nil, fmt.Errorf("an error occurred while checking for chart dependencies. You may need to run 'helm dependency build' to fetch missing dependencies: %w", err)
		}
		epoch, err := sourceDateEpoch()
		if err != nil {
			return nil, err
		}
		man := &downloader.Manager{
			Out:              out,
			ChartPath:        chartPath,
			Keyring:          keyring,
			Getters:          getters,
			RepositoryConfig: settings.RepositoryConfig,
			RepositoryCache:  settings.RepositoryCache,
			ContentCache:     settings.ContentCache,
			Debug:            settings.Debug,
			RegistryClient:   rc,
			SourceDateEpoch:  epoch,
		}
		if err := man.Update(); err != nil {
			return nil, fmt.Errorf("updating the dependencies of chart %s: %w", chartPath, err)
		}
		if ch, _, err = load(); err != nil {
			return nil, err
		}
	}
	return ch, nil
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH as a time, nil when it is not
// set; Helm dates the archives of updated dependencies with it.
func sourceDateEpoch() (*time.Time, error) {
	v, ok := os.LookupEnv("SOURCE_DATE_EPOCH")
	if !ok || v == "" {
		return nil, nil
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil || s < 0 {
		return nil, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds since 1970", v)
	}
	t := time.Unix(s, 0)
	return &t, nil
}

// rewrite hands every template of ch and of its subcharts to f, and
// returns the function that puts their sources back.
func rewrite(ch *chart.Chart, f func(name, src string) (string, error)) (restore func(), err error) {
	type saved struct {
		t    *common.File
		data []byte
	}
	var all []saved
	restore = func() {
		for _, s := range all {
			s.t.Data = s.data
		}
	}
	var walk func(ch *chart.Chart) error
	walk = func(ch *chart.Chart) error {
		for _, t := range ch.Templates {
			name := path.Join(ch.ChartFullPath(), t.Name)
			src, err := f(name, string(t.Data))
			if err != nil {
				return fmt.Errorf("reading template %s: %w", name, err)
			}
			all = append(all, saved{t, t.Data})
			t.Data = []byte(src)
		}
		for _, dep := range ch.Dependencies() {
			if err := walk(dep); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(ch); err != nil {
		restore()
		return nil, err
	}
	return restore, nil
}

// sourceRE finds the template path in a `# Source:` line, after the chart
// name, as helm template matches --show-only.
var sourceRE = regexp.MustCompile("# Source: [^/]+/(.+)")

// printRelease writes rel's manifest and hooks as helm template prints them.
func printRelease(rel *release.Release, o Options) ([]byte, error) {
	var all bytes.Buffer
	fmt.Fprintln(&all, strings.TrimSpace(rel.Manifest))
	if !o.NoHooks {
		for _, h := range rel.Hooks {
			if o.SkipTests && slices.Contains(h.Events, release.HookTest) {
				continue
			}
			fmt.Fprintf(&all, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
		}
	}
	if len(o.ShowOnly) == 0 {
		return all.Bytes(), nil
	}
	split := releaseutil.SplitManifests(all.String())
	keys := make([]string, 0, len(split))
	for k := range split {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var out bytes.Buffer
	for _, want := range o.ShowOnly {
		want = filepath.ToSlash(want)
		found := false
		for _, k := range keys {
			m := split[k]
			sm := sourceRE.FindStringSubmatch(m)
			if sm == nil {
				continue
			}
			if ok, _ := path.Match(want, sm[1]); !ok {
				continue
			}
			fmt.Fprintf(&out, "---\n%s\n", m)
			found = true
		}
		if !found {
			return nil, fmt.Errorf("could not find template %s in chart", want)
		}
	}
	return out.Bytes(), nil
}

// registryClient is the OCI registry client Helm uses for oci:// charts,
// with the chart options' TLS files and credentials.
func registryClient(settings *cli.EnvSettings, c action.ChartPathOptions, out io.Writer) (*registry.Client, error) {
	opts := []registry.ClientOption{
		registry.ClientOptDebug(settings.Debug),
		registry.ClientOptEnableCache(true),
		registry.ClientOptWriter(out),
		registry.ClientOptCredentialsFile(settings.RegistryConfig),
		registry.ClientOptBasicAuth(c.Username, c.Password),
	}
	switch {
	case c.CertFile != "" && c.KeyFile != "" || c.CaFile != "" || c.InsecureSkipTLSVerify:
		tc, err := tlsConfig(c)
		if err != nil {
			return nil, err
		}
		opts = append(opts, registry.ClientOptHTTPClient(&http.Client{
			Transport: &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment},
		}))
	case c.PlainHTTP:
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	rc, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("making the chart registry client: %w", err)
	}
	return rc, nil
}

// tlsConfig is the TLS configuration of --cert-file, --key-file, --ca-file
// and --insecure-skip-tls-verify.
func tlsConfig(c action.ChartPathOptions) (*tls.Config, error) {
	tc := &tls.Config{InsecureSkipVerify: c.InsecureSkipTLSVerify} //nolint:gosec // the user's --insecure-skip-tls-verify
	if c.CertFile != "" && c.KeyFile != "" {
		pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("reading --cert-file %s and --key-file %s: %w", c.CertFile, c.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	if c.CaFile != "" {
		pem, err := os.ReadFile(c.CaFile)
		if err != nil {
			return nil, fmt.Errorf("reading --ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("--ca-file " + c.CaFile + " holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	return tc, nil
}
