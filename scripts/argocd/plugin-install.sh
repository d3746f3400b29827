#!/bin/sh
# plugin-install.sh is the init container of the digestpin Config Management
# Plugin when no image is built: it places the released digestpin binaries and
# the plugin's plugin.yaml, init.sh and generate.sh (all from the one
# release archive, so they are of one version) into the shared volume
# mounted at $1 (default /digestpin):
#
#   $1/bin/digestpin                          the sidecar's PATH starts there
#   $1/bin/digestpin-helm                     what digestpin template runs
#   $1/config/plugin.yaml, init.sh, generate.sh  the sidecar's
#                                             /home/argocd/cmp-server/config
#
# The sidecar itself runs Argo CD's own image, which carries bash, Helm and
# kustomize. argocd-values.yaml and repo-server-patch.yaml hold this script
# inline (as the init container's command, so that nothing unchecked runs
# before it); e2e/argocd_plugin_install_test.go checks that both hold this
# file, and runs it against a release served on loopback.
#
# The archive is checked against the release's SHA256SUMS before anything
# is unpacked, and, when DIGESTPIN_SHA256 is set, against that too (the
# archive's line of SHA256SUMS, copied into your values: then a changed
# release cannot pass). On any failure it says why in one line, exits 1
# (Kubernetes then restarts the init container, and the repo server waits),
# and leaves what an earlier run placed as it was. POSIX sh with curl or
# wget, sha256sum, tar and awk: an alpine or busybox image.
#
#   DIGESTPIN_VERSION      the release to install, e.g. 0.1.0 (required)
#   DIGESTPIN_RELEASE_URL  where its files are (default: the project's
#                          GitHub release of that version; a mirror works)
#   DIGESTPIN_SHA256       optional: the SHA-256 the archive must have
#   DIGESTPIN_ARCH         amd64 or arm64 (default: this machine's)
set -eu

fail() {
	echo "digestpin-install: $*" >&2
	exit 1
}

dest=${1:-/digestpin}
version=${DIGESTPIN_VERSION:-}
version=${version#v}
[ -n "$version" ] || fail "DIGESTPIN_VERSION is not set: set it to the digestpin release to install, e.g. 0.1.0"
case $version in
*[!0-9A-Za-z.+-]*) fail "DIGESTPIN_VERSION \"$version\" is not a version" ;;
esac
url=${DIGESTPIN_RELEASE_URL:-https://github.com/digestpin/digestpin/releases/download/v$version}
url=${url%/}
arch=${DIGESTPIN_ARCH:-$(uname -m)}
case $arch in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) fail "architecture $arch: digestpin is released for amd64 and arm64" ;;
esac
file=digestpin_${version}_linux_$arch.tar.gz

# Everything is written inside the shared volume (the init container's
# root file system is read-only), first into a private folder that the
# exit removes.
if [ ! -d "$dest" ] || [ -L "$dest" ]; then
	fail "$dest is not a folder: mount the shared volume there"
fi
tmp=$(mktemp -d "$dest/.install.XXXXXX" 2>/dev/null) || fail "cannot write into $dest"
trap 'rm -rf -- "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

# get downloads URL $1 to the file $2.
get() {
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL --retry 3 -o "$2" -- "$1" 2>/dev/null || fail "cannot download $1"
	else
		wget -q -O "$2" -- "$1" 2>/dev/null || fail "cannot download $1"
	fi
}

get "$url/SHA256SUMS" "$tmp/SHA256SUMS"
get "$url/$file" "$tmp/$file"
want=$(awk -v f="$file" '$2 == f || $2 == "*" f { print $1; exit }' "$tmp/SHA256SUMS")
[ -n "$want" ] || fail "$url/SHA256SUMS has no line for $file: refusing it"
got=$(sha256sum "$tmp/$file" | cut -d ' ' -f 1)
[ "$got" = "$want" ] || fail "$file has the SHA-256 $got, but SHA256SUMS says $want: refusing it"
if [ -n "${DIGESTPIN_SHA256:-}" ] && [ "$got" != "$DIGESTPIN_SHA256" ]; then
	fail "$file has the SHA-256 $got, but DIGESTPIN_SHA256 says $DIGESTPIN_SHA256: refusing it"
fi

# Unpacked only now, checked; only the five files, each a regular file
# with no other name (not a symbolic or hard link, a folder or a device).
files="digestpin digestpin-helm argocd/plugin.yaml argocd/init.sh argocd/generate.sh"
mkdir "$tmp/x"
# shellcheck disable=SC2086 # files is a list of names without spaces
tar -xzf "$tmp/$file" -C "$tmp/x" $files 2>/dev/null ||
	fail "$file does not hold $files (a release before the plugin was in it?)"
for f in $files; do
	if [ -z "$(find "$tmp/x/$f" -prune -type f -links 1 2>/dev/null)" ]; then
		fail "$f in $file is not a regular file: refusing it"
	fi
done
# Without this script's variables, which digestpin would read as its own
# (DIGESTPIN_VERSION as --version).
v=$(
	unset DIGESTPIN_VERSION DIGESTPIN_RELEASE_URL DIGESTPIN_SHA256 DIGESTPIN_ARCH
	"$tmp/x/digestpin" --version 2>&1
) || fail "the digestpin of $file does not run here: $v"
[ "$v" = "digestpin $version" ] || fail "$file holds \"$v\", want \"digestpin $version\""
h=$(
	unset DIGESTPIN_VERSION DIGESTPIN_RELEASE_URL DIGESTPIN_SHA256 DIGESTPIN_ARCH
	"$tmp/x/digestpin-helm" --version 2>&1
) || fail "the digestpin-helm of $file does not run here: $h"
[ "$h" = "$v" ] || fail "$file holds digestpin-helm \"$h\", want \"$v\""

# Into place, each file replaced at once (a restarted init container finds
# the files of its earlier run), digestpin-helm before the digestpin that
# runs it.
mkdir -p "$dest/bin" "$dest/config"
chmod 0755 "$tmp/x/digestpin" "$tmp/x/digestpin-helm"
chmod 0644 "$tmp/x/argocd/plugin.yaml" "$tmp/x/argocd/init.sh" "$tmp/x/argocd/generate.sh"
mv -f "$tmp/x/digestpin-helm" "$dest/bin/digestpin-helm"
mv -f "$tmp/x/digestpin" "$dest/bin/digestpin"
for f in plugin.yaml init.sh generate.sh; do
	mv -f "$tmp/x/argocd/$f" "$dest/config/$f"
done
echo "digestpin-install: $v ($file, SHA-256 $got) placed in $dest"
