#!/bin/sh
# install-binary.sh puts working digestpin binaries into a Helm plugin
# folder: bin/digestpin and bin/digestpin-helm, the full build, which
# digestpin runs for template, install, upgrade and argocd refresh (see
# docs/install.md). Helm runs it as the install and update hook of both plugins (the
# Helm 3 plugin at the repository root and the Helm 4 post-renderer plugin in
# plugin/digestpin-postrenderer), with HELM_PLUGIN_DIR set. In this order:
#
#   1. keep bin/ when bin/digestpin reports the version in plugin.yaml and
#      runs digestpin template (a plugin archive of a release ships both);
#   2. download the release archive digestpin_VERSION_OS_ARCH.tar.gz and
#      SHA256SUMS from the release URL, check the archive against its line in
#      SHA256SUMS, and install the two binaries in it;
#   3. only when the download fails (not when a checksum is wrong or
#      missing) and the plugin is a source checkout with Go on PATH: build
#      both from that source.
#
# When an install fails, the hook removes the plugin Helm just put into its
# plugins folder again (Helm itself leaves it there, unusable), and says why
# in one line. A failed update keeps the binary that was there, if any
# (Helm 3's update of a git install deletes it first: then the hook
# removes the plugin too). Settings:
#
#   DIGESTPIN_PLUGIN_URL=URL      where the release files are (default
#                                 https://github.com/digestpin/digestpin/releases/download/vVERSION),
#                                 e.g. a mirror in an air-gapped network
#   DIGESTPIN_PLUGIN_BUILD=true   build from the checkout with Go; never
#                                 download, never keep an older build
#   DIGESTPIN_PLUGIN_BINARY=FILE  install FILE instead (a binary you have),
#                                 and the digestpin-helm beside it if there is
#                                 one (digestpin-helm given as FILE needs none)
#   DIGESTPIN_PLUGIN_SKIP=true    do nothing (a packager puts bin/ in place)
set -e

PROJECT=digestpin
MODULE=github.com/digestpin/digestpin
RELEASES=https://github.com/digestpin/digestpin/releases/download
EVENT=
TMP_BIN=
TMP_HELM_BIN=
TMP_DIR=

info() { echo "$PROJECT plugin: $*"; }

# fail says why in one line on stderr and exits. A failed install run by
# Helm, or a failed update that leaves no binary (Helm 3 deletes it before
# the hook runs), first removes the plugin Helm installed (see removePlugin).
fail() {
  msg=$*
  if { [ "$EVENT" = install ] || [ ! -x "${BIN:-/nonexistent}" ]; } && removePlugin; then
    msg="$msg; the plugin was removed, install it again once this is fixed"
  fi
  echo "$PROJECT plugin: error: $msg" >&2
  exit 1
}

cleanup() {
  rc=$?
  if [ -n "$TMP_BIN" ]; then rm -f "$TMP_BIN"; fi
  if [ -n "$TMP_HELM_BIN" ]; then rm -f "$TMP_HELM_BIN"; fi
  if [ -n "$TMP_DIR" ]; then rm -rf "$TMP_DIR"; fi
  exit "$rc"
}

# initPluginDir sets PLUGIN_DIR, EXE and BIN (bin/digestpin.exe on
# Windows, where Helm finds it as bin/digestpin), and HELM_EXE and
# HELM_BIN for digestpin-helm. Run by hand, the script works on the
# plugin folder it sits in.
initPluginDir() {
  PLUGIN_DIR=${HELM_PLUGIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
  [ -f "$PLUGIN_DIR/plugin.yaml" ] || fail "no plugin.yaml in $PLUGIN_DIR"
  EXE=$PROJECT HELM_EXE=$PROJECT-helm
  [ "$OS" != windows ] || EXE=$PROJECT.exe HELM_EXE=$PROJECT-helm.exe
  BIN=$PLUGIN_DIR/bin/$EXE
  HELM_BIN=$PLUGIN_DIR/bin/$HELM_EXE
}

# readVersion sets VERSION from the plugin's plugin.yaml, the one version
# number of the project (the Makefile reads it the same way).
readVersion() {
  VERSION=$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$PLUGIN_DIR/plugin.yaml" | head -n 1)
  [ -n "$VERSION" ] || fail "no version in $PLUGIN_DIR/plugin.yaml"
}

# initOS sets OS as Go names it.
initOS() {
  OS=$(uname -s | tr '[:upper:]' '[:lower:]')
  case $OS in
  mingw* | msys* | cygwin*) OS=windows ;;
  esac
}

