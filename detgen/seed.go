package detgen

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Seed is the secret every generated value derives from: 32 bytes from
// crypto/rand (NewSeed). Whoever holds it can recompute every password,
// private key and certificate a chart generates for any release, so it is
// stored like a private key. Seed's Format method prints a placeholder, so a
// seed passed to fmt by mistake never shows its bytes; MarshalText is the one
// way to write it out.
type Seed [32]byte

// seedPrefix starts the one line of a seed file; the version lets a later
// format coexist.
const seedPrefix = "digestpin-seed-v1:"

// maxSeedFile bounds what ReadSeedFile reads: a seed file is one short line.
const maxSeedFile = 4 << 10

// NewSeed returns a new random seed from crypto/rand.
func NewSeed() (Seed, error) {
	var s Seed
	if _, err := io.ReadFull(rand.Reader, s[:]); err != nil {
		return Seed{}, fmt.Errorf("generating seed: %w", err)
	}
	return s, nil
}

// MarshalText returns the seed file's content without a line end:
// "digestpin-seed-v1:" and the standard base64 of the 32 bytes. A seed file is
// this line and an optional "\n".
func (s Seed) MarshalText() ([]byte, error) {
	out := make([]byte, 0, len(seedPrefix)+base64.StdEncoding.EncodedLen(len(s)))
	out = append(out, seedPrefix...)
	return base64.StdEncoding.AppendEncode(out, s[:]), nil
}

// UnmarshalText parses MarshalText's form (one trailing line end allowed).
// Its errors never include the text.
func (s *Seed) UnmarshalText(text []byte) error {
	text = bytes.TrimSuffix(text, []byte("\n"))
	text = bytes.TrimSuffix(text, []byte("\r"))
	rest, ok := bytes.CutPrefix(text, []byte(seedPrefix))
	if !ok {
		return errors.New("not a digestpin seed: want one line " + seedPrefix + "<base64 of 32 bytes>")
	}
	if bytes.ContainsAny(rest, "\r\n") {
		return errors.New("not a digestpin seed: more than one line")
	}
	var got Seed
	if len(rest) > base64.StdEncoding.EncodedLen(len(got)) {
		return errors.New("seed is longer than 32 bytes")
	}
	// Decode into a buffer of the decoded length: Decode panics when the
	// destination is too short for what it reads.
	buf := make([]byte, base64.StdEncoding.DecodedLen(len(rest)))
	n, err := base64.StdEncoding.Decode(buf, rest)
	switch {
	case err != nil:
		return errors.New("seed is not valid base64")
	case n != len(got):
		return fmt.Errorf("seed has %d bytes, want 32", n)
	}
	copy(got[:], buf)
	clear(buf)
	if got == (Seed{}) {
		return errors.New("seed is all zero bytes")
	}
	*s = got
	return nil
}

// Format prints a placeholder for every verb, so that a Seed given to fmt
// (%v, %x, %d, %#v ...) never shows the secret.
func (s Seed) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, "detgen.Seed(redacted)")
}

// ReadSeedFile reads a seed file written from MarshalText. It refuses, each
// with a one-line error naming path and never the content: a missing file, a
// directory, a symbolic link to either, anything but a regular file, a file
// that group or others may read (mode & 0o077 != 0), an empty file, one over 4
// KiB, and anything but one seed line. A symbolic link is followed (a
// Kubernetes Secret volume holds links); the checks apply to its target.
func ReadSeedFile(path string) (Seed, error) {
	// First, look at the path without opening it: opening a FIFO would
	// block, and the errors should say what the path is.
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if li, lerr := os.Lstat(path); lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
				return Seed{}, fmt.Errorf("seed file %s is a symbolic link to a missing file", path)
			}
			return Seed{}, fmt.Errorf("seed file %s does not exist", path)
		}
		return Seed{}, fmt.Errorf("reading seed file %s: %w", path, cause(err))
	}
	if err := checkSeedFileInfo(path, fi); err != nil {
		return Seed{}, err
	}

	// Next, open it and check the file actually opened, which a rename
	// between Stat and Open could have changed.
	f, err := os.Open(path)
	if err != nil {
		return Seed{}, fmt.Errorf("reading seed file %s: %w", path, cause(err))
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return Seed{}, fmt.Errorf("reading seed file %s: %w", path, cause(err))
	}
	if !os.SameFile(fi, ofi) {
		return Seed{}, fmt.Errorf("seed file %s changed while it was read", path)
	}
	if err := checkSeedFileInfo(path, ofi); err != nil {
		return Seed{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSeedFile+1))
	if err != nil {
		return Seed{}, fmt.Errorf("reading seed file %s: %w", path, cause(err))
	}
	if len(data) > maxSeedFile {
		return Seed{}, fmt.Errorf("seed file %s is larger than 4 KiB: not a seed file", path)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return Seed{}, fmt.Errorf("seed file %s is empty (write one with: digestpin seed > %s)", path, path)
	}
	var s Seed
	if err := s.UnmarshalText(data); err != nil {
		return Seed{}, fmt.Errorf("seed file %s: %w", path, err)
	}
	return s, nil
}

// checkSeedFileInfo applies ReadSeedFile's checks of kind, mode and size.
func checkSeedFileInfo(path string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return fmt.Errorf("seed file %s is a directory", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("seed file %s is not a regular file (%s)", path, fi.Mode().Type())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("seed file %s may be read by group or others (mode %04o): chmod 600 %s", path, fi.Mode().Perm(), path)
	case fi.Size() > maxSeedFile:
		return fmt.Errorf("seed file %s is larger than 4 KiB: not a seed file", path)
	case fi.Size() == 0:
		return fmt.Errorf("seed file %s is empty (write one with: digestpin seed > %s)", path, path)
	}
	return nil
}

// cause returns the reason inside a *fs.PathError, whose message would
// repeat the path the caller's message already names.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
