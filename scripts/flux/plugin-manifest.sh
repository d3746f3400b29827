#!/usr/bin/env bash
# Writes the Flux CLI plugin manifest of a release (the schema
# cli.fluxcd.io/v1beta1, kind Plugin, of the fluxcd/plugins catalog's
# plugins/NAME.yaml) to stdout, from the release folder DIST that
# scripts/release.sh wrote: one platform per digestpin_VERSION_OS_ARCH.tar.gz
# listed in DIST/SHA256SUMS, its checksum that line's. scripts/release.sh
# runs it into DIST/digestpin.flux-plugin.yaml; submit that file to the
# catalog as plugins/digestpin.yaml.
#
# `flux plugin install digestpin` extracts digestpin-helm (the full build,
# which runs every command in one binary) and installs it as
# flux-digestpin; run under that name, digestpin takes its arguments as
# digestpin flux's, so `flux digestpin push ...` is `digestpin flux push ...`.
#
# Usage: plugin-manifest.sh DIST VERSION [RELEASE_URL]
set -o errexit -o nounset -o pipefail

dist=${1:?usage: plugin-manifest.sh DIST VERSION [RELEASE_URL]}
version=${2:?usage: plugin-manifest.sh DIST VERSION [RELEASE_URL]}
url=${3:-https://github.com/digestpin/digestpin/releases/download/v$version}

[ -f "$dist/SHA256SUMS" ] || { echo "plugin-manifest: no $dist/SHA256SUMS" >&2; exit 1; }

cat <<YAML
apiVersion: cli.fluxcd.io/v1beta1
kind: Plugin
name: digestpin
description: Pin every image of a HelmRelease or Kustomization to its digest, and push pinned manifests as signed OCI artifacts
homepage: https://github.com/digestpin/digestpin/blob/main/docs/flux.md
source: https://github.com/digestpin/digestpin
bin: flux-digestpin
versions:
  - version: $version
    platforms:
YAML
n=0
while read -r sum file; do
  case $file in
    "digestpin_${version}_"*.tar.gz) ;;
    *) continue ;;
  esac
  osarch=${file#"digestpin_${version}_"}
  osarch=${osarch%.tar.gz}
  os=${osarch%_*} arch=${osarch#*_}
  extract=digestpin-helm
  [ "$os" != windows ] || extract=digestpin-helm.exe
  printf '      - os: %s\n        arch: %s\n        url: %s/%s\n        checksum: sha256:%s\n        extractPath: %s\n' \
    "$os" "$arch" "$url" "$file" "$sum" "$extract"
  n=$((n + 1))
done <"$dist/SHA256SUMS"
[ "$n" -gt 0 ] || { echo "plugin-manifest: no digestpin_${version}_OS_ARCH.tar.gz in $dist/SHA256SUMS" >&2; exit 1; }