# initArch sets ARCH as Go names it.
initArch() {
  ARCH=$(uname -m)
  case $ARCH in
  x86_64 | amd64) ARCH=amd64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  esac
}

# verifySupported fails unless a release has a binary for OS/ARCH.
verifySupported() {
  case $OS/$ARCH in
  linux/amd64 | linux/arm64 | darwin/amd64 | darwin/arm64 | windows/amd64 | windows/arm64) ;;
  *) fail "no release binary for $OS/$ARCH: build one from a checkout with DIGESTPIN_PLUGIN_BUILD=true, or set DIGESTPIN_PLUGIN_BINARY" ;;
  esac
}

# removePlugin removes the plugin Helm installed into its plugins folder,
# as `helm plugin uninstall` would, and reports whether it did. It touches
# nothing unless HELM_PLUGIN_DIR is an entry of a Helm plugins folder whose
# plugin.yaml names the plugin Helm is installing; an entry that is a
# symbolic link (an install from a local folder) loses only the link.
removePlugin() {
  dir=${HELM_PLUGIN_DIR%/}
  name=${HELM_PLUGIN_NAME:-}
  case $name in
  "$PROJECT" | "$PROJECT-postrenderer") ;;
  *) return 1 ;;
  esac
  [ -n "$dir" ] && [ -f "$dir/plugin.yaml" ] || return 1
  grep -q "^name: *\"\{0,1\}$name\"\{0,1\} *\$" "$dir/plugin.yaml" || return 1
  parent=$(cd -P "$(dirname "$dir")" 2>/dev/null && pwd) || return 1
  found=
  old_ifs=$IFS
  IFS=:
  for folder in ${HELM_PLUGINS:-} "${HELM_DATA_HOME:-/nonexistent}/plugins"; do
    if [ -n "$folder" ] && [ "$(cd -P "$folder" 2>/dev/null && pwd)" = "$parent" ]; then
      found=1
    fi
  done
  IFS=$old_ifs
  [ -n "$found" ] || return 1
  if [ -L "$dir" ]; then
    rm -f "$dir"
  else
    rm -rf "$dir"
  fi
  # Helm 4 keeps the package it installed from next to the plugin.
  rm -f "$parent/$name-$VERSION.tgz" "$parent/$name-$VERSION.tgz.prov"
}

# findSource sets SRC to the Go module the plugin came with: the plugin
# folder itself (the root plugin) or two folders up from its real location
# (plugin/digestpin-postrenderer, installed from a checkout as a symlink).
# A packaged plugin has no source, and SRC stays empty.
findSource() {
  SRC=
  real=$(cd -P "$PLUGIN_DIR" && pwd)
  for dir in "$real" "$real/../.."; do
    if [ -f "$dir/go.mod" ] && grep -q "^module $MODULE\$" "$dir/go.mod"; then
      SRC=$(cd -P "$dir" && pwd)
      return 0
    fi
  done
}

# current reports whether bin/ holds a binary of this version whose
# template command runs (it needs digestpin-helm of the same version).
current() {
  [ -x "$BIN" ] && [ "$("$BIN" --version 2>/dev/null)" = "$PROJECT $VERSION" ] &&
    "$BIN" template --help >/dev/null 2>&1
}

