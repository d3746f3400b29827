package helmcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/spf13/pflag"
	helmcmd "helm.sh/helm/v4/pkg/cmd"
)

// helmFlagsEnv names the Helm command whose flags this test binary, run
// again by helmLocalFlags, prints instead of testing.
const helmFlagsEnv = "DIGESTPIN_TEST_HELM_FLAGS"

// TestMain runs the tests, or, run by helmLocalFlags, prints the flags
// of a Helm command.
func TestMain(m *testing.M) {
	if name := os.Getenv(helmFlagsEnv); name != "" {
		if err := printHelmFlags(os.Stdout, name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helmFlag is what the reference compares of a Helm flag (sameFlag).
type helmFlag struct{ Name, Shorthand, DefValue, Usage, Type string }

// typeValue is a flag value of a given type and no use but its Type.
type typeValue string

func (v typeValue) String() string   { return "" }
func (v typeValue) Set(string) error { return nil }
func (v typeValue) Type() string     { return string(v) }

// helmLocalFlags returns the local flags of the Helm 4 CLI's command
// name. Helm's root command registers a cobra initializer for the whole
// process (cobra.OnInitialize: a Kubernetes client set up, and the
// process ended on failure), which would then run before every command
// of digestpin's that this package's tests execute, in parallel with each
// other: so the root is made in a process of its own, this test binary
// run again with helmFlagsEnv, in the environment the test has now.
func helmLocalFlags(name string) (*pflag.FlagSet, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helmFlagsEnv+"="+name)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("the flags of helm %s: %w", name, err)
	}
	var flags []helmFlag
	if err := json.Unmarshal(out, &flags); err != nil {
		return nil, fmt.Errorf("the flags of helm %s: %w", name, err)
	}
	fs := pflag.NewFlagSet("helm "+name, pflag.ContinueOnError)
	for _, f := range flags {
		fs.AddFlag(&pflag.Flag{Name: f.Name, Shorthand: f.Shorthand, DefValue: f.DefValue, Usage: f.Usage, Value: typeValue(f.Type)})
	}
	return fs, nil
}

// printHelmFlags writes the local flags of the Helm command name as JSON.
func printHelmFlags(w io.Writer, name string) error {
	root, err := helmcmd.NewRootCmd(io.Discard, nil, func(bool) {})
	if err != nil {
		return err
	}
	c, _, err := root.Find([]string{name})
	if err != nil {
		return err
	}
	var flags []helmFlag
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		flags = append(flags, helmFlag{f.Name, f.Shorthand, f.DefValue, f.Usage, f.Value.Type()})
	})
	return json.NewEncoder(w).Encode(flags)
}
