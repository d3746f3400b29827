package testfiles

import (
	"os"
	"testing"
)

// SkipTB is the part of testing.TB that Tool uses.
type SkipTB interface {
	TB
	Skip(args ...any)
}

// Tool returns the path that the environment variable env names, when
// something is there: a tool the Makefile built for the tests. Outside CI
// a missing tool skips the test with message missing; in CI (CI=true) it
// fails it, because CI must run everything.
func Tool(t SkipTB, env, missing string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err == nil { //nolint:gosec // the path the Makefile gives the tests
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal(missing)
	}
	t.Skip(missing)
	return ""
}

// Slow skips a slow test under `go test -short`, which `make test-quick`
// runs: the inner loop keeps the unit tests and the fast end-to-end
// cases. `make test` and CI run without -short, so they run it; in CI
// (CI=true) -short is an error, so that no slow test is left out there.
func Slow(t SkipTB) {
	t.Helper()
	if !testing.Short() {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("go test -short in CI: CI runs every test")
	}
	t.Skip("slow: left out by go test -short (make test-quick); make test runs it")
}
