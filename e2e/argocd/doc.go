// Package argocd proves the digestpin Config Management Plugin under a
// running Argo CD: its application controller and repo server as local
// processes, argocd-cmp-server as the sidecar, a git server and a registry
// on loopback, and the real Kubernetes control plane of e2e/kube. Argo CD
// is the argo-cd module that tools/ requires, with Argo CD's own replace
// block, built once into a cache folder as the multi-call binary Argo CD
// ships, linked under each command's name, and run as Argo CD's own local
// e2e setup runs it (Procfile: ARGOCD_FAKE_IN_CLUSTER, the kubeconfig as
// the in-cluster destination), with a real redis-server. argocd-cmp-server
// serves scripts/argocd/plugin.yaml as the sidecar does (the environment
// of repo-server-patch.yaml, a seed in its Secret volume; Argo CD's CRDs
// from the Go module cache); the git server is git http-backend behind
// net/http/cgi, the registry go-containerregistry's, in process, and the
// control plane package controlplane's. No Argo CD API server: the tests
// do what it does for a refresh and a sync, through the Application
// resource.
//
// Each scenario counts, through the Kubernetes API, the ReplicaSets the
// deployment controller makes (pods stay Pending: no kubelet, so Argo CD
// reports the Deployments as Progressing; the sync status is what
// matters), and, where it says so, the requests the registry sees.
//
// `make test-argocd` builds what the tests need and runs them; the
// binaries are found through DIGESTPIN_TEST_ARGOCD (the folder with
// argocd-application-controller, argocd-repo-server and argocd-cmp-server),
// DIGESTPIN_TEST_KUBE, DIGESTPIN_TEST_BIN and DIGESTPIN_TEST_HELM4.
// The build (into ${XDG_CACHE_HOME:-~/.cache}/digestpin-test/argocd-v3.3.0/)
// takes 21 minutes of wall time with a cold Go build cache on two busy
// cores, 44 s warm, nothing once the folder exists. Argo CD is ready 20 to
// 50 s after the control plane starts; the scenarios take 2.5 minutes on a
// quiet machine (6.5 on a busy one, most of it the certificate chart's 20
// rounds).
package argocd
