#!/usr/bin/env bash
# kube-tools.sh DIR builds the control plane of the rollout tests (e2e/kube)
# into DIR: kube-apiserver, kube-controller-manager, kubectl and etcd, at
# the versions e2e/kube/tools/go.mod pins, with the version ldflags
# Kubernetes' own build sets (hack/lib/version.sh), so the servers report
# their real version. It builds into a temporary folder beside DIR and
# renames it into place, so an interrupted build leaves no half-built DIR.
# make kube-tools runs it only when DIR is missing: DIR's name carries the
# versions, and it lives outside the clone, so a warm run costs nothing.
set -o errexit -o nounset -o pipefail

dir=${1:?usage: kube-tools.sh DIR}
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
cd "$(dirname "$0")/.."
cd e2e/kube/tools
kube=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
[[ $kube =~ ^v([0-9]+)\.([0-9]+)\. ]] || { echo "kube-tools: k8s.io/kubernetes version \"$kube\" in e2e/kube/tools/go.mod" >&2; exit 1; }
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
# The release's date, from the module's own metadata, keeps the build
# reproducible (Kubernetes sets buildDate from SOURCE_DATE_EPOCH the same way).
date=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
ldflags=()
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=("-X '$pkg.gitVersion=$kube'" "-X '$pkg.gitMajor=$major'" "-X '$pkg.gitMinor=$minor'"
    "-X '$pkg.gitTreeState=clean'" "-X '$pkg.buildDate=$date'")
done

mkdir -p "$(dirname "$dir")"
tmp=$(mktemp -d "$dir.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "kube-tools: building Kubernetes $kube and etcd $etcd into $dir"
start=$SECONDS
go build -trimpath -ldflags "${ldflags[*]}" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kubectl
go build -trimpath -o "$tmp/etcd" go.etcd.io/etcd/server/v3
"$tmp/kube-apiserver" --version | grep -qx "Kubernetes $kube" || { echo "kube-tools: kube-apiserver reports $("$tmp/kube-apiserver" --version), want Kubernetes $kube" >&2; exit 1; }
chmod 0755 "$tmp"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "kube-tools: built in $((SECONDS - start)) s"
