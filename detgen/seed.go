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
	"path/filepath"
	"strings"
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
// KiB, and anything but one seed line. A symbolic link is followed; the
// checks apply to its target.
//
// One exception to the mode check: a file of a Kubernetes Secret volume, as
// the kubelet lays one out (see secretVolumeFile), may be readable by its
// group too (mode 0440, never more). The kubelet makes a Secret's files
// group-readable whenever the pod has an fsGroup, whatever the volume's
// defaultMode, and that is the only way a non-root container can read a
// file the kubelet writes: the group is the pod's own, and the volume is
// visible only in the containers that mount it. When the kubelet swaps the
// volume's files (the Secret changed) while the file is read, it is read
// again, once.
func ReadSeedFile(path string) (Seed, error) {
	s, err := readSeedFile(path)
	if errors.Is(err, errSeedChanged) {
		s, err = readSeedFile(path)
	}
	return s, err
}

// errSeedChanged is readSeedFile's error when the file it opened is not the
// one it looked at, or no longer the one the path names.
var errSeedChanged = errors.New("changed while it was read")

// readSeedFile is one attempt of ReadSeedFile.
func readSeedFile(path string) (Seed, error) {
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
		return Seed{}, fmt.Errorf("seed file %s %w", path, errSeedChanged)
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

// checkSeedFileInfo applies ReadSeedFile's checks of kind, mode and size to
// fi, the file path names.
func checkSeedFileInfo(path string, fi fs.FileInfo) error {
	perm := fi.Mode().Perm()
	switch {
	case fi.IsDir():
		return fmt.Errorf("seed file %s is a directory", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("seed file %s is not a regular file (%s)", path, fi.Mode().Type())
	case perm&0o077 != 0:
		volume, err := secretVolumeFile(path, fi)
		switch {
		case err != nil:
			return err
		case volume && perm&0o037 == 0:
			// Group-readable, in a Secret volume: what fsGroup makes.
		case volume:
			return fmt.Errorf("seed file %s may be read by others or written by its group (mode %04o): give its Kubernetes Secret volume defaultMode 0400", path, perm)
		default:
			return fmt.Errorf("seed file %s may be read by group or others (mode %04o): chmod 600 %s", path, perm, path)
		}
	}
	switch {
	case fi.Size() > maxSeedFile:
		return fmt.Errorf("seed file %s is larger than 4 KiB: not a seed file", path)
	case fi.Size() == 0:
		return fmt.Errorf("seed file %s is empty (write one with: digestpin seed > %s)", path, path)
	}
	return nil
}

// secretVolumeFile reports whether path is a file of a Kubernetes Secret
// volume (or of any volume the kubelet writes with its atomic writer:
// ConfigMap, projected, downward API) and fi the file it names. The
// kubelet writes the files into a hidden folder and makes them visible
// through two symbolic links, so that it can swap them all at once:
//
//	DIR/NAME          -> ..data/NAME
//	DIR/..data        -> ..2006_01_02_15_04_05.123456789
//	DIR/..2006_01_02_15_04_05.123456789/NAME   the file
//
// It holds only for exactly that layout: NAME a link to ..data/NAME,
// ..data a link to a folder beside it whose name starts with "..", and
// the file in it a regular file. The error is errSeedChanged when the
// layout is there but names another file than fi (the kubelet swapped the
// files in between).
func secretVolumeFile(path string, fi fs.FileInfo) (bool, error) {
	dir, name := filepath.Split(path)
	if name == "" {
		return false, nil
	}
	if target, err := os.Readlink(path); err != nil || target != filepath.Join(dataDirName, name) {
		return false, nil
	}
	ts, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil || !strings.HasPrefix(ts, "..") || ts == ".." || ts == dataDirName || strings.ContainsAny(ts, "/"+string(filepath.Separator)) {
		return false, nil
	}
	if ti, err := os.Lstat(filepath.Join(dir, ts)); err != nil || !ti.IsDir() {
		return false, nil
	}
	ri, err := os.Lstat(filepath.Join(dir, ts, name))
	if err != nil || !ri.Mode().IsRegular() {
		return false, nil
	}
	if !os.SameFile(ri, fi) {
		return false, fmt.Errorf("seed file %s %w", path, errSeedChanged)
	}
	return true, nil
}

// dataDirName is the link through which the kubelet's atomic writer shows
// a volume's current files.
const dataDirName = "..data"

// cause returns the reason inside a *fs.PathError, whose message would
// repeat the path the caller's message already names.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
