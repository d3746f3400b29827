// Package controlplane starts a real Kubernetes control plane on loopback
// for tests: etcd, kube-apiserver and kube-controller-manager, built by
// scripts/kube-tools.sh, with locally generated certificates and a static
// token. The rollout tests of e2e/kube and the Argo CD tests of e2e/argocd
// run on it.
package controlplane
