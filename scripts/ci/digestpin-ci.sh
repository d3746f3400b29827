#!/usr/bin/env bash
# digestpin-ci.sh runs the lock workflow of digestpin-lock.sh (beside it)
# from DIGESTPIN_CI_* variables: the GitHub Action (action.yml) sets them
# from its inputs, the GitLab CI template (gitlab/digestpin.gitlab-ci.yml)
# from its job's variables. Both ship it with digestpin-lock.sh, so the
# user's repository needs neither. When helm is not on PATH (and HELM is
# not set), it first installs Helm, checked against its .sha256sum file.
#
#   DIGESTPIN_CI_CHART         the chart folder (required)
#   DIGESTPIN_CI_MODE          update (default): record the lock file and
#                              commit it; check: fail, naming each image,
#                              when the registry moved away from it
#   DIGESTPIN_CI_RELEASE       release name (default: the chart folder's name)
#   DIGESTPIN_CI_NAMESPACE     helm template --namespace
#   DIGESTPIN_CI_VALUES        values files, separated by newlines or commas
#   DIGESTPIN_CI_HELM_ARGS     more helm template flags, one per line, each
#                              as --flag=value
#   DIGESTPIN_CI_LOCK_FILE     the lock file (default CHART/digests.lock)
#   DIGESTPIN_CI_OUTPUT        also write the pinned manifests there
#   DIGESTPIN_CI_COMMIT        update: commit the lock (and output) file when
#                              it changed or is new (default true)
#   DIGESTPIN_CI_PUSH          update: push that commit (default true), to
#                              PUSH_BRANCH of PUSH_REMOTE (digestpin-lock.sh)
#   DIGESTPIN_CI_GIT_NAME, DIGESTPIN_CI_GIT_EMAIL
#                              the commit's author and committer (default:
#                              git's own configuration)
#   DIGESTPIN_CI_HELM_VERSION  the Helm to install when helm is missing
#                              (default v4.3.1)
#   DIGESTPIN_CI_HELM_URL      where Helm's release files are (default
#                              https://get.helm.sh), e.g. a mirror
#   DIGESTPIN_CI_TOOLS         where to install Helm (default: RUNNER_TEMP,
#                              or TMPDIR, or /tmp)
#
# DIGESTPIN names the digestpin binary (default digestpin); DIGESTPIN_*
# variables configure digestpin itself.
set -o errexit -o nounset -o pipefail

here=$(cd "$(dirname "$0")" && pwd)

fail() {
	echo "digestpin-ci: $*" >&2
	exit 1
}

# isTrue reports whether $1 says yes; anything but true/false is an error.
isTrue() {
	case $2 in
	true | 1 | yes) return 0 ;;
	false | 0 | no) return 1 ;;
	esac
	echo "digestpin-ci: $1=$2: want true or false" >&2
	exit 2
}

# fetch downloads URL $1 to file $2, with retries.
fetch() {
	if command -v curl >/dev/null 2>&1; then
		curl --fail --silent --show-error --location --retry 3 --retry-delay 1 --output "$2" "$1"
	elif command -v wget >/dev/null 2>&1; then
		wget --quiet --tries=3 --output-document="$2" "$1"
	else
		fail "neither curl nor wget is installed: cannot download $1"
	fi
}

