#!/usr/bin/env bash
# Writes the release files of the version in plugin.yaml into DIST (default
# dist/), for each OS/ARCH of PLATFORMS (default: the six below). `make
# release` runs it. For VERSION and each platform:
#
#   digestpin_VERSION_OS_ARCH.tar.gz        digestpin[.exe], digestpin-helm[.exe],
#                                           LICENSE, README.md,
#                                           digestpin-lock.sh, digestpin-ci.sh,
#                                           argocd/plugin.yaml, init.sh, generate.sh:
#                                           what the plugins' install hook and the
#                                           Argo CD plugin's init container download
#   digestpin-plugin-VERSION-OS-ARCH.tgz    the Helm 3 plugin with both binaries,
#                                           for `helm plugin install URL`
#
# digestpin is the module's root main, without Helm's engine;
# digestpin-helm (cmd/digestpin-helm), the full build, is
# what it runs for template, install, upgrade and argocd refresh (see
# docs/install.md). Both come from one tree and carry one version.
#
# and once:
#
#   digestpin-postrenderer-VERSION.tgz      the Helm 4 post-renderer plugin
#                                           (`helm plugin package`); its install
#                                           hook downloads the binary archive
#   SHA256SUMS                              over every file above
#   digestpin.flux-plugin.yaml              the Flux CLI plugin manifest
#                                           (scripts/flux/plugin-manifest.sh),
#                                           for the fluxcd/plugins catalog,
#                                           with the archives' checksums
#
# HELM names a Helm 4 CLI; HELM_SIGN its signing flags (default
# --sign=false), e.g. '--key "Your Name" --keyring ~/.gnupg/secring.gpg',
# which adds digestpin-postrenderer-VERSION.tgz.prov.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64}
DIST=${DIST:-dist}
HELM=${HELM:-helm}
HELM_SIGN=${HELM_SIGN:---sign=false}
H4_PLUGIN=plugin/digestpin-postrenderer

version() { sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$1" | head -n 1; }

VERSION=$(version plugin.yaml)
if [ -z "$VERSION" ] || [ "$(version "$H4_PLUGIN/plugin.yaml")" != "$VERSION" ]; then
  echo "release: plugin.yaml and $H4_PLUGIN/plugin.yaml must carry one version (have \"$VERSION\" and \"$(version "$H4_PLUGIN/plugin.yaml")\")" >&2
  exit 1
fi

rm -rf "$DIST"
mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# archive writes the gzipped tar $1 of folder $2's content, with the
# entries named as the install hook and Helm 3 expect them: "digestpin",
# "plugin.yaml", never "./digestpin".
archive() {
  local entries
  mapfile -t entries < <(cd "$2" && ls -A)
  tar -C "$2" -czf "$1" "${entries[@]}"
}

for p in $PLATFORMS; do
  os=${p%/*} arch=${p#*/}
  exe=digestpin helm_exe=digestpin-helm
  [ "$os" != windows ] || exe=digestpin.exe helm_exe=digestpin-helm.exe
  bin=$stage/bin-$os-$arch
  mkdir -p "$bin"
  echo "release: digestpin $VERSION for $os/$arch"
  GOOS=$os GOARCH=$arch CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$bin/$exe" .
  GOOS=$os GOARCH=$arch CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$bin/$helm_exe" ./cmd/digestpin-helm
  cp LICENSE README.md "$bin/"
  # The CI steps: the GitLab CI template runs them from this archive.
  cp scripts/ci/digestpin-lock.sh scripts/ci/digestpin-ci.sh "$bin/"
  # The Argo CD plugin: the init container of argocd-values.yaml and
  # repo-server-patch.yaml places these beside the binary.
  mkdir -p "$bin/argocd"
  cp scripts/argocd/plugin.yaml scripts/argocd/init.sh scripts/argocd/generate.sh "$bin/argocd/"
  archive "$DIST/digestpin_${VERSION}_${os}_${arch}.tar.gz" "$bin"

  h3=$stage/h3-$os-$arch
  mkdir -p "$h3/bin" "$h3/scripts"
  cp plugin.yaml LICENSE "$h3/"
  cp scripts/install-binary.sh "$h3/scripts/"
  cp "$bin/$exe" "$bin/$helm_exe" "$h3/bin/"
  archive "$DIST/digestpin-plugin-$VERSION-$os-$arch.tgz" "$h3"
done

h4=$stage/h4/digestpin-postrenderer
mkdir -p "$h4/scripts"
cp "$H4_PLUGIN/plugin.yaml" LICENSE "$h4/"
cp scripts/install-binary.sh "$h4/scripts/"
# shellcheck disable=SC2086 # HELM_SIGN is a list of flags
"$HELM" plugin package $HELM_SIGN -d "$DIST" "$h4" >/dev/null

cd "$DIST"
if command -v sha256sum >/dev/null; then
  sha256sum -- * >"$stage/SHA256SUMS"
else
  shasum -a 256 -- * >"$stage/SHA256SUMS"
fi
mv "$stage/SHA256SUMS" SHA256SUMS
"$ROOT/scripts/flux/plugin-manifest.sh" . "$VERSION" >"$stage/flux-plugin.yaml"
mv "$stage/flux-plugin.yaml" digestpin.flux-plugin.yaml
files=(*)
echo "release: ${#files[@]} files in $DIST:"
ls -1
