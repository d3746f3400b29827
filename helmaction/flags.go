package helmaction

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/cli/output"
	"helm.sh/helm/v4/pkg/kube"
)

// The flag values here parse at Set, so that pflag names the flag in
// every error, and record the warnings Helm gives for its legacy spellings
// (Deploy.Warnings).

// waitValue is --wait: a kube.WaitStrategy, "watcher" when given alone.
type waitValue struct {
	ws *kube.WaitStrategy
	d  *Deploy
}

func (w waitValue) String() string { return string(*w.ws) }
func (w waitValue) Type() string   { return "WaitStrategy" }

func (w waitValue) Set(s string) error {
	switch s {
	case string(kube.StatusWatcherStrategy), string(kube.LegacyStrategy), string(kube.HookOnlyStrategy):
		*w.ws = kube.WaitStrategy(s)
	case "true":
		w.d.warn("--wait=true is deprecated (boolean value) and can be replaced with --wait=watcher")
		*w.ws = kube.StatusWatcherStrategy
	case "false":
		w.d.warn("--wait=false is deprecated (boolean value) and can be replaced with --wait=hookOnly")
		*w.ws = kube.HookOnlyStrategy
	default:
		return fmt.Errorf("want %s, %s or %s", kube.StatusWatcherStrategy, kube.HookOnlyStrategy, kube.LegacyStrategy)
	}
	return nil
}

// dryRunUnset is what --dry-run alone sets, as in Helm: the legacy
// spelling of --dry-run=client.
const dryRunUnset = "unset"

// dryRunValue is --dry-run: none, client or server, and Helm's legacy
// spellings (alone, true, false) with a warning.
type dryRunValue struct {
	s *action.DryRunStrategy
	d *Deploy
}

func (v dryRunValue) String() string { return string(*v.s) }
func (v dryRunValue) Type() string   { return "string" }

func (v dryRunValue) Set(s string) error {
	switch s {
	case dryRunUnset:
		v.d.warn(`--dry-run is deprecated and should be replaced with '--dry-run=client'`)
		*v.s = action.DryRunClient
		return nil
	case string(action.DryRunNone), string(action.DryRunClient), string(action.DryRunServer):
		*v.s = action.DryRunStrategy(s)
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf(`want "none", "client" or "server"`)
	}
	*v.s = action.DryRunNone
	if b {
		*v.s = action.DryRunClient
	}
	v.d.warn(fmt.Sprintf(`boolean '--dry-run=%v' flag is deprecated and must be replaced with '--dry-run=%s'`, s, *v.s))
	return nil
}

// deprecatedBool is a hidden boolean flag that Helm keeps as another name
// of a newer one (--force for --force-replace, --atomic for
// --rollback-on-failure): it sets the same field, with Helm's warning.
type deprecatedBool struct {
	b          *bool
	d          *Deploy
	name, with string
}

func (v deprecatedBool) String() string   { return strconv.FormatBool(*v.b) }
func (v deprecatedBool) Type() string     { return "bool" }
func (v deprecatedBool) IsBoolFlag() bool { return true }

func (v deprecatedBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v.b = b
	v.d.warn(fmt.Sprintf("Flag --%s has been deprecated, use --%s instead", v.name, v.with))
	return nil
}

// outputValue is -o/--output: table, json or yaml.
type outputValue struct{ f *output.Format }

func (v outputValue) String() string { return string(*v.f) }
func (v outputValue) Type() string   { return "format" }

func (v outputValue) Set(s string) error {
	f, err := output.ParseFormat(s)
	if err != nil {
		return fmt.Errorf("want one of %s", strings.Join(output.Formats(), ", "))
	}
	*v.f = f
	return nil
}

// bindDeprecated defines the hidden flag name as another name of the
// boolean b, whose own flag is with.
func (d *Deploy) bindDeprecated(fs *pflag.FlagSet, b *bool, name, with string) {
	f := fs.VarPF(deprecatedBool{b: b, d: d, name: name, with: with}, name, "", "deprecated: use --"+with)
	f.NoOptDefVal = "true"
	f.Hidden = true
}

