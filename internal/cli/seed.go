package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/detgen"
)

// runSeed is `digestpin seed [FILE]`: it makes a new seed for digestpin
// template and writes it to FILE (created with mode 0600, never over an
// existing file) or to stdout. A stdout that is a regular file (`digestpin
// seed > FILE`) is made mode 0600 first, whatever the umask made it; a
// terminal is refused, so that the secret is not left on a screen or in a
// scrollback.
func runSeed(args []string, stdout, stderr io.Writer) error {
	err := func() error {
		if len(args) > 1 || (len(args) == 1 && (args[0] == "" || args[0][0] == '-')) {
			if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
				fmt.Fprint(stderr, "Usage: digestpin seed > FILE, or digestpin seed FILE\n\nMakes a new secret seed for digestpin template --seed-file (32 random bytes).\n")
				return pflag.ErrHelp
			}
			return &UsageError{errors.New("usage: digestpin seed > FILE, or digestpin seed FILE")}
		}
		seed, err := detgen.NewSeed()
		if err != nil {
			return fmt.Errorf("making a seed: %w", err)
		}
		text, err := seed.MarshalText()
		if err != nil {
			return fmt.Errorf("making a seed: %w", err)
		}
		text = append(text, '\n')
		if len(args) == 1 {
			return writeSeedFile(args[0], text)
		}
		if f, ok := stdout.(*os.File); ok {
			fi, err := f.Stat()
			if err != nil {
				return fmt.Errorf("writing the seed to stdout: %w", err)
			}
			switch {
			case fi.Mode()&os.ModeCharDevice != 0 && isTerminal(f):
				return &UsageError{errors.New("digestpin seed writes a secret: redirect it to a file (digestpin seed > FILE) or name one (digestpin seed FILE)")}
			case fi.Mode().IsRegular():
				if err := f.Chmod(0o600); err != nil {
					return fmt.Errorf("making the seed file on stdout mode 0600: %w", err)
				}
			}
		}
		if _, err := stdout.Write(text); err != nil {
			return fmt.Errorf("writing the seed to stdout: %w", err)
		}
		return nil
	}()
	if err != nil && !errors.Is(err, pflag.ErrHelp) {
		return reported(stderr, err)
	}
	return err
}

// writeSeedFile creates path, mode 0600, with the seed; an existing file
// or link is never replaced, so that a seed in use is not lost by mistake.
func writeSeedFile(path string, text []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) //nolint:gosec // the file the user named
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return &UsageError{fmt.Errorf("seed file %s exists already: digestpin seed never replaces a seed (losing it regenerates every generated value)", path)}
		}
		return fmt.Errorf("writing seed file: %w", err)
	}
	if _, err := f.Write(text); err != nil {
		_ = f.Close()
		_ = os.Remove(path) //nolint:gosec // the file this run created
		return fmt.Errorf("writing seed file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(path) //nolint:gosec // the file this run created
		return fmt.Errorf("writing seed file %s: %w", path, err)
	}
	return nil
}
