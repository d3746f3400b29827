package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// The two-render mode ("steady renders") compared the input with a second
// render of the same chart and kept the previous output when only the
// fields that differed between the two had changed. No comparison of text
// can tell a certificate, hash or ciphertext made from new input from one
// made from new randomness, so it could keep a real change with exit 0; it
// was retired in favour of renders whose randomness is a function of a
// seed. Its flags, their variables and the Argo CD plugin's settings for it
// stay known, hidden from --help and completion, so that a run that uses
// one fails with a message that names it instead of "unknown flag".

// retiredAfter is the version after which the two-render mode was
// retired: it came to main after 0.1.0 and left it before any release
// after that one (CHANGELOG.md, Unreleased), so a binary that had its
// flags reported 0.1.0. Messages name a version this binary knows, never
// one yet to come: TestRetiredAfter holds it to a version of CHANGELOG.md
// no newer than plugin.yaml's.
const retiredAfter = "0.1.0"

// retiredFlags are the flags of the two-render mode; each also reads its
// DIGESTPIN_* variable, as every flag does.
var retiredFlags = []string{"volatile-from", "previous", "state-dir", "state-key", "state-store", "state-ttl"}

// retiredValue is what a retired flag holds when it is given without a
// value (--previous at the end of the line): a retired flag takes any
// value, or none, so that nothing about it fails before the message that
// it was retired.
const retiredValue = "(no value)"

// bindRetired defines the retired flags on fs, hidden.
func bindRetired(fs *pflag.FlagSet) {
	for _, name := range retiredFlags {
		fs.String(name, "", "retired after "+retiredAfter)
		fs.Lookup(name).NoOptDefVal = retiredValue
		// MarkHidden fails only for a flag that is not defined.
		_ = fs.MarkHidden(name)
	}
}

// retiredError is the use of retired flags, variables or Argo CD plugin
// settings.
type retiredError struct {
	// used is what the person wrote, one entry per flag or setting:
	// "--previous", "DIGESTPIN_PREVIOUS", `the Argo CD plugin env
	// DIGESTPIN_STEADY="true"`.
	used []string
}

func (e *retiredError) Error() string {
	what, verb := e.used[0], "was"
	if n := len(e.used); n > 1 {
		what, verb = strings.Join(e.used[:n-1], ", ")+" and "+e.used[n-1], "were"
	}
	return fmt.Sprintf("%s %s retired after %s: two renders cannot tell a certificate, hash or ciphertext made from new input "+
		"from one made from new randomness, so it could keep a real change; "+
		`render with "digestpin template NAME CHART --seed-file FILE" instead (docs/deterministic.md)`, what, verb, retiredAfter)
}

// checkRetired returns a usage error naming every retired flag that was
// set, on the command line or from its variable; nil when none was.
func (o *Options) checkRetired(fs *pflag.FlagSet) error {
	var used []string
	for _, name := range retiredFlags {
		if fs.Changed(name) {
			used = append(used, o.Name(name))
		}
	}
	if used == nil {
		return nil
	}
	return &UsageError{&retiredError{used: used}}
}

// retiredArgocdSettings are the Argo CD plugin's settings of the
// two-render mode, with the value that still means what the plugin does
// ("" for none): an Application's plugin env (ARGOCD_ENV_ + name, as Argo
// CD passes it) and the sidecar's own variables. DIGESTPIN_STEADY=false
// asked for one render, which is what the plugin does now, so it still
// works; DIGESTPIN_STATE_STORE on the sidecar is a flag's variable, which
// checkRetired names.
var retiredArgocdSettings = []struct {
	env, what, allowed string
}{
	{env: "ARGOCD_ENV_DIGESTPIN_STEADY", what: "the Argo CD plugin env DIGESTPIN_STEADY", allowed: "false"},
	{env: "DIGESTPIN_CMP_STATE_DIR", what: "the Argo CD sidecar's DIGESTPIN_CMP_STATE_DIR"},
}

// checkRetiredArgocd returns a usage error naming every retired Argo CD
// plugin setting that lookup finds set, with its value; nil when none is.
func checkRetiredArgocd(lookup func(string) (string, bool)) error {
	var used []string
	for _, s := range retiredArgocdSettings {
		v, ok := lookup(s.env)
		if !ok || v == "" || (s.allowed != "" && v == s.allowed) {
			continue
		}
		used = append(used, fmt.Sprintf("%s=%q", s.what, v))
	}
	if used == nil {
		return nil
	}
	return &UsageError{&retiredError{used: used}}
}
