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

# The test binaries, built once per package with the fuzzing
# instrumentation (go test -fuzz would link one for every target again).
bins=$(mktemp -d)
trap 'rm -rf "$bins"' EXIT
cache=$(go env GOCACHE)/fuzz

# Every package with fuzz targets, and the targets in it.
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*(f \*testing\.F)' "$dir"/*_test.go 2>/dev/null | sed 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/' | sort -u || true)
  [ -n "$targets" ] || continue
  bin=$bins/$(basename "$dir").$RANDOM.test
  go test -c -fuzz . -o "$bin" "$pkg"
  for target in $targets; do
    echo "--- $pkg $target ($FUZZTIME)"
    # As go test -fuzz runs it: in the package's folder (its testdata/fuzz
    # corpus), with the generated corpus in the build cache.
    (cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^${target}\$" -test.fuzztime "$FUZZTIME" \
      -test.fuzzminimizetime "$FUZZMINIMIZETIME" -test.fuzzcachedir "$cache/$pkg" -test.timeout 10m)
  done
done