// bindDeploy defines the flags helm install and helm upgrade share on
// fs; verb ("install" or "upgrade") words their help as Helm's.
func (d *Deploy) bindDeploy(fs *pflag.FlagSet, verb string) {
	if verb == "install" {
		fs.BoolVar(&d.CreateNamespace, "create-namespace", false, "create the release namespace if not present")
	} else {
		fs.BoolVar(&d.CreateNamespace, "create-namespace", false, "if --install is set, create the release namespace if not present")
	}
	fs.BoolVar(&d.ForceReplace, "force-replace", false, "force resource updates by replacement")
	d.bindDeprecated(fs, &d.ForceReplace, "force", "force-replace")
	fs.BoolVar(&d.ForceConflicts, "force-conflicts", false, "if set server-side apply will force changes against conflicts")
	if verb == "install" {
		fs.BoolVar(&d.NoHooks, "no-hooks", false, "prevent hooks from running during install")
	} else {
		fs.BoolVar(&d.NoHooks, "no-hooks", false, "disable pre/post upgrade hooks")
	}
	fs.DurationVar(&d.Timeout, "timeout", defaultTimeout, "Helm's: time to wait for any individual Kubernetes operation (like Jobs for hooks, and --wait); digestpin's bound on pinning is --pin-timeout")
	fs.BoolVar(&d.WaitForJobs, "wait-for-jobs", false, "if set and --wait enabled, will wait until all Jobs have been completed before marking the release as successful. It will wait for as long as --timeout")
	fs.StringVar(&d.Description, "description", "", "add a custom description")
	fs.BoolVar(&d.DisableOpenAPIValidation, "disable-openapi-validation", false, "if set, the "+verb+" process will not validate rendered templates against the Kubernetes OpenAPI Schema")
	if verb == "install" {
		fs.BoolVar(&d.RollbackOnFailure, "rollback-on-failure", false, `if set, Helm will rollback (uninstall) the installation upon failure. The --wait flag will be default to "watcher" if --rollback-on-failure is set`)
		fs.BoolVar(&d.SkipCRDs, "skip-crds", false, "if set, no CRDs will be installed. By default, CRDs are installed if not already present")
	} else {
		fs.BoolVar(&d.RollbackOnFailure, "rollback-on-failure", false, `if set, Helm will rollback the upgrade to previous success release upon failure. The --wait flag will be defaulted to "watcher" if --rollback-on-failure is set`)
		fs.BoolVar(&d.SkipCRDs, "skip-crds", false, "if set, no CRDs will be installed when an upgrade is performed with install flag enabled. By default, CRDs are installed if not already present, when an upgrade is performed with install flag enabled")
	}
	d.bindDeprecated(fs, &d.RollbackOnFailure, "atomic", "rollback-on-failure")
	fs.BoolVar(&d.SubNotes, "render-subchart-notes", false, "if set, render subchart notes along with the parent")
	fs.StringToStringVarP(&d.Labels, "labels", "l", nil, "labels that would be added to release metadata, separated by commas")
	fs.BoolVar(&d.HideNotes, "hide-notes", false, "if set, do not show notes in "+verb+" output. Does not affect presence in chart metadata")
	fs.BoolVar(&d.TakeOwnership, "take-ownership", false, "if set, "+verb+" will ignore the check for helm annotations and take ownership of the existing resources")
	fs.BoolVar(&d.HideSecret, "hide-secret", false, "hide Kubernetes Secrets when also using the --dry-run flag")

	d.Wait = kube.HookOnlyStrategy
	fs.Var(waitValue{ws: &d.Wait, d: d}, "wait", "wait until resources are ready (up to --timeout). Use '--wait' alone for 'watcher' strategy, or specify one of: 'watcher', 'hookOnly', 'legacy'. Default when flag is omitted: 'hookOnly'.")
	fs.Lookup("wait").NoOptDefVal = string(kube.StatusWatcherStrategy)
	d.DryRun = action.DryRunNone
	fs.Var(dryRunValue{s: &d.DryRun, d: d}, "dry-run", `simulates the operation without persisting changes: "none" (default: run it), "client" (no cluster at all: the manifests are printed) or "server" (simulated by the cluster)`)
	fs.Lookup("dry-run").NoOptDefVal = dryRunUnset
	d.Output = output.Table
	fs.VarP(outputValue{f: &d.Output}, "output", "o", "prints the output in the specified format. Allowed values: "+strings.Join(output.Formats(), ", "))
}
