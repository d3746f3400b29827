package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// flagName names a flag as the command line sets it.
func flagName(flag string) string { return "--" + flag }

// invalidValue is the error of a value that a flag's Set refused, named
// as the person set it: "invalid --mode "sideways": want pin, digest or
// annotate", or with the variable, DIGESTPIN_MODE, in place of the flag.
// It is the one form of these errors, on the command line and from the
// environment, for the flags of fs; other errors, and those of Helm's
// flags beside them, are returned as they are. The value is left out
// where the cause quotes it already ("invalid --checksum-annotation:
// annotation name "a b": …").
func invalidValue(err error, fs *pflag.FlagSet, name func(flag string) string) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) || fs.Lookup(ive.GetFlag().Name) == nil {
		return err
	}
	cause := ive.Unwrap()
	if strings.Contains(cause.Error(), strconv.Quote(ive.GetValue())) {
		return fmt.Errorf("invalid %s: %w", name(ive.GetFlag().Name), cause)
	}
	return fmt.Errorf("invalid %s %q: %w", name(ive.GetFlag().Name), ive.GetValue(), cause)
}
