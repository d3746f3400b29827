// Package e2e holds end-to-end tests that run the real digestpin binary,
// the real Helm v3 and v4 CLIs and the Argo CD plugin's commands against
// registries on loopback. `make test` builds the binaries and points the
// tests at them through DIGESTPIN_TEST_BIN, DIGESTPIN_TEST_HELM3 and
// DIGESTPIN_TEST_HELM4 (and at kustomize, for the Argo CD plugin, through
// DIGESTPIN_TEST_KUSTOMIZE).
package e2e
