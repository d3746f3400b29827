package cli

import (
	"errors"
	"strings"

	"github.com/digestpin/digestpin/pin"
)

// printChanges prints the change set on stderr with -v: its text
// summary, one line per image (pin.ChangeSet.Text), when there was a
// lock file or an earlier output to compare with (without one, -v has
// named each image already). cs is nil without -v and without a file
// that needs it.
func (o *Options) printChanges(cs *pin.ChangeSet, log *Logger) {
	if !o.verbose || cs == nil || cs.Against == "" {
		return
	}
	log.Printf("", "%s", strings.TrimSuffix(string(cs.Text()), "\n"))
}

// differs handles the error of a Pin: a --check that found the registry
// differs from the lock file (a *pin.DiffersError) writes the report and
// the summaries it holds, and prints the change set with -v, before the
// run exits 3; the output and the lock file are not written. It returns
// err, joined with any failure to write them.
func (o *Options) differs(err error, log *Logger) error {
	var de *pin.DiffersError
	if !errors.As(err, &de) {
		return err
	}
	o.printChanges(de.Changes, log)
	if werr := de.WriteFiles(); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}
