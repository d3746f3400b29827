package cli

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestCommands: the commands beside the filter, and what an unknown one
// or an unknown help topic gets: one line naming the nearest, exit 2.
func TestCommands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args         []string
		code         int
		stdout       string
		stderrPrefix string // "" for an empty stderr
		lines        int    // lines of stderr, 0 for any
	}{
		{args: []string{"version"}, stdout: "digestpin " + versionString() + "\n"},
		{args: []string{"version", "x"}, code: 2, stderrPrefix: `digestpin: error: digestpin version takes no arguments, have "x"`, lines: 1},
		{args: []string{"help"}, stderrPrefix: "digestpin pins the container images"},
		{args: []string{"help", "seed"}, stderrPrefix: "Usage: digestpin seed > FILE"},
		{args: []string{"help", "argocd", "generate"}, stderrPrefix: "Usage: digestpin argocd generate\n"},
		{args: []string{"help", "completion"}, stderrPrefix: "Usage: digestpin completion bash|zsh|fish\n"},
		{args: []string{"help", "templat"}, code: 2, stderrPrefix: `digestpin: error: unknown help topic "templat": did you mean "template"?`, lines: 1},
		{args: []string{"help", "argocd", "refrsh"}, code: 2, stderrPrefix: `digestpin: error: unknown help topic "argocd refrsh": did you mean "argocd refresh"?`, lines: 1},
		{args: []string{"help", "kubectl"}, code: 2, stderrPrefix: `digestpin: error: unknown help topic "kubectl": the commands are argocd, completion, flux, help, install, seed, template, upgrade, version`, lines: 1},
		{args: []string{"templat", "r", "./chart"}, code: 2, stderrPrefix: `digestpin: error: unknown command "templat": did you mean "template"? (see digestpin --help)`, lines: 1},
		{args: []string{"versio"}, code: 2, stderrPrefix: `digestpin: error: unknown command "versio": did you mean "version"?`, lines: 1},
		{args: []string{"argocd", "refersh", "shop/web:dev"}, code: 2, stderrPrefix: `digestpin: error: unknown command "argocd refersh": did you mean "argocd refresh"? (see digestpin --help)`, lines: 1},
		{args: []string{"argocd", "deploy"}, code: 2, stderrPrefix: "digestpin: error: usage: digestpin argocd refresh [flags] IMAGE...", lines: 1},
		{args: []string{"flux", "pinn", "hr.yaml"}, code: 2, stderrPrefix: `digestpin: error: unknown command "flux pinn": did you mean "flux pin"? (see digestpin --help)`, lines: 1},
		{args: []string{"flux"}, code: 2, stderrPrefix: "digestpin: error: usage: digestpin flux pin [flags] FILE...", lines: 1},
		{args: []string{"manifests.yaml"}, code: 2, stderrPrefix: `digestpin: error: unexpected argument "manifests.yaml": digestpin reads the manifests on stdin or from -f FILE`, lines: 1},
		{args: []string{"completion"}, code: 2, stderrPrefix: "digestpin: error: usage: digestpin completion bash|zsh|fish", lines: 1},
		{args: []string{"completion", "tcsh"}, code: 2, stderrPrefix: `digestpin: error: completion: unknown shell "tcsh": want bash, zsh, fish`, lines: 1},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, stderr, err := runIn(t, "", tc.args...)
			if code := ExitCode(err); code != tc.code {
				t.Errorf("exit %d (%v), want %d", code, err, tc.code)
			}
			if out != tc.stdout {
				t.Errorf("stdout = %q, want %q", out, tc.stdout)
			}
			if tc.stderrPrefix == "" && stderr != "" || !strings.HasPrefix(stderr, tc.stderrPrefix) {
				t.Errorf("stderr = %q, want it to start %q", stderr, tc.stderrPrefix)
			}
			if tc.lines > 0 && strings.Count(stderr, "\n") != tc.lines {
				t.Errorf("stderr has %d lines, want %d:\n%s", strings.Count(stderr, "\n"), tc.lines, stderr)
			}
		})
	}
}

// TestCompletionScripts: each shell's script is cobra's, for digestpin;
// the e2e tests run them in the shells.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for sh, want := range map[string]string{"bash": "__start_digestpin", "zsh": "#compdef digestpin", "fish": "complete -c digestpin"} {
		out, stderr, err := runIn(t, "", "completion", sh)
		if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "__complete") || stderr != "" {
			t.Errorf("completion %s = %v, stderr %q; want a script with %q that asks digestpin __complete", sh, err, stderr, want)
		}
	}
}

// TestCompleteValues: what completion offers after a flag of the filter,
// as cobra's scripts ask for it.
func TestCompleteValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string // the completions and the directive, as __complete prints them
	}{
		{args: []string{"--mode", ""}, want: "pin\ndigest\nannotate\n:4\n"},
		{args: []string{"--mode=d"}, want: "--mode=digest\n:4\n"},
		{args: []string{"-v", "--on-error", "k"}, want: "keep\n:4\n"},
		{args: []string{"--cache-dir", ""}, want: ":16\n"}, // folders
		{args: []string{"-f", ""}, want: ":0\n"},           // files
		{args: []string{"--mo"}, want: "--mode\timage field form\n:4\n"},
		{args: []string{"--state-t"}, want: ":4\n"}, // retired: hidden
		{args: []string{"se"}, want: "seed\tmake a new secret seed for --seed-file\n:4\n"},
		{args: []string{"argocd", "r"}, want: "refresh\thard-refresh the Argo CD Applications that run a pushed image\n:4\n"},
		{args: []string{"completion", "z"}, want: "zsh\n:4\n"},
	} {
		out, _, err := runIn(t, "", append([]string{"__complete"}, tc.args...)...)
		if err != nil || out != tc.want {
			t.Errorf("__complete %q = %q, %v; want %q", tc.args, out, err, tc.want)
		}
	}
}

// TestFlagGroups: every flag of the filter is under one topic of --help,
// and every topic names flags that exist.
func TestFlagGroups(t *testing.T) {
	t.Parallel()
	fs := filterFlags(NewOptions())
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && len(f.Annotations[flagGroup]) != 1 {
			t.Errorf("--%s is under no topic of --help (flagGroups)", f.Name)
		}
	})
	for _, g := range flagGroups {
		for _, name := range g.flags {
			if fs.Lookup(name) == nil {
				t.Errorf("flagGroups: %q names --%s, which is no flag", g.title, name)
			}
		}
	}
	usages := GroupedUsages(fs)
	if !strings.HasPrefix(usages, "Common flags:\n  -f, --filename") {
		t.Errorf("--help starts its flags with\n%s\nwant the common flags first", usages[:min(len(usages), 200)])
	}
}
