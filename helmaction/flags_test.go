package helmaction

import (
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/cli/output"
	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/kube"
)

// flagInfo is what a person can tell of a flag from the command line.
type flagInfo struct {
	Shorthand, Default, NoOptDefault string
	Hidden                           bool
}

// helmFlags returns the flags of Helm 4.3.1's own command cmd (template,
// install, upgrade), its global flags included, but for klog's hidden
// ones and the post-renderer's, by name.
func helmFlags(t *testing.T, cmd string) map[string]flagInfo {
	t.Helper()
	// Helm's settings were read from the environment when the test
	// started, as ours are: keep it as it is, but for plugins.
	t.Setenv("HELM_NO_PLUGINS", "1")
	root, err := helmcmd.NewRootCmd(io.Discard, []string{cmd}, func(bool) {})
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := root.Find([]string{cmd})
	if err != nil || c.Name() != cmd {
		t.Fatalf("helm has no %s command: %v", cmd, err)
	}
	out := map[string]flagInfo{}
	add := func(f *pflag.Flag) {
		if strings.HasPrefix(f.Name, "post-renderer") || f.Name == "help" {
			return
		}
		out[f.Name] = flagInfo{f.Shorthand, f.DefValue, f.NoOptDefVal, f.Hidden}
	}
	c.LocalFlags().VisitAll(add)
	c.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden { // klog's
			add(f)
		}
	})
	return out
}

// ourFlags returns the flags bind defines.
func ourFlags(bind func(*pflag.FlagSet)) map[string]flagInfo {
	fs := pflag.NewFlagSet("ours", pflag.ContinueOnError)
	bind(fs)
	out := map[string]flagInfo{}
	fs.VisitAll(func(f *pflag.Flag) { out[f.Name] = flagInfo{f.Shorthand, f.DefValue, f.NoOptDefVal, f.Hidden} })
	return out
}

// TestBindIsHelms compares each command's flags with Helm 4.3.1's own
// command of the name, read from Helm's cobra commands: the same names,
// shorthands, defaults, value when given alone, and which are hidden
// (Helm's deprecated spellings). Only the post-renderer's are left out:
// digestpin is the post-renderer.
func TestBindIsHelms(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		bind func(*pflag.FlagSet)
	}{
		{"install", func(fs *pflag.FlagSet) { var o InstallOptions; o.Bind(fs) }},
		{"upgrade", func(fs *pflag.FlagSet) { var o UpgradeOptions; o.Bind(fs) }},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			want := helmFlags(t, tc.cmd)
			got := ourFlags(tc.bind)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("flags of %s (-helm +ours):\n%s", tc.cmd, diff)
			}
		})
	}
}

