// Package e2e holds end-to-end tests that run the real digestpin binary,
// the real Helm v3 and v4 CLIs and the Argo CD plugin's commands against
// registries on loopback. `make test` builds the binaries and points the
// tests at them through DIGESTPIN_TEST_BIN, DIGESTPIN_TEST_HELM3 and
// DIGESTPIN_TEST_HELM4 (and at kustomize, for the Argo CD plugin, through
// DIGESTPIN_TEST_KUSTOMIZE).
//
// Every test runs in parallel with the others (t.Parallel): most of their
// time is spent waiting on the processes they run. So a test keeps to
// what is its own: folders from t.TempDir, its own registry, Redis and
// ports (127.0.0.1:0), and settings passed to each command in
// exec.Cmd.Env and exec.Cmd.Dir, never t.Setenv or os.Chdir, which would
// change them for every test at once.
package e2e
