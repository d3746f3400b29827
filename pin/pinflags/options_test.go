package pinflags

import (
	"errors"
	"fmt"
	"testing"

	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/resolve"
)

// TestOptionErrorNames checks that each pin.Options field and resolve
// option that a library error names becomes the flag that sets it, or the
// name FlagName gives it (the variable that set it, for the command),
// also where one name is a prefix of another ("Cache", "CacheDir",
// "CacheTTL"), and in the field a field needs or excludes.
func TestOptionErrorNames(t *testing.T) {
	t.Parallel()
	for option, flag := range optionFlags {
		if flag == "" {
			continue
		}
		o := &Options{}
		for _, tc := range []struct {
			err  error
			want string
		}{
			{&pin.OptionError{Field: option, Reason: "is wrong"}, "--" + flag + " is wrong"},
			{&pin.OptionError{Field: option, Rule: "needs", Other: "Lock", Reason: "FILE"}, "--" + flag + " needs --lock FILE"},
			{&pin.OptionError{Field: "Frozen", Rule: "excludes", Other: option}, "--frozen excludes --" + flag},
			{fmt.Errorf("configuring resolver: %w", &resolve.OptionError{Option: option, Err: errors.New("is wrong")}), "--" + flag + ": is wrong"},
			{&resolve.OptionError{Option: "WithMirrorOnly", Needs: option}, "--mirror-only: needs a --" + flag},
		} {
			if got := o.LibraryError(tc.err).Error(); got != tc.want {
				t.Errorf("LibraryError(%v) = %q, want %q", tc.err, got, tc.want)
			}
		}
		o.FlagName = func(f string) string {
			if f == flag {
				return "VARIABLE_OF_" + f
			}
			return "--" + f
		}
		if got, want := o.LibraryError(&pin.OptionError{Field: option, Reason: "is wrong"}).Error(), "VARIABLE_OF_"+flag+" is wrong"; got != want {
			t.Errorf("LibraryError(%s named by FlagName) = %q, want %q", option, got, want)
		}
	}
	// The renderer's errors say what they are about.
	if got, want := (&Options{}).LibraryError(&pin.OptionError{Field: "Renderer", Err: errors.New("checksum path X=y covers no image path")}).Error(), "checksum path X=y covers no image path"; got != want {
		t.Errorf("LibraryError(Renderer) = %q, want %q", got, want)
	}
}
