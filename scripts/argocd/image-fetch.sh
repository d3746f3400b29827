#!/usr/bin/env bash
# image-fetch.sh puts the released digestpin, digestpin-helm, Helm and kustomize binaries
# for linux/TARGETARCH into the folder $1. The sidecar image's Dockerfile
# runs it with its build arguments (which Docker passes as environment
# variables); e2e/argocd_install_test.go runs it against a release served
# on loopback. Each archive is checked against its SHA-256 before it is
# unpacked: digestpin's against the release's SHA256SUMS, Helm's and
# kustomize's against the checksums given. Nothing is compiled. On any
# failure it says why in one line and leaves $1 as it was.
#
#   DIGESTPIN_VERSION      a released version, e.g. 0.1.0 (required)
#   DIGESTPIN_RELEASE_URL  where its files are (default: the project's
#                          release of that version; a mirror works)
#   HELM_VERSION           e.g. v4.3.1 (required)
#   HELM_SHA256            of helm-VERSION-linux-ARCH.tar.gz (required)
#   HELM_URL               where Helm's archives are (default get.helm.sh)
#   KUSTOMIZE_VERSION      e.g. v5.8.1 (required)
#   KUSTOMIZE_SHA256       of kustomize_VERSION_linux_ARCH.tar.gz (required)
#   KUSTOMIZE_URL          where kustomize's archives are (default its
#                          GitHub releases)
#   TARGETARCH             amd64 (default) or arm64
set -o errexit -o nounset -o pipefail

fail() {
	echo "digestpin-cmp image: $*" >&2
	exit 1
}

[[ $# == 1 ]] || fail "usage: image-fetch.sh BIN-FOLDER"
dest=$1
need() {
	[[ -n "${!1:-}" ]] || fail "build argument $1 is required ($2)"
}
arch=${TARGETARCH:-amd64}
need DIGESTPIN_VERSION "a released version, e.g. 0.1.0"
need HELM_VERSION "e.g. v4.3.1"
need HELM_SHA256 "the SHA-256 of helm-${HELM_VERSION}-linux-$arch.tar.gz"
need KUSTOMIZE_VERSION "e.g. v5.8.1"
need KUSTOMIZE_SHA256 "the SHA-256 of kustomize_${KUSTOMIZE_VERSION}_linux_$arch.tar.gz"
release=${DIGESTPIN_RELEASE_URL:-https://github.com/digestpin/digestpin/releases/download/v$DIGESTPIN_VERSION}
helm_url=${HELM_URL:-https://get.helm.sh}
kustomize_url=${KUSTOMIZE_URL:-https://github.com/kubernetes-sigs/kustomize/releases/download/kustomize%2F$KUSTOMIZE_VERSION}

tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT

# get downloads URL $1 to $tmp/$2.
get() {
	curl -fsSL --retry 3 -o "$tmp/$2" "$1" 2>/dev/null || fail "cannot download $1"
}

# check verifies $tmp/$1 against the SHA-256 $2.
check() {
	local got
	got=$(sha256sum -- "$tmp/$1" | cut -d' ' -f1)
	[[ "$got" == "$2" ]] || fail "$1 has the SHA-256 $got, want $2: refusing it"
}

dp=digestpin_${DIGESTPIN_VERSION}_linux_$arch.tar.gz
get "$release/SHA256SUMS" SHA256SUMS
get "$release/$dp" "$dp"
want=$(awk -v f="$dp" '$2 == f || $2 == "*" f { print $1; exit }' "$tmp/SHA256SUMS")
[[ -n "$want" ]] || fail "$release/SHA256SUMS has no line for $dp: refusing it"
check "$dp" "$want"

helm=helm-$HELM_VERSION-linux-$arch.tar.gz
get "$helm_url/$helm" "$helm"
check "$helm" "$HELM_SHA256"

kz=kustomize_${KUSTOMIZE_VERSION}_linux_$arch.tar.gz
get "$kustomize_url/$kz" "$kz"
check "$kz" "$KUSTOMIZE_SHA256"

# Unpacked only now, all three checked; into $dest only when all three
# unpacked.
mkdir "$tmp/bin"
tar -xzf "$tmp/$dp" -C "$tmp/bin" digestpin digestpin-helm 2>/dev/null || fail "$dp holds no digestpin and digestpin-helm"
tar -xzf "$tmp/$helm" -C "$tmp/bin" --strip-components 1 "linux-$arch/helm" 2>/dev/null || fail "$helm holds no linux-$arch/helm"
tar -xzf "$tmp/$kz" -C "$tmp/bin" kustomize 2>/dev/null || fail "$kz holds no kustomize"
# Each a regular file of its own: install copies what a link points at (a
# file of the build into the image), and blocks on a FIFO.
for f in digestpin digestpin-helm helm kustomize; do
	[[ -n "$(find "$tmp/bin/$f" -prune -type f -links 1 2>/dev/null)" ]] ||
		fail "$f from its archive is not a regular file (a link, a folder or a device): refusing it"
done
mkdir -p -- "$dest"
install -m 0755 "$tmp/bin/digestpin" "$tmp/bin/digestpin-helm" "$tmp/bin/helm" "$tmp/bin/kustomize" "$dest/"
