// Package pin is digestpin as a library: it assembles the chain that
// resolves image references (registry, then the resolution cache, then the
// tag policies, then the lock file or the --check comparison), renders a manifest stream with it,
// and prepares the lock file and the JSON report of the run.
//
// The digestpin command and the postrender package are both thin layers
// over a Pinner. A Pin prepares everything and writes nothing the caller
// has not asked for: the lock file and the report are written beside their
// destinations and put in place only by Result.Commit, after the caller
// has written the output; Result.Discard drops them. So a run that fails,
// at any point, leaves every file as it was.
package pin