# place moves the finished binaries into bin/, each in one step:
# digestpin-helm first, so that a digestpin of this version never runs
# an older one; without a new one (TMP_HELM_BIN empty), an old one is
# removed.
place() {
  if [ -n "$TMP_HELM_BIN" ]; then
    chmod 0755 "$TMP_HELM_BIN"
    mv -f "$TMP_HELM_BIN" "$HELM_BIN"
    TMP_HELM_BIN=
  else
    rm -f "$HELM_BIN"
  fi
  chmod 0755 "$TMP_BIN"
  mv -f "$TMP_BIN" "$BIN"
  TMP_BIN=
}

build() {
  [ -n "$SRC" ] || fail "no source to build $PROJECT from in $PLUGIN_DIR: DIGESTPIN_PLUGIN_BUILD needs a checkout"
  command -v go >/dev/null 2>&1 ||
    fail "Go is not installed: it is needed to build $PROJECT $VERSION from $SRC (or set DIGESTPIN_PLUGIN_BINARY to a $PROJECT binary)"
  info "building $PROJECT $VERSION and $PROJECT-helm from $SRC with $(go version)"
  mkdir -p "$(dirname "$BIN")"
  TMP_BIN=$BIN.tmp.$$ TMP_HELM_BIN=$HELM_BIN.tmp.$$
  # make build's flags (the Makefile's GOFLAGS_BUILD, CGO_ENABLED=0), so
  # that this build and make build share Go's cache: CGO_ENABLED alone
  # would change every package that imports net, and so build all again.
  (cd "$SRC" && export CGO_ENABLED=0 &&
    go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$TMP_BIN" . &&
    go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$TMP_HELM_BIN" ./cmd/digestpin-helm) ||
    fail "go build in $SRC failed"
  place
}

copyBinary() {
  [ -f "$DIGESTPIN_PLUGIN_BINARY" ] || fail "DIGESTPIN_PLUGIN_BINARY=$DIGESTPIN_PLUGIN_BINARY is not a file"
  mkdir -p "$(dirname "$BIN")"
  TMP_BIN=$BIN.tmp.$$
  cp "$DIGESTPIN_PLUGIN_BINARY" "$TMP_BIN"
  beside=$(dirname "$DIGESTPIN_PLUGIN_BINARY")/$HELM_EXE
  if [ -f "$beside" ]; then
    TMP_HELM_BIN=$HELM_BIN.tmp.$$
    cp "$beside" "$TMP_HELM_BIN"
  fi
  place
}

# fetch downloads URL $1 to file $2, with retries, and reports success.
fetch() {
  if command -v curl >/dev/null 2>&1; then
    curl --fail --silent --show-error --location --retry 3 --retry-delay 1 --output "$2" "$1" 2>/dev/null
  elif command -v wget >/dev/null 2>&1; then
    wget --quiet --tries=3 --output-document="$2" "$1" 2>/dev/null
  else
    return 2
  fi
}

# initSHA sets SHA256 to a command that prints a file's SHA-256 first.
initSHA() {
  if command -v sha256sum >/dev/null 2>&1; then
    SHA256=sha256sum
  elif command -v shasum >/dev/null 2>&1; then
    SHA256="shasum -a 256"
  else
    fail "neither sha256sum nor shasum is installed: cannot check a download"
  fi
}

# download sets ARCHIVE to the verified release archive for OS/ARCH, or
# returns 1 when the release cannot be downloaded. A wrong or missing
# checksum fails the hook.
download() {
  url=${DIGESTPIN_PLUGIN_URL:-$RELEASES/v$VERSION}
  url=${url%/}
  file=${PROJECT}_${VERSION}_${OS}_${ARCH}.tar.gz
  TMP_DIR=$(mktemp -d) || fail "cannot make a temporary folder"
  info "downloading $url/$file"
  rc=0
  fetch "$url/SHA256SUMS" "$TMP_DIR/SHA256SUMS" || rc=$?
  [ "$rc" != 0 ] || fetch "$url/$file" "$TMP_DIR/$file" || rc=$?
  if [ "$rc" != 0 ]; then
    if [ "$rc" = 2 ]; then
      DOWNLOAD_ERR="neither curl nor wget is installed"
    else
      DOWNLOAD_ERR="cannot download $url/SHA256SUMS and $file"
    fi
    return 1
  fi
  want=$(awk -v f="$file" '$2 == f || $2 == "*" f { print $1; exit }' "$TMP_DIR/SHA256SUMS")
  [ -n "$want" ] || fail "$url/SHA256SUMS has no line for $file: refusing to install it"
  got=$($SHA256 "$TMP_DIR/$file" | cut -d ' ' -f 1)
  [ "$got" = "$want" ] || fail "$file has SHA-256 $got, but SHA256SUMS says $want: refusing to install it"
  ARCHIVE=$TMP_DIR/$file
}

# regularFile reports whether $1 is a regular file with no other name: not
# a symbolic link (which chmod would follow, and the hook run), a hard
# link, a FIFO, a device or a folder.
regularFile() {
  [ -n "$(find "$1" -prune -type f -links 1 2>/dev/null)" ]
}

# unpack installs the two binaries from the verified ARCHIVE: regular
# files only, whatever the archive says they are.
unpack() {
  for f in "$EXE" "$HELM_EXE"; do
    tar -xzf "$ARCHIVE" -C "$TMP_DIR" "$f" 2>/dev/null || fail "$(basename "$ARCHIVE") holds no $f"
    regularFile "$TMP_DIR/$f" ||
      fail "$f in $(basename "$ARCHIVE") is not a regular file (a link, a folder or a device): refusing to install it"
  done
  mkdir -p "$(dirname "$BIN")"
  TMP_BIN=$BIN.tmp.$$ TMP_HELM_BIN=$HELM_BIN.tmp.$$
  mv -f "$TMP_DIR/$EXE" "$TMP_BIN"
  mv -f "$TMP_DIR/$HELM_EXE" "$TMP_HELM_BIN"
  place
}

# verify runs the installed binary once, and its template command, which
# runs digestpin-helm when bin/digestpin is the build without Helm's
# engine (and refuses one of another version).
verify() {
  out=$("$BIN" --version 2>&1) || fail "$BIN does not run: $out"
  if [ "$out" != "$PROJECT $VERSION" ]; then
    info "warning: $BIN reports \"$out\", plugin.yaml says $VERSION"
  fi
  msg=$("$BIN" template --help 2>&1 >/dev/null) || fail "$BIN template does not run: $(echo "$msg" | tail -n 1)"
  if [ -f "$HELM_BIN" ]; then
    info "installed $out at $BIN, and $HELM_BIN"
  else
    info "installed $out at $BIN"
  fi
}

isTrue() {
  case $1 in
  1 | true) return 0 ;;
  esac
  return 1
}

main() {
  case ${1:-install} in
  install | update) EVENT=${1:-install} ;;
  *) fail "usage: $0 install|update" ;;
  esac
  if isTrue "${DIGESTPIN_PLUGIN_SKIP:-}"; then
    return 0
  fi
  initOS
  initArch
  initPluginDir
  readVersion
  findSource
  if [ -n "${DIGESTPIN_PLUGIN_BINARY:-}" ]; then
    copyBinary
  elif isTrue "${DIGESTPIN_PLUGIN_BUILD:-}"; then
    build
  elif current; then
    :
  else
    verifySupported
    initSHA
    if download; then
      unpack
    elif [ -n "$SRC" ] && command -v go >/dev/null 2>&1; then
      info "$DOWNLOAD_ERR; building from source instead"
      build
    else
      fail "$DOWNLOAD_ERR (set DIGESTPIN_PLUGIN_URL to a mirror, or DIGESTPIN_PLUGIN_BINARY to a $PROJECT binary)"
    fi
  fi
  verify
}

trap cleanup EXIT
main "$@"
