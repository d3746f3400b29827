package testfiles

import "os"

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
