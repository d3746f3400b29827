package e2e

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// shell runs script in the named shell with the binary's folder on PATH
// and returns its output, one completion a line.
func shell(t *testing.T, name, script string) []string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is missing (Debian: apt-get install %s; .ci/run installs it): %v", name, name, err)
	}
	cmd := exec.Command(path, "-c", script)
	cmd.Env = cleanEnv("PATH=" + filepath.Dir(digestpinBin(t)) + ":/usr/bin:/bin")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -c %q: %v\n%s", name, script, err, out)
	}
	var lines []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		// fish prints "candidate<TAB>description".
		lines = append(lines, strings.SplitN(l, "\t", 2)[0])
	}
	return lines
}

// TestCompletion loads each shell's completion script as a person would
// and asks it for completions: cobra's scripts, which ask digestpin (and
// for template, install and upgrade, the digestpin-helm beside it) at
// each step.
func TestCompletion(t *testing.T) {
	t.Parallel()
	// bash: cobra's script needs the bash-completion package, as on every
	// distribution that completes at all; compopt works only while bash
	// completes for real, so it does nothing here.
	bash := func(words ...string) string {
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = shellQuote(w)
		}
		return `source /usr/share/bash-completion/bash_completion; source <(digestpin completion bash); compopt() { :; }; ` +
			`COMP_WORDS=(` + strings.Join(quoted, " ") + `); COMP_CWORD=` + strconv.Itoa(len(words)-1) +
			`; COMP_LINE=` + shellQuote(strings.Join(words, " ")) + `; COMP_POINT=${#COMP_LINE}; __start_digestpin digestpin; printf '%s\n' "${COMPREPLY[@]}"`
	}
	// zsh completes only in an interactive shell's completion system:
	// here _digestpin runs on a given command line, and _describe and
	// compadd, which would offer the candidates, print them instead.
	zsh := func(words ...string) string {
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = shellQuote(w)
		}
		return `autoload -U compinit && compinit -u -D; source <(digestpin completion zsh); ` +
			`_describe() { local n=${@[-1]} a c; for a in "$@"; do [[ $a == completions ]] && n=$a; done; for c in "${(@P)n}"; do print -r -- "${c%%:*}"; done }; ` +
			`compadd() { print -rl -- "${@[-1]}" }; ` +
			`words=(` + strings.Join(quoted, " ") + `); CURRENT=${#words}; _digestpin`
	}
	fish := func(line string) string { return `digestpin completion fish | source; complete -C ` + shellQuote(line) }
	for _, tc := range []struct {
		desc, shell, script string
		want                []string
	}{
		{desc: "bash flag", shell: "bash", script: bash("digestpin", "--mo"), want: []string{"--mode"}},
		{desc: "bash mode values", shell: "bash", script: bash("digestpin", "--mode", ""), want: []string{"pin", "digest", "annotate"}},
		{desc: "bash on-error values", shell: "bash", script: bash("digestpin", "--on-error", "k"), want: []string{"keep"}},
		{desc: "bash subcommand", shell: "bash", script: bash("digestpin", "comp"), want: []string{"completion"}},
		{desc: "bash shells", shell: "bash", script: bash("digestpin", "completion", ""), want: []string{"bash", "zsh", "fish"}},
		{desc: "bash template flag", shell: "bash", script: bash("digestpin", "template", "--seed"), want: []string{"--seed-file"}},
		{desc: "bash help topics", shell: "bash", script: bash("digestpin", "help", "t"), want: []string{"template"}},
		{desc: "bash argocd commands", shell: "bash", script: bash("digestpin", "argocd", ""), want: []string{"generate", "refresh"}},
		{desc: "fish flag", shell: "fish", script: fish("digestpin --mo"), want: []string{"--mode"}},
		{desc: "fish commands", shell: "fish", script: fish("digestpin se"), want: []string{"seed"}},
		{desc: "fish install flag", shell: "fish", script: fish("digestpin install --pin-t"), want: []string{"--pin-timeout"}},
		{desc: "fish mode values", shell: "fish", script: fish("digestpin --mode "), want: []string{"annotate", "digest", "pin"}},
		{desc: "fish shells", shell: "fish", script: fish("digestpin completion "), want: []string{"bash", "fish", "zsh"}},
		{desc: "zsh flag", shell: "zsh", script: zsh("digestpin", "--mo"), want: []string{"--mode"}},
		{desc: "zsh mode values", shell: "zsh", script: zsh("digestpin", "--mode", ""), want: []string{"pin", "digest", "annotate"}},
		{desc: "zsh commands", shell: "zsh", script: zsh("digestpin", "se"), want: []string{"seed"}},
		{desc: "zsh template flag", shell: "zsh", script: zsh("digestpin", "template", "--seed"), want: []string{"--seed-file"}},
		{desc: "zsh registers", shell: "zsh", script: `autoload -U compinit && compinit -u -D && source <(digestpin completion zsh) && print -r -- ${_comps[digestpin]}`, want: []string{"_digestpin"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := shell(t, tc.shell, tc.script)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("%s completions = %q, want %q", tc.shell, got, tc.want)
			}
		})
	}
}
