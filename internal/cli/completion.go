package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// shells are the shells `digestpin completion SHELL` writes a script for.
var shells = []string{"bash", "zsh", "fish"}

// flagValues are the values a flag takes, for completion: a list of words,
// or fileValue / dirValue for a path.
var flagValues = map[string][]string{
	"mode":        {"pin", "digest", "annotate"},
	"on-error":    {"fail", "keep"},
	"filename":    {fileValue},
	"ca-file":     {fileValue},
	"pull-secret": {fileValue},
	"write-lock":  {fileValue},
	"lock":        {fileValue},
	"report":      {fileValue},
	"log-file":    {fileValue},
	"config":      {fileValue},
	"cache-dir":   {dirValue},

	// The change set's files (summary.go).
	"diff-against": {fileValue},
	"summary":      {fileValue},
	"summary-text": {fileValue},

	// The Redis flags (options_redis.go).
	"redis-password-file": {fileValue},
	"redis-ca-file":       {fileValue},
}

const (
	fileValue = "<file>"
	dirValue  = "<dir>"
)

// completionFlag is what a completion script needs of one flag.
type completionFlag struct {
	name, short, help string
	takesValue        bool
	repeatable        bool
	values            []string // words, or fileValue or dirValue; nil: anything
}

// completionFlags lists the flags of fs for completion, in order, but not
// the hidden ones (retired.go).
func completionFlags(fs *pflag.FlagSet) []completionFlag {
	var out []completionFlag
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		_, help := pflag.UnquoteUsage(f)
		// The first clause is enough for a menu.
		if i := strings.IndexAny(help, ":;("); i > 0 {
			help = help[:i]
		}
		out = append(out, completionFlag{
			name:       f.Name,
			short:      f.Shorthand,
			help:       strings.TrimSpace(help),
			takesValue: f.NoOptDefVal == "",
			repeatable: strings.HasSuffix(f.Value.Type(), "Slice") || strings.HasSuffix(f.Value.Type(), "Array"),
			values:     flagValues[f.Name],
		})
	})
	return out
}

// completion writes the completion script for shell to w.
func completion(w io.Writer, shell string, fs *pflag.FlagSet) error {
	flags := completionFlags(fs)
	switch shell {
	case "bash":
		return bashCompletion(w, flags)
	case "zsh":
		return zshCompletion(w, flags)
	case "fish":
		return fishCompletion(w, flags)
	}
	return fmt.Errorf("completion: unknown shell %q: want %s", shell, strings.Join(shells, ", "))
}

func bashCompletion(w io.Writer, flags []completionFlag) error {
	var words, cases []string
	for _, f := range flags {
		names := "--" + f.name
		words = append(words, "--"+f.name)
		if f.short != "" {
			names = "-" + f.short + "|" + names
			words = append(words, "-"+f.short)
		}
		if !f.takesValue {
			continue
		}
		reply := "return ;;" // a value nobody can guess: complete nothing
		switch {
		case slices.Equal(f.values, []string{fileValue}):
			reply = `COMPREPLY=($(compgen -f -- "$cur")); return ;;`
		case slices.Equal(f.values, []string{dirValue}):
			reply = `COMPREPLY=($(compgen -d -- "$cur")); return ;;`
		case f.values != nil:
			reply = fmt.Sprintf(`COMPREPLY=($(compgen -W %q -- "$cur")); return ;;`, strings.Join(f.values, " "))
		}
		cases = append(cases, fmt.Sprintf("\t%s) %s", names, reply))
	}
	_, err := fmt.Fprintf(w, `# bash completion for digestpin: source <(digestpin completion bash)
_digestpin() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	if [[ ${COMP_WORDS[1]} == completion ]]; then
		[[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W %q -- "$cur"))
		return
	fi
	case $prev in
%s
	esac
	if [[ $COMP_CWORD -eq 1 && $cur != -* ]]; then
		COMPREPLY=($(compgen -W completion -- "$cur"))
		return
	fi
	COMPREPLY=($(compgen -W %q -- "$cur"))
}
complete -o default -F _digestpin digestpin
`, strings.Join(shells, " "), strings.Join(cases, "\n"), strings.Join(words, " "))
	return err
}

// zshQuote escapes s for a description inside _arguments' single-quoted
// specs.
func zshQuote(s string) string {
	return strings.NewReplacer(`'`, `'\''`, "[", `\[`, "]", `\]`, ":", `\:`).Replace(s)
}

func zshCompletion(w io.Writer, flags []completionFlag) error {
	var specs []string
	for _, f := range flags {
		spec := fmt.Sprintf("'--%s[%s]", f.name, zshQuote(f.help))
		if f.short != "" {
			spec = fmt.Sprintf("'(-%s --%s)'{-%s,--%s}'[%s]", f.short, f.name, f.short, f.name, zshQuote(f.help))
		}
		if f.takesValue {
			switch {
			case slices.Equal(f.values, []string{fileValue}):
				spec += ":file:_files"
			case slices.Equal(f.values, []string{dirValue}):
				spec += ":folder:_files -/"
			case f.values != nil:
				spec += fmt.Sprintf(":%s:(%s)", f.name, strings.Join(f.values, " "))
			default:
				spec += fmt.Sprintf(":%s: ", f.name)
			}
			if f.repeatable {
				spec = "*" + spec
			}
		}
		specs = append(specs, "\t\t"+spec+"'")
	}
	_, err := fmt.Fprintf(w, `#compdef digestpin
# zsh completion for digestpin: digestpin completion zsh > "${fpath[1]}/_digestpin"
# or, for this shell only: source <(digestpin completion zsh)
_digestpin() {
	if (( CURRENT > 2 )) && [[ ${words[2]} == completion ]]; then
		_values shell %s
		return
	fi
	_arguments -s \
%s \
		'1::command:(completion)'
}
if [[ $funcstack[1] == _digestpin ]]; then
	_digestpin "$@"
else
	compdef _digestpin digestpin
fi
`, strings.Join(shells, " "), strings.Join(specs, " \\\n"))
	return err
}

// fishQuote quotes s for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func fishCompletion(w io.Writer, flags []completionFlag) error {
	var b strings.Builder
	b.WriteString("# fish completion for digestpin: digestpin completion fish | source\n")
	b.WriteString("complete -c digestpin -f\n")
	b.WriteString("complete -c digestpin -n __fish_use_subcommand -a completion -d 'print a shell completion script'\n")
	fmt.Fprintf(&b, "complete -c digestpin -n '__fish_seen_subcommand_from completion' -a %s\n", fishQuote(strings.Join(shells, " ")))
	for _, f := range flags {
		line := "complete -c digestpin"
		if f.short != "" {
			line += " -s " + f.short
		}
		line += " -l " + f.name
		if f.takesValue {
			switch {
			case slices.Equal(f.values, []string{fileValue}):
				line += " -r -F"
			case slices.Equal(f.values, []string{dirValue}):
				line += " -x -a '(__fish_complete_directories)'"
			case f.values != nil:
				line += " -x -a " + fishQuote(strings.Join(f.values, " "))
			default:
				line += " -x"
			}
		}
		b.WriteString(line + " -d " + fishQuote(f.help) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
