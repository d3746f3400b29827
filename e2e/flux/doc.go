// Package flux proves digestpin's Flux routes (docs/flux.md) under Flux's
// own controllers: source-controller, kustomize-controller and
// helm-controller, built from the modules tools/ requires, with their own
// replace directives, and run as local processes as Flux's `make run`
// runs them (the cluster's kubeconfig, no leader election), against the
// real Kubernetes control plane of e2e/kube. A git server (git
// http-backend, internal/testgit) and a registry (go-containerregistry's,
// in process) serve on loopback; the CI step is scripts/ci/digestpin-ci.sh
// as the Action and the GitLab template run it; the objects of the
// cluster's side are docs/flux.md's own blocks. The keyless signature is
// made and checked against a private Sigstore on loopback (Fulcio,
// TesseraCT, Rekor on Trillian and Debian's PostgreSQL, built from
// sigstore/, and an OIDC issuer of the test's own).
//
// Each scenario counts, through the Kubernetes API, the ReplicaSets the
// deployment controller makes. No kubelet runs: the Deployments have no
// replicas, so that they are ready (helm-controller waits for that) and
// still get a ReplicaSet for each pod template.
//
// `make test-flux` builds what the tests need and runs them; the
// binaries are found through DIGESTPIN_TEST_FLUX (the folder with the
// three controllers), DIGESTPIN_TEST_KUBE, DIGESTPIN_TEST_BIN,
// DIGESTPIN_TEST_KUSTOMIZE, DIGESTPIN_TEST_HELM4 and DIGESTPIN_TEST_COSIGN
// (the CI job's tools), and DIGESTPIN_TEST_SIGSTORE (the Sigstore's
// services); PostgreSQL from /usr/lib/postgresql or DIGESTPIN_TEST_POSTGRES.
package flux
