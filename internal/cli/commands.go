package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// streams are the standard streams of one run.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// completing: the run asks for completions (cobra's __complete), the
	// only use of the full build's command flags before they are parsed.
	completing bool
}

// newRoot builds the command tree of one run: the filter as the root
// command, which reads the manifests on stdin, and the commands beside it.
//
// Every command parses its own flags (DisableFlagParsing), as it did
// before cobra: the filter's parse errors, its environment and its log
// file come from the one preamble (Options.Preamble), and template,
// install and upgrade parse Helm's flags and the pinning flags together.
// Cobra finds the command, runs help and writes the completion scripts;
// the flags are declared on each command so that completion and the
// routing of arguments know them.
func newRoot(ctx context.Context, s streams) *cobra.Command {
	o := NewOptions()
	fs := filterFlags(o)
	root := &cobra.Command{
		Use:                "digestpin",
		Short:              "pin the images of a manifest stream to their digests",
		DisableFlagParsing: true,
		SilenceErrors:      true,
		SilenceUsage:       true,
		Args:               cobra.ArbitraryArgs, // runFilter refuses them, after the preamble
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFilter(ctx, cmd, o, fs, args, s)
		},
		ValidArgsFunction: completeFlagValues(fs, cobra.ShellCompDirectiveNoFileComp),
	}
	declareFlags(root, fs)
	root.SetIn(s.stdin)
	root.SetOut(s.stdout)
	root.SetErr(s.stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetHelpCommand(helpCommand(s))
	root.AddCommand(helmCommands(ctx, s)...)
	root.AddCommand(
		&cobra.Command{
			Use:                "seed [FILE]",
			Short:              "make a new secret seed for --seed-file",
			DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error {
				return runSeed(args, s.stdout, s.stderr)
			},
		},
		argocdCommand(ctx, s),
		fluxCommand(ctx, s),
		completionCommand(s, root),
		&cobra.Command{
			Use:                "version",
			Short:              "print the version",
			DisableFlagParsing: true,
			ValidArgsFunction:  cobra.NoFileCompletions,
			RunE: func(_ *cobra.Command, args []string) error {
				if len(args) > 0 {
					return reported(s.stderr, &UsageError{fmt.Errorf("digestpin version takes no arguments, have %q", args[0])})
				}
				fmt.Fprintf(s.stdout, "digestpin %s\n", versionString())
				return nil
			},
		},
	)
	return root
}

// helmCommands are template, install and upgrade: run in this process
// by the full build, handed to digestpin-helm by the other (runHelm). The
// full build declares their flags when it completes.
func helmCommands(ctx context.Context, s streams) []*cobra.Command {
	var cmds []*cobra.Command
	for _, c := range []struct{ name, short string }{
		{"template", "render a chart with deterministic generators, then pin it"},
		{"install", "install a chart, rendered and pinned as template does"},
		{"upgrade", "upgrade a release, rendered and pinned as template does"},
	} {
		cmd := &cobra.Command{
			Use:                c.name + " [NAME] CHART",
			Short:              c.short,
			DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error {
				return runHelm(ctx, c.name, args, s.stdout, s.stderr)
			},
		}
		if s.completing {
			helmFlags(cmd, c.name)
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// helmFlags declares the flags of the full build's command name on cmd,
// for completion (the build without Helm's engine hands completion to
// digestpin-helm: fullCommand).
func helmFlags(cmd *cobra.Command, name string) {
	h, ok := build().Helm.(interface{ Flags(string) *pflag.FlagSet })
	if !ok {
		return
	}
	if fs := h.Flags(name); fs != nil {
		declareFlags(cmd, fs)
		// template, install and upgrade take a chart: a folder or an
		// archive; refresh takes images.
		words := cobra.ShellCompDirectiveDefault
		if name == "argocd refresh" {
			words = cobra.ShellCompDirectiveNoFileComp
		}
		cmd.ValidArgsFunction = completeFlagValues(fs, words)
	}
}

// declareFlags declares the flags of fs on cmd, for completion and for
// cobra's routing of arguments (a flag's value is no command), each with
// the first clause of its help, which is enough for a menu. cmd parses
// its flags itself, with fs.
func declareFlags(cmd *cobra.Command, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		g := *f
		_, g.Usage = pflag.UnquoteUsage(f)
		if i := strings.IndexAny(g.Usage, ":;("); i > 0 {
			g.Usage = strings.TrimSpace(g.Usage[:i])
		}
		cmd.Flags().AddFlag(&g)
	})
}

// argocdCommand is `digestpin argocd`: generate, the Argo CD plugin's
// generate command, and refresh.
func argocdCommand(ctx context.Context, s streams) *cobra.Command {
	argocd := &cobra.Command{
		Use:                "argocd",
		Short:              "the Argo CD plugin's generate command, and refresh",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return runArgocd(ctx, args, s.stdout, s.stderr)
		},
	}
	refresh := &cobra.Command{
		Use:                "refresh IMAGE...",
		Short:              "hard-refresh the Argo CD Applications that run a pushed image",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return runArgocd(ctx, append([]string{"refresh"}, args...), s.stdout, s.stderr)
		},
	}
	if s.completing {
		helmFlags(refresh, "argocd refresh")
	}
	argocd.AddCommand(
		&cobra.Command{
			Use:                "generate",
			Short:              "render the Application's source and pin it (the plugin's generate command)",
			DisableFlagParsing: true,
			ValidArgsFunction:  cobra.NoFileCompletions,
			RunE: func(_ *cobra.Command, args []string) error {
				return runArgocdGenerate(ctx, args, s.stdout, s.stderr)
			},
		},
		refresh,
	)
	return argocd
}

