// Package cmpserver holds the end-to-end tests of digestpin's Argo CD
// Config Management Plugin (scripts/argocd/) under Argo CD's own
// argocd-cmp-server, v3.3.0, fed the way Argo CD's repo-server feeds it:
// the Application's repository as a compressed stream over the plugin's
// unix socket, with the Application's environment, through Argo CD's own
// client packages (cmpserver/apiclient, util/cmp, util/app/discovery).
//
// It is a module of its own, so that digestpin does not depend on Argo CD.
// `make test` builds the server (cmd/argocd-cmp-server, from Argo CD's
// package cmd/argocd-cmp-server/commands) into the cache folder, the
// digestpin binary and the Helm CLI, and points the tests at them through
// DIGESTPIN_TEST_ARGOCD_CMP_SERVER, DIGESTPIN_TEST_BIN and
// DIGESTPIN_TEST_HELM4.
package cmpserver
