#!/bin/sh
# install-binary.sh puts a working digestpin binary into a Helm plugin
# folder. Helm runs it as the install and update hook of both plugins (the
# Helm 3 plugin at the repository root and the Helm 4 post-renderer plugin in
# plugin/digestpin-postrenderer), with HELM_PLUGIN_DIR set:
#
#   install  keep the binary already in bin/ when it reports the version in
#            plugin.yaml (a packaged plugin ships one); otherwise build it
#            from the plugin's own source with the local Go toolchain;
#   update   rebuild from source when the source is there, since it may have
#            changed under the same version.
#
# It never downloads anything from anywhere. Settings:
#
#   DIGESTPIN_PLUGIN_BINARY=FILE  install FILE instead of building (air-gapped
#                                 hosts, a binary from your own release)
#   DIGESTPIN_PLUGIN_SKIP=true    do nothing (a packager puts bin/ in place)
set -e

PROJECT=digestpin
MODULE=github.com/digestpin/digestpin
TMP_BIN=

info() { echo "$PROJECT plugin: $*"; }
fail() {
  echo "$PROJECT plugin: error: $*" >&2
  exit 1
}

cleanup() {
  rc=$?
  if [ -n "$TMP_BIN" ]; then rm -f "$TMP_BIN"; fi
  exit "$rc"
}

# initPluginDir sets PLUGIN_DIR and BIN. Run by hand, the script works on
# the plugin folder it sits in.
initPluginDir() {
  PLUGIN_DIR=${HELM_PLUGIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
  [ -f "$PLUGIN_DIR/plugin.yaml" ] || fail "no plugin.yaml in $PLUGIN_DIR"
  BIN=$PLUGIN_DIR/bin/$PROJECT
}

# readVersion sets VERSION from the plugin's plugin.yaml, the one version
# number of the project (the Makefile reads it the same way).
readVersion() {
  VERSION=$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$PLUGIN_DIR/plugin.yaml" | head -n 1)
  [ -n "$VERSION" ] || fail "no version in $PLUGIN_DIR/plugin.yaml"
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

# current reports whether bin/ holds a binary of this version.
current() {
  [ -x "$BIN" ] && [ "$("$BIN" --version 2>/dev/null)" = "$PROJECT $VERSION" ]
}

# place moves the finished binary into bin/ in one step.
place() {
  chmod 0755 "$TMP_BIN"
  mv -f "$TMP_BIN" "$BIN"
  TMP_BIN=
}

build() {
  command -v go >/dev/null 2>&1 ||
    fail "Go is not installed: it is needed to build $PROJECT $VERSION from $SRC (or set DIGESTPIN_PLUGIN_BINARY to a $PROJECT binary)"
  info "building $PROJECT $VERSION from $SRC with $(go version)"
  mkdir -p "$(dirname "$BIN")"
  TMP_BIN=$BIN.tmp.$$
  (cd "$SRC" && go build -trimpath -ldflags "-X main.version=$VERSION" -o "$TMP_BIN" .) ||
    fail "go build in $SRC failed"
  place
}

copyBinary() {
  [ -f "$DIGESTPIN_PLUGIN_BINARY" ] || fail "DIGESTPIN_PLUGIN_BINARY=$DIGESTPIN_PLUGIN_BINARY is not a file"
  mkdir -p "$(dirname "$BIN")"
  TMP_BIN=$BIN.tmp.$$
  cp "$DIGESTPIN_PLUGIN_BINARY" "$TMP_BIN"
  place
}

# verify runs the installed binary once.
verify() {
  out=$("$BIN" --version 2>&1) || fail "$BIN does not run: $out"
  if [ "$out" != "$PROJECT $VERSION" ]; then
    info "warning: $BIN reports \"$out\", plugin.yaml says $VERSION"
  fi
  info "installed $out at $BIN"
}

main() {
  event=${1:-install}
  case $event in
  install | update) ;;
  *) fail "usage: $0 install|update" ;;
  esac
  case ${DIGESTPIN_PLUGIN_SKIP:-} in
  1 | true) return 0 ;;
  esac
  initPluginDir
  readVersion
  if [ -n "${DIGESTPIN_PLUGIN_BINARY:-}" ]; then
    copyBinary
  else
    findSource
    if [ "$event" = install ] && current; then
      :
    elif [ -n "$SRC" ]; then
      build
    elif [ ! -x "$BIN" ]; then
      fail "no $PROJECT binary in $PLUGIN_DIR/bin and no source to build one: install from a source checkout, or a package made by 'make dist'"
    fi
  fi
  verify
}

trap cleanup EXIT
main "$@"