// fluxCommand is `digestpin flux`: pin, which writes the digests of a
// Flux HelmRelease's or Kustomization's images into its file, and push,
// which pushes manifests as a Flux OCI artifact.
func fluxCommand(ctx context.Context, s streams) *cobra.Command {
	flux := &cobra.Command{
		Use:                "flux",
		Short:              "pin the images of Flux HelmReleases and Kustomizations, push Flux OCI artifacts",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return runFlux(ctx, args, s)
		},
	}
	pinCmd := &cobra.Command{
		Use:                "pin FILE...",
		Short:              "write the digests of a HelmRelease's or Kustomization's images into its file",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return runFlux(ctx, append([]string{"pin"}, args...), s)
		},
	}
	if s.completing {
		helmFlags(pinCmd, "flux pin")
	}
	pushCmd := &cobra.Command{
		Use:                "push oci://REGISTRY/REPOSITORY:TAG --path DIR|FILE|-",
		Short:              "push manifests as the OCI artifact of flux push artifact, only when they changed, signed with cosign",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return runFlux(ctx, append([]string{"push"}, args...), s)
		},
	}
	flux.AddCommand(pinCmd, pushCmd)
	return flux
}

// fluxUsage is the one line of digestpin flux without a subcommand.
const fluxUsage = "digestpin flux pin [flags] FILE... or digestpin flux push oci://REGISTRY/REPOSITORY:TAG --path DIR|FILE|- (see digestpin flux pin --help, digestpin flux push --help)"

// runFlux is `digestpin flux SUBCOMMAND`: pin or push.
func runFlux(ctx context.Context, args []string, s streams) error {
	stdout, stderr := s.stdout, s.stderr
	err := func() error {
		if len(args) == 0 || (args[0] != "pin" && args[0] != "push") {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				fmt.Fprint(stderr, "Usage: "+fluxUsage+"\n")
				return pflag.ErrHelp
			}
			if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				if near := nearestWord(args[0], []string{"pin", "push"}); near != "" {
					return &UsageError{fmt.Errorf("unknown command %q: did you mean \"flux %s\"? (see digestpin --help)", "flux "+args[0], near)}
				}
			}
			return &UsageError{errors.New("usage: " + fluxUsage)}
		}
		if args[0] == "push" {
			return runFluxPush(ctx, args[1:], s.stdin, stdout, stderr)
		}
		return runHelm(ctx, "flux pin", args[1:], stdout, stderr)
	}()
	if err != nil && !errors.Is(err, pflag.ErrHelp) {
		return reported(stderr, err)
	}
	return err
}

// completionCommand is `digestpin completion SHELL`: cobra's scripts,
// which ask digestpin itself (its hidden __complete command) for the
// commands, flags and values at each step.
func completionCommand(s streams, root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:                "completion " + strings.Join(shells, "|"),
		Short:              "print a shell completion script",
		DisableFlagParsing: true,
		ValidArgsFunction: func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var out []cobra.Completion
			for _, sh := range shells {
				if len(args) == 0 && strings.HasPrefix(sh, toComplete) {
					out = append(out, sh)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
				fmt.Fprintf(s.stderr, "Usage: digestpin completion %s\n\n%s", strings.Join(shells, "|"), completionHelp)
				return pflag.ErrHelp
			}
			if len(args) != 1 {
				return reported(s.stderr, &UsageError{fmt.Errorf("usage: digestpin completion %s", strings.Join(shells, "|"))})
			}
			var err error
			switch args[0] {
			case "bash":
				err = root.GenBashCompletionV2(s.stdout, true)
			case "zsh":
				err = root.GenZshCompletion(s.stdout)
			case "fish":
				err = root.GenFishCompletion(s.stdout, true)
			default:
				return reported(s.stderr, &UsageError{fmt.Errorf("completion: unknown shell %q: want %s", args[0], strings.Join(shells, ", "))})
			}
			if err != nil {
				return reported(s.stderr, fmt.Errorf("writing the %s completion script: %w", args[0], err))
			}
			return nil
		},
	}
}

// completionHelp is digestpin completion --help, after its usage line.
const completionHelp = `Writes a script that completes digestpin's commands, flags and their values:
  bash: source <(digestpin completion bash)
  zsh:  digestpin completion zsh > "${fpath[1]}/_digestpin"
  fish: digestpin completion fish | source
`