// TestTemplateBindCoversHelms: digestpin template takes every flag of helm
// template but for those that write files (--output-dir,
// --release-name), the post-renderer's, and --timeout (digestpin's bound
// on the whole run, which is the pinning flags').
func TestTemplateBindCoversHelms(t *testing.T) {
	want := helmFlags(t, "template")
	got := ourFlags(func(fs *pflag.FlagSet) { var o Options; o.Bind(fs) })
	var missing []string
	for name := range want {
		switch name {
		case "output-dir", "release-name", "timeout", "generate-name", "name-template", "hide-secret", "validate", "output":
			continue
		}
		if _, ok := got[name]; !ok {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("digestpin template lacks helm template's %v", missing)
	}
}

// TestDeployFlags parses command lines into the options Helm's flags
// mean, legacy spellings and their warnings included.
func TestDeployFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		want     Deploy
		warnings []string
	}{
		{name: "defaults", want: Deploy{Timeout: 5 * time.Minute, Wait: kube.HookOnlyStrategy, DryRun: action.DryRunNone, Output: output.Table}},
		{name: "wait alone", args: []string{"--wait"}, want: Deploy{Timeout: 5 * time.Minute, Wait: kube.StatusWatcherStrategy, DryRun: action.DryRunNone, Output: output.Table}},
		{name: "wait legacy", args: []string{"--wait=legacy", "--timeout", "10s"}, want: Deploy{Timeout: 10 * time.Second, Wait: kube.LegacyStrategy, DryRun: action.DryRunNone, Output: output.Table}},
		{name: "wait=true", args: []string{"--wait=true"}, want: Deploy{Timeout: 5 * time.Minute, Wait: kube.StatusWatcherStrategy, DryRun: action.DryRunNone, Output: output.Table},
			warnings: []string{"--wait=true is deprecated (boolean value) and can be replaced with --wait=watcher"}},
		{name: "dry-run alone", args: []string{"--dry-run"}, want: Deploy{Timeout: 5 * time.Minute, Wait: kube.HookOnlyStrategy, DryRun: action.DryRunClient, Output: output.Table},
			warnings: []string{"--dry-run is deprecated and should be replaced with '--dry-run=client'"}},
		{name: "dry-run=server", args: []string{"--dry-run=server", "-o", "yaml"}, want: Deploy{Timeout: 5 * time.Minute, Wait: kube.HookOnlyStrategy, DryRun: action.DryRunServer, Output: output.YAML}},
		{name: "dry-run=true", args: []string{"--dry-run=true"}, want: Deploy{Timeout: 5 * time.Minute, Wait: kube.HookOnlyStrategy, DryRun: action.DryRunClient, Output: output.Table},
			warnings: []string{"boolean '--dry-run=true' flag is deprecated and must be replaced with '--dry-run=client'"}},
		{name: "atomic and force", args: []string{"--atomic", "--force"}, want: Deploy{Timeout: 5 * time.Minute, Wait: kube.HookOnlyStrategy, DryRun: action.DryRunNone, Output: output.Table, RollbackOnFailure: true, ForceReplace: true},
			warnings: []string{"Flag --atomic has been deprecated, use --rollback-on-failure instead", "Flag --force has been deprecated, use --force-replace instead"}},
		{name: "the rest", args: []string{"--create-namespace", "--no-hooks", "--skip-crds", "--wait-for-jobs", "--render-subchart-notes", "--hide-notes", "--hide-secret", "--take-ownership", "--disable-openapi-validation", "--force-conflicts", "--description", "d", "-l", "a=b,c=d", "--rollback-on-failure"},
			want: Deploy{Timeout: 5 * time.Minute, Wait: kube.HookOnlyStrategy, DryRun: action.DryRunNone, Output: output.Table, CreateNamespace: true, NoHooks: true, SkipCRDs: true, WaitForJobs: true, SubNotes: true, HideNotes: true, HideSecret: true, TakeOwnership: true, DisableOpenAPIValidation: true, ForceConflicts: true, Description: "d", Labels: map[string]string{"a": "b", "c": "d"}, RollbackOnFailure: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o InstallOptions
			fs := pflag.NewFlagSet("install", pflag.ContinueOnError)
			o.Bind(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got := o.Deploy
			got.warnings = nil
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(Deploy{})); diff != "" {
				t.Errorf("Bind(%q) (-want +got):\n%s", tc.args, diff)
			}
			if diff := cmp.Diff(tc.warnings, o.Warnings()); diff != "" {
				t.Errorf("Warnings() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeployFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--wait=soon"}, `invalid argument "soon" for "--wait" flag: want watcher, hookOnly or legacy`},
		{[]string{"--dry-run=maybe"}, `invalid argument "maybe" for "--dry-run" flag: want "none", "client" or "server"`},
		{[]string{"-o", "xml"}, `invalid argument "xml" for "-o, --output" flag: want one of table, json, yaml`},
		{[]string{"--atomic=sure"}, `invalid argument "sure" for "--atomic" flag`},
	} {
		var o InstallOptions
		fs := pflag.NewFlagSet("install", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.Bind(fs)
		err := fs.Parse(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// TestReadsStdin checks which values flags make Helm read stdin.
func TestReadsStdin(t *testing.T) {
	for _, tc := range []struct {
		files, fileValues []string
		want              bool
	}{
		{nil, nil, false},
		{[]string{"a.yaml", "b.yaml"}, []string{"k=v.txt"}, false},
		{[]string{"a.yaml", "-"}, nil, true},
		{[]string{" - "}, nil, true},
		{nil, []string{"k=v.txt,j=-"}, true},
		{nil, []string{"k=-"}, true},
		{nil, []string{"k=--", "-"}, false}, // "-" with no key is not a file value
	} {
		s := Source{}
		s.Values.ValueFiles, s.Values.FileValues = tc.files, tc.fileValues
		if got := s.ReadsStdin(); got != tc.want {
			t.Errorf("ReadsStdin(-f %q, --set-file %q) = %v, want %v", tc.files, tc.fileValues, got, tc.want)
		}
	}
}