# installHelm sets HELM to a Helm CLI: helm on PATH, or the release
# DIGESTPIN_CI_HELM_VERSION for this OS/ARCH, downloaded and checked
# against its .sha256sum file once per tools folder.
installHelm() {
	if [[ -n "${HELM:-}" ]] || command -v helm >/dev/null 2>&1; then
		return 0
	fi
	local version=${DIGESTPIN_CI_HELM_VERSION:-v4.3.1} url=${DIGESTPIN_CI_HELM_URL:-https://get.helm.sh}
	local tools=${DIGESTPIN_CI_TOOLS:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}}
	local os arch
	os=$(uname -s | tr '[:upper:]' '[:lower:]')
	arch=$(uname -m)
	case $arch in
	x86_64 | amd64) arch=amd64 ;;
	aarch64 | arm64) arch=arm64 ;;
	esac
	local file=helm-$version-$os-$arch.tar.gz dir=$tools/digestpin-helm-$version
	if [[ ! -x "$dir/helm" ]]; then
		tmp=$(mktemp -d "${TMPDIR:-/tmp}/digestpin-helm.XXXXXX")
		trap 'rm -rf -- "$tmp"' EXIT
		echo "digestpin-ci: helm is not installed: downloading ${url%/}/$file" >&2
		fetch "${url%/}/$file" "$tmp/$file" && fetch "${url%/}/$file.sha256sum" "$tmp/sum" ||
			fail "cannot download ${url%/}/$file and its .sha256sum (set DIGESTPIN_CI_HELM_URL to a mirror, or put helm on PATH)"
		local want got
		want=$(awk '{ print $1; exit }' "$tmp/sum")
		got=$( (sha256sum "$tmp/$file" 2>/dev/null || shasum -a 256 "$tmp/$file") | cut -d ' ' -f 1)
		[[ -n "$want" && "$got" == "$want" ]] ||
			fail "$file has SHA-256 $got, but $file.sha256sum says \"$want\": refusing to install it"
		tar -xzf "$tmp/$file" -C "$tmp" "$os-$arch/helm" || fail "$file holds no $os-$arch/helm"
		mkdir -p "$dir"
		mv -f "$tmp/$os-$arch/helm" "$dir/helm"
		rm -rf -- "$tmp"
		trap - EXIT
	fi
	HELM=$dir/helm
	export HELM
	echo "digestpin-ci: using $("$HELM" version --short 2>/dev/null || echo "$HELM")" >&2
}

chart=${DIGESTPIN_CI_CHART:-}
[[ -n "$chart" ]] || {
	echo "digestpin-ci: DIGESTPIN_CI_CHART (the action's chart input) names no chart folder" >&2
	exit 2
}
args=()
case ${DIGESTPIN_CI_MODE:-update} in
update)
	if isTrue DIGESTPIN_CI_PUSH "${DIGESTPIN_CI_PUSH:-true}" && isTrue DIGESTPIN_CI_COMMIT "${DIGESTPIN_CI_COMMIT:-true}"; then
		args+=(--push)
	elif isTrue DIGESTPIN_CI_COMMIT "${DIGESTPIN_CI_COMMIT:-true}"; then
		args+=(--commit)
	fi
	;;
check) args+=(--check) ;;
*)
	echo "digestpin-ci: DIGESTPIN_CI_MODE=${DIGESTPIN_CI_MODE}: want update or check" >&2
	exit 2
	;;
esac
if [[ -n "${DIGESTPIN_CI_LOCK_FILE:-}" ]]; then
	args+=(--lock "$DIGESTPIN_CI_LOCK_FILE")
fi
if [[ -n "${DIGESTPIN_CI_OUTPUT:-}" ]]; then
	args+=(--output "$DIGESTPIN_CI_OUTPUT")
fi
# -- first: a chart folder may begin with -.
args+=(-- "$chart")
if [[ -n "${DIGESTPIN_CI_NAMESPACE:-}" ]]; then
	args+=("--namespace=$DIGESTPIN_CI_NAMESPACE")
fi
while IFS= read -r f; do
	f=${f#"${f%%[![:space:]]*}"}
	f=${f%"${f##*[![:space:]]}"}
	if [[ -n "$f" ]]; then
		args+=("--values=$f")
	fi
done < <(printf '%s\n' "${DIGESTPIN_CI_VALUES:-}" | tr ',' '\n')
while IFS= read -r a; do
	a=${a#"${a%%[![:space:]]*}"}
	a=${a%"${a##*[![:space:]]}"}
	if [[ -n "$a" ]]; then
		args+=("$a")
	fi
done <<<"${DIGESTPIN_CI_HELM_ARGS:-}"

if [[ -n "${DIGESTPIN_CI_RELEASE:-}" ]]; then
	export RELEASE=$DIGESTPIN_CI_RELEASE
fi
if [[ -n "${DIGESTPIN_CI_GIT_NAME:-}" ]]; then
	export GIT_AUTHOR_NAME=$DIGESTPIN_CI_GIT_NAME GIT_COMMITTER_NAME=$DIGESTPIN_CI_GIT_NAME
fi
if [[ -n "${DIGESTPIN_CI_GIT_EMAIL:-}" ]]; then
	export GIT_AUTHOR_EMAIL=$DIGESTPIN_CI_GIT_EMAIL GIT_COMMITTER_EMAIL=$DIGESTPIN_CI_GIT_EMAIL
fi
installHelm
exec "$here/digestpin-lock.sh" "${args[@]}"