// helpCommand is `digestpin help [COMMAND...]`: the help of the filter, or
// of the command named, on stderr as --help writes it. A topic that names
// no command is a usage error that says the nearest.
func helpCommand(s streams) *cobra.Command {
	return &cobra.Command{
		Use:                "help [COMMAND]",
		Short:              "help about a command",
		DisableFlagParsing: true,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			target, _, err := cmd.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, c := range target.Commands() {
				if c.IsAvailableCommand() && strings.HasPrefix(c.Name(), toComplete) {
					names = append(names, cobra.CompletionWithDesc(c.Name(), c.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			target := cmd.Root()
			for i, topic := range args {
				next := subcommand(target, topic)
				if next == nil {
					return reported(s.stderr, &UsageError{unknownTopic(target, args[:i], topic)})
				}
				target = next
			}
			err := target.RunE(target, []string{"--help"})
			if errors.Is(err, pflag.ErrHelp) {
				return nil
			}
			return err
		},
	}
}

// subcommand returns the command of parent named name, nil if none.
func subcommand(parent *cobra.Command, name string) *cobra.Command {
	for _, c := range parent.Commands() {
		if c.IsAvailableCommand() && c.Name() == name {
			return c
		}
	}
	return nil
}

// unknownTopic is the error of `digestpin help TOPIC` for a last word that
// names no command of parent; before are the topic's words that did.
func unknownTopic(parent *cobra.Command, before []string, last string) error {
	topic := strings.Join(append(slices.Clone(before), last), " ")
	if near := nearestCommand(parent, last); near != "" {
		return fmt.Errorf("unknown help topic %q: did you mean %q?", topic, strings.Join(append(slices.Clone(before), near), " "))
	}
	return fmt.Errorf("unknown help topic %q: the commands are %s", topic, strings.Join(commandNames(parent), ", "))
}

// nearestCommand returns the name of parent's command nearest to word
// when it is near enough to be a slip (as closest does for variables), or
// one that word begins, "" otherwise.
func nearestCommand(parent *cobra.Command, word string) string {
	return nearestWord(word, commandNames(parent))
}

// nearestWord returns the one of names nearest to word when it is near
// enough to be a slip, or one that word begins, "" otherwise.
func nearestWord(word string, names []string) string {
	best, bestD := "", 0
	limit := min(2, max(1, len(word)/3))
	for _, name := range names {
		if d := editDistance(word, name); d <= limit && (best == "" || d < bestD) {
			best, bestD = name, d
		}
	}
	if best == "" {
		for _, name := range names {
			if len(word) >= 2 && strings.HasPrefix(name, word) {
				return name
			}
		}
	}
	return best
}

// commandNames are the names of parent's commands, help among them.
func commandNames(parent *cobra.Command) []string {
	var names []string
	for _, c := range parent.Commands() {
		if c.IsAvailableCommand() || c.Name() == "help" {
			names = append(names, c.Name())
		}
	}
	slices.Sort(names)
	return names
}

// reported writes err as a command's failure line and returns it.
func reported(stderr io.Writer, err error) error {
	fmt.Fprintf(stderr, "digestpin: error: %v\n", err)
	return err
}

// completeFlagValues completes the value of fs's flag before the word
// being completed (--mode <TAB>) or in it (--mode=<TAB>): cobra completes
// the flags' names itself, but not their values for a command that parses
// its own flags. A flag that takes a file completes as the shell does; a
// word that is no flag's value gets words (files, or nothing).
func completeFlagValues(fs *pflag.FlagSet, words cobra.ShellCompDirective) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		name, prefix, value := "", "", toComplete
		switch {
		case strings.HasPrefix(toComplete, "--") && strings.Contains(toComplete, "="):
			name, value, _ = strings.Cut(toComplete[2:], "=")
			prefix = "--" + name + "="
		case len(args) > 0 && strings.HasPrefix(args[len(args)-1], "-") && !strings.Contains(args[len(args)-1], "="):
			prev := args[len(args)-1]
			if strings.HasPrefix(prev, "--") {
				name = prev[2:]
			} else if f := fs.ShorthandLookup(prev[len(prev)-1:]); f != nil {
				name = f.Name
			}
		}
		f := fs.Lookup(name)
		switch {
		case prefix == "" && strings.HasPrefix(toComplete, "-"):
			return nil, cobra.ShellCompDirectiveNoFileComp // a flag's name: cobra's
		case f == nil || f.NoOptDefVal != "":
			return nil, words
		}
		values := flagValues[f.Name]
		switch {
		case slices.Equal(values, []string{fileValue}):
			return nil, cobra.ShellCompDirectiveDefault
		case slices.Equal(values, []string{dirValue}):
			return nil, cobra.ShellCompDirectiveFilterDirs
		case values == nil:
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, v := range values {
			if strings.HasPrefix(v, value) {
				out = append(out, prefix+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// Command is one command of the tree, for the reference.
type Command struct{ Path, Short string }

// Commands are every command of the full tree (b's), each path after its
// parent's, in the tree's order (newRoot).
func Commands(b Build) []Command {
	old := current.Swap(&b)
	defer current.Store(old)
	var out []Command
	visit(newRoot(context.Background(), streams{}), func(c *cobra.Command) {
		if c.IsAvailableCommand() || !c.HasParent() || c.Name() == "help" {
			out = append(out, Command{c.CommandPath(), c.Short})
		}
	})
	return out
}
