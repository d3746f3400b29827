#!/usr/bin/env bash
# Runs every fuzz target of the module briefly: FUZZTIME (default 15s) each,
# one target at a time. A crasher is written to the package's
# testdata/fuzz/<Target>/ and fails the run; commit it with a fix, and it
# runs with every `go test` from then on.
#
#   scripts/fuzz.sh              # every target, 15s each
#   FUZZTIME=60s scripts/fuzz.sh # longer
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-15s}"
# Minimizing a new input from a large seed (a whole chart) can take the
# whole FUZZTIME without one execution counted: bound it.
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-2s}"

# Every package with fuzz targets, and the targets in it.
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*(f \*testing\.F)' "$dir"/*_test.go 2>/dev/null | sed 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/' | sort -u || true)
  for target in $targets; do
    echo "--- $pkg $target ($FUZZTIME)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg"
  done
done
