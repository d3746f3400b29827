package cli

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/digestpin/digestpin/internal/atomicfile"
)

// file is a file of the run, for telling whether two names are one file:
// the output, the input, a file the run reads, a file it writes.
type file struct {
	what string      // for messages: "the output (stdout)", "the file of --lock"
	fi   os.FileInfo // nil when the file does not exist (yet)
	path string      // without fi: where it will be created, absolute, links followed
}

// same reports whether a and b are one file. Character devices never are:
// a terminal or /dev/null can be named twice without harm (and a lock
// file or report there is refused as not a regular file anyway).
func (a file) same(b file) bool {
	switch {
	case a.fi != nil && b.fi != nil:
		return os.SameFile(a.fi, b.fi) && a.fi.Mode()&fs.ModeCharDevice == 0
	case a.fi == nil && b.fi == nil:
		return a.path != "" && a.path == b.path
	}
	return false
}

// streamFile is the file behind a stream of the process, if it is one.
func streamFile(what string, s any) file {
	f, ok := s.(*os.File)
	if !ok {
		return file{what: what}
	}
	fi, err := f.Stat()
	if err != nil {
		return file{what: what}
	}
	return file{what: what, fi: fi}
}

// namedFile is the file at path, symbolic links followed: /dev/stdout and
// /proc/self/fd/1 are the file behind stdout. A file that does not exist
// is named by where it would be created.
func namedFile(what, path string) file {
	if fi, err := os.Stat(path); err == nil {
		return file{what: what, fi: fi}
	}
	dest, err := atomicfile.Destination(path)
	if err != nil {
		return file{what: what}
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(dest))
	if err != nil {
		return file{what: what}
	}
	abs, err := filepath.Abs(filepath.Join(dir, filepath.Base(dest)))
	if err != nil {
		return file{what: what}
	}
	return file{what: what, path: abs}
}

// NamedInput is another file a run reads, for checkTargets: what it is
// (for the message) and its path.
type NamedInput struct{ What, Path string }

// checkTargets refuses a file the run writes (the log file, the lock file,
// the report) that is also the output on stdout, the input, a file the
// run reads, or another file it writes: the lock file would replace the
// manifests, the log would go into them or into the lock file, and the
// input would be lost. Only the lock file may be the --lock file. A log
// file that is one of them is dropped from the options, so that not even
// the error goes into it: run checks before it opens the log file. It
// looks only, at the names and the open streams, and blocks on nothing.
func (o *Options) checkTargets(stdin, stdout any, inputs ...NamedInput) error {
	output := streamFile("the output (stdout)", stdout)
	input := streamFile("the input (stdin)", stdin)
	if o.filename != "" && o.filename != "-" {
		flag := "-f"
		if o.fromEnv["filename"] {
			flag = envName("filename")
		}
		input = namedFile(fmt.Sprintf("the input (%s %s)", flag, o.filename), o.filename)
	}
	known := []file{output, input}
	for _, in := range inputs {
		if in.Path != "" {
			known = append(known, namedFile(in.What, in.Path))
		}
	}
	lock := -1 // the index of the --lock file in known
	for _, r := range []struct {
		flag  string
		paths []string
	}{
		{"lock", []string{o.Pin.Lock}},
		{"diff-against", []string{o.Pin.DiffAgainst}},
		{"config", []string{o.Config}},
		{"pull-secret", o.Registry.PullSecrets},
		{"ca-file", o.Registry.CAFiles},
		{"redis-password-file", []string{o.Redis.PasswordFile}},
		{"redis-ca-file", []string{o.Redis.CAFile}},
	} {
		for _, p := range r.paths {
			if p == "" {
				continue
			}
			if r.flag == "lock" {
				lock = len(known)
			}
			known = append(known, namedFile("the file of "+o.Name(r.flag), p))
		}
	}
	// Each target against what the run reads and the targets before it.
	check := func(flag, path string, target file) error {
		for i, k := range known {
			if flag == "write-lock" && i == lock {
				continue // --write-lock may update the --lock file
			}
			if target.same(k) {
				return fmt.Errorf("%s %s is %s: give it a file of its own", o.Name(flag), path, k.what)
			}
		}
		target.what = "the file of " + o.Name(flag)
		known = append(known, target)
		return nil
	}
	for _, t := range []struct{ flag, path string }{{"log-file", o.logFile}, {"write-lock", o.Pin.WriteLock}, {"report", o.Pin.Report}, {"summary", o.Pin.Summary}, {"summary-text", o.Pin.SummaryText}} {
		if t.path == "" {
			continue
		}
		if err := check(t.flag, t.path, namedFile("", t.path)); err != nil {
			if t.flag == "log-file" {
				o.logFile = "" // not even this error goes into it
			}
			return err
		}
	}
	return nil
}

// Preamble is how every command starts once its flags are parsed (perr is
// the parse's error; see names where its help is): the environment under
// the flags, the retired flags, the files that a lock file, report or log
// must not be written over (the streams, and inputs such as the seed and
// the values files; checked before the log file is opened, so that not
// even this error goes into one of them), the logger, bound to ctx, and,
// where warn says so (nil: always), the DIGESTPIN_* variables that set
// nothing. err is the first
// of these errors as the command reports it; the caller closes log.
func (o *Options) Preamble(ctx context.Context, flags *pflag.FlagSet, perr error, see string, warn func() bool, stdin, stdout any, stderr io.Writer, inputs func() []NamedInput) (log *Logger, err error) {
	// The environment applies even after a bad flag, so that
	// DIGESTPIN_LOG_FILE and DIGESTPIN_TTY_ERRORS carry its message too.
	eerr := o.setFromEnv(flags, os.LookupEnv)
	// A retired flag fails the run first, whatever else is wrong with it:
	// its message says what to do instead.
	rerr := o.checkRetired(flags)
	var in []NamedInput
	if inputs != nil {
		in = inputs() // after the environment, which may name them
	}
	terr := o.checkTargets(stdin, stdout, in...)
	log = newLogger(stderr, o)
	log.bound(ctx)
	if rerr == nil && (warn == nil || warn()) {
		for _, w := range envWarnings(flags, os.Environ()) {
			log.Warnf("%s", w)
		}
	}
	switch {
	case rerr != nil:
		return log, rerr
	case perr != nil:
		return log, &UsageError{fmt.Errorf("%w (see %s)", invalidValue(perr, flags, flagName), see)}
	case eerr != nil:
		return log, &UsageError{eerr}
	case terr != nil:
		return log, &UsageError{terr}
	}
	return log, nil
}
