package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// notFromEnv are the flags that the environment does not set: actions
// rather than settings. DIGESTPIN_VERSION=true in the environment (set for
// a build, say) would replace the manifests with the version.
var notFromEnv = map[string]bool{"version": true}

// otherVar is a DIGESTPIN_* variable that is not a flag's: its name (a
// name ending in "_" is a prefix) and what reads it.
type otherVar struct{ name, use string }

// otherEnv are the DIGESTPIN_* variables that are not flags but belong to
// the project's other parts, so that setting them warns of nothing.
// TestOtherEnvListed keeps it complete; docs/reference.md lists it.
var otherEnv = []otherVar{
	{"DIGESTPIN_REDIS_PASSWORD", "the Redis password, when neither --redis-password-file nor the --cache URL gives one"},
	{"DIGESTPIN_TEST_", "the tools the Makefile builds for the tests"},
	{"DIGESTPIN_CI_", "the CI step (digestpin-ci.sh), the GitHub Action and the GitLab template (docs/ci.md)"},
	{"DIGESTPIN_PUSH_TOKEN", "the GitLab example's project access token (docs/ci.md)"},
	{"DIGESTPIN_PLUGIN_", "the Helm plugins' install hook (docs/install.md)"},
	{"DIGESTPIN_RELEASE_URL", "the Argo CD init container and the sidecar image's build: a mirror of the release's files"},
	{"DIGESTPIN_CMP_STATE_DIR", "retired setting of the Argo CD plugin's sidecar, refused"},
	{"DIGESTPIN_SHA256", "the Argo CD init container: the archive's line of SHA256SUMS, to pin it"},
	{"DIGESTPIN_ARCH", "the Argo CD init container: the architecture of the binary to install"},
	{"DIGESTPIN_EXEC_VERSION", "set by digestpin for the digestpin-helm it runs (its version), which refuses another version and unsets it"},

	// The flags of digestpin template, install and upgrade, which the
	// Argo CD sidecar and CI set for every run, the filter's too.
	{"DIGESTPIN_SEED_FILE", "--seed-file of digestpin template, install and upgrade"},
	{"DIGESTPIN_PIN_TIMEOUT", "--pin-timeout of digestpin install and upgrade"},
	{"DIGESTPIN_SEED", "refused in an Argo CD Application's env: an Application cannot choose the seed"},
	{"DIGESTPIN_CMP_SEED_PER_PROJECT", "the Argo CD sidecar: true gives each Argo CD project its own seed"},
}

// envWarnings returns one warning for each DIGESTPIN_* variable of
// environ (KEY=VALUE) that sets nothing: not a flag's, not one of
// otherEnv, or the variable of a flag the environment does not set. A
// misspelt name is otherwise ignored without a word, and the setting with
// it. Each names the variable, never its value, and the closest flag's
// variable when there is one.
func envWarnings(fs *pflag.FlagSet, environ []string) []string {
	flags := map[string]string{} // variable → flag
	fs.VisitAll(func(f *pflag.Flag) { flags[envName(f.Name)] = f.Name })
	var warnings []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "DIGESTPIN_") {
			continue
		}
		if flag, ok := flags[name]; ok {
			if notFromEnv[flag] {
				warnings = append(warnings, fmt.Sprintf("%s is ignored: the environment does not set --%s, which is an action; give it on the command line", name, flag))
			}
			continue
		}
		if slices.ContainsFunc(otherEnv, func(o otherVar) bool {
			return name == o.name || (strings.HasSuffix(o.name, "_") && strings.HasPrefix(name, o.name))
		}) {
			continue
		}
		w := name + " is not a digestpin setting, ignored"
		if near := closest(name, flags); near != "" {
			w += "; did you mean " + near + "?"
		}
		warnings = append(warnings, w)
	}
	slices.Sort(warnings)
	return slices.Compact(warnings)
}

// closest returns the variable of flags nearest to name, if it is near
// enough to be a slip: at most a third of name's length (after the
// prefix) in edits, and at most 3.
func closest(name string, flags map[string]string) string {
	best, bestD := "", 0
	limit := min(3, max(1, len(strings.TrimPrefix(name, "DIGESTPIN_"))/3))
	for v, flag := range flags {
		if notFromEnv[flag] {
			continue
		}
		d := editDistance(name, v)
		if d <= limit && (best == "" || d < bestD || (d == bestD && v < best)) {
			best, bestD = v, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes (the
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// The names docs/reference.md is written from (helmcmd's TestReference).

// FilterFlags are the flags of the filter, bound onto o.
func FilterFlags(o *Options) *pflag.FlagSet { return filterFlags(o) }

// EnvName is the DIGESTPIN_* variable that sets flag.
func EnvName(flag string) string { return envName(flag) }

// NotFromEnv says that flag is never set from the environment.
func NotFromEnv(flag string) bool { return notFromEnv[flag] }

// OtherVariable is a DIGESTPIN_* variable that is no flag's, and what
// reads it.
type OtherVariable struct{ Name, Use string }

// OtherVariables are the DIGESTPIN_* variables that are no flag's.
func OtherVariables() []OtherVariable {
	vs := make([]OtherVariable, len(otherEnv))
	for i, v := range otherEnv {
		vs[i] = OtherVariable{v.name, v.use}
	}
	return vs
}

// Shells are the shells digestpin completion writes a script for.
func Shells() []string { return slices.Clone(shells) }
