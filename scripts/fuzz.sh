#!/usr/bin/env bash
# Runs every fuzz target of the module briefly: FUZZTIME (default 8s) each,
# one target at a time. A crasher is written to the package's
# testdata/fuzz/<Target>/ and fails the run; commit it with a fix, and it
# runs with every `go test` from then on.
#
#   scripts/fuzz.sh              # every target, 8s each
#   FUZZTIME=60s scripts/fuzz.sh # longer
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-8s}"
# Minimizing a new input from a large seed (a whole chart) can take the
# whole FUZZTIME without one execution counted: bound it.
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-2s}"

# The test binaries, built once per package with the fuzzing
# instrumentation (go test -fuzz would link one for every target again).
bins=$(mktemp -d)
trap 'rm -rf "$bins"' EXIT
cache=$(go env GOCACHE)/fuzz

# Go 1.26's fuzzing coordinator can fail a target with a bare "context
# deadline exceeded" at the end of -fuzztime when a worker is slow to stop
# (go.dev/issue/75804, fixed in Go 1.27), having found nothing. A failure
# that wrote no crasher into testdata/fuzz/<Target>/ and printed only that
# is run once more; a crasher, or any other failure, fails at once.
fuzz_one() {
  local dir=$1 bin=$2 target=$3 cachedir=$4 attempt out before after status
  for attempt in 1 2; do
    out=$(mktemp)
    before=$(ls "$dir/testdata/fuzz/$target" 2>/dev/null || true)
    status=0
    # As go test -fuzz runs it: in the package's folder (its testdata/fuzz
    # corpus), with the generated corpus in the build cache.
    (cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^${target}\$" -test.fuzztime "$FUZZTIME" \
      -test.fuzzminimizetime "$FUZZMINIMIZETIME" -test.fuzzcachedir "$cachedir" -test.timeout 10m) 2>&1 |
      tee "$out" || status=$?
    after=$(ls "$dir/testdata/fuzz/$target" 2>/dev/null || true)
    if [ "$status" -eq 0 ]; then
      rm -f "$out"
      return 0
    fi
    if [ "$attempt" -eq 1 ] && [ "$before" = "$after" ] && coordinator_race "$out"; then
      echo "--- $target: the coordinator's deadline race (go.dev/issue/75804), no crasher written: once more"
      rm -f "$out"
      continue
    fi
    rm -f "$out"
    return "$status"
  done
}

# coordinator_race tells whether a failed run's output shows nothing but
# the coordinator's own deadline error: no "--- FAIL" line with a reason
# other than it, no panic, no "Failing input" line.
coordinator_race() {
  grep -q '^    context deadline exceeded$' "$1" &&
    ! grep -q -e 'Failing input written' -e '^panic:' -e 'fuzz: elapsed: .*, minimizing' "$1" &&
    [ "$(grep -c -v -e '^fuzz: ' -e '^--- FAIL: ' -e '^    context deadline exceeded$' -e '^FAIL$' -e '^PASS$' -e '^$' -e '^warning: ' "$1")" -eq 0 ]
}

# Every package with fuzz targets, and the targets in it.
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*(f \*testing\.F)' "$dir"/*_test.go 2>/dev/null | sed 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/' | sort -u || true)
  [ -n "$targets" ] || continue
  bin=$bins/$(basename "$dir").$RANDOM.test
  go test -c -fuzz . -o "$bin" "$pkg"
  for target in $targets; do
    echo "--- $pkg $target ($FUZZTIME)"
    fuzz_one "$dir" "$bin" "$target" "$cache/$pkg"
  done
done
