package cli

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestInvalidValue checks the one form of a refused value: the flag or
// variable, the value unless the cause quotes it, and the cause; Helm's
// flags beside ours keep pflag's own message.
func TestInvalidValue(t *testing.T) {
	t.Parallel()
	o := NewOptions()
	fs := pflag.NewFlagSet("digestpin", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.Bind(fs)
	helm := pflag.NewFlagSet("helm", pflag.ContinueOnError)
	helm.Int("history-max", 10, "")
	both := pflag.NewFlagSet("both", pflag.ContinueOnError)
	both.SetOutput(io.Discard)
	both.AddFlagSet(helm)
	both.AddFlagSet(fs)
	env := func(flag string) string { return envName(flag) }
	for _, tc := range []struct {
		desc string
		args []string
		name func(string) string
		want string
	}{
		{"a flag", []string{"--mode", "sideways"}, flagName, `invalid --mode "sideways": want pin, digest or annotate`},
		{"a variable", []string{"--mode", "sideways"}, env, `invalid DIGESTPIN_MODE "sideways": want pin, digest or annotate`},
		{"a cause that quotes the value", []string{"--checksum-annotation", "a b"}, flagName, `invalid --checksum-annotation: annotation name "a b": the name may hold`},
		{"one of pflag's values", []string{"--cache-ttl", "soon"}, flagName, `invalid --cache-ttl "soon": `},
		{"Helm's flag", []string{"--history-max", "many"}, flagName, `invalid argument "many" for "--history-max" flag`},
		{"not a value", []string{"--no-such-flag"}, flagName, "unknown flag: --no-such-flag"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			perr := both.Parse(tc.args)
			err := invalidValue(perr, fs, tc.name)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("invalidValue(Parse(%q)) = %v, want one starting %q", tc.args, err, tc.want)
			}
			var ive *pflag.InvalidValueError
			if errors.As(perr, &ive) && !errors.Is(err, ive.Unwrap()) {
				t.Errorf("invalidValue(Parse(%q)) = %v, want it to wrap the cause", tc.args, err)
			}
		})
	}
}
