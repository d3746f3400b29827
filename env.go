package main

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

// otherEnv are the DIGESTPIN_* variables that are not flags but belong to
// the project's other parts, so that setting them warns of nothing. A name
// ending in "_" is a prefix. TestOtherEnvListed keeps it complete.
var otherEnv = []string{
	"DIGESTPIN_REDIS_PASSWORD", // the Redis password (options_redis.go)
	"DIGESTPIN_TEST_",          // the tests' tools (Makefile)
	"DIGESTPIN_CI_",            // the CI step, the GitHub Action and the GitLab template
	"DIGESTPIN_PUSH_TOKEN",     // the README's GitLab example
	"DIGESTPIN_PLUGIN_",        // the plugins' install hook
	"DIGESTPIN_RELEASE_URL",    // the sidecar image's build (image-fetch.sh)
	"DIGESTPIN_CMP_STATE_DIR",  // the Argo CD plugin (digestpin argocd generate)
	"DIGESTPIN_SHA256",         // the Argo CD init container (plugin-install.sh)
	"DIGESTPIN_ARCH",           // the Argo CD init container (plugin-install.sh)

	// The flags of digestpin template, install and upgrade, which the
	// Argo CD sidecar and CI set for every run, the filter's too.
	"DIGESTPIN_SEED_FILE",
	"DIGESTPIN_PIN_TIMEOUT",
	"DIGESTPIN_SEED",                 // refused in an Application's env (argocd.go)
	"DIGESTPIN_CMP_SEED_PER_PROJECT", // the Argo CD plugin (digestpin argocd generate)
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
		if slices.ContainsFunc(otherEnv, func(o string) bool {
			return name == o || (strings.HasSuffix(o, "_") && strings.HasPrefix(name, o))
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
