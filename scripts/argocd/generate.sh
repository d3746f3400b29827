#!/usr/bin/env bash
# generate.sh is the generate command of the digestpin Config Management
# Plugin (plugin.yaml). Argo CD runs it in the Application's source folder,
# after init.sh. It renders the chart as Argo CD's own Helm support does and
# pins every image through digestpin:
#
#   helm template "$ARGOCD_APP_NAME" . --namespace "$ARGOCD_APP_NAMESPACE" \
#     --kube-version "$KUBE_VERSION" --api-versions "$KUBE_API_VERSIONS" \
#     --include-crds [--values FILE]... | digestpin [options]
#
# stdout carries the manifests only; with pipefail a failure of helm or of
# digestpin fails the generation, and its reason (on stderr) is what Argo CD
# shows in the Application's conditions.
#
# Application options (spec.source.plugin.env; Argo CD prefixes each name
# with ARGOCD_ENV_):
#
#   VALUES_FILES               comma-separated values files, relative to the
#                              source folder and inside the repository
#   DIGESTPIN_LOCK             lock file (relative, inside the repository):
#                              digests come from it, no registry is asked
#   DIGESTPIN_FROZEN           with DIGESTPIN_LOCK: "true" (default) fails on
#                              an image missing from the lock; "false"
#                              resolves it at its registry
#   DIGESTPIN_CACHE_TTL        live resolution, cached this long (e.g. 5m)
#   DIGESTPIN_MODE             pin (default), digest or annotate
#   DIGESTPIN_REGISTRY_MIRROR  FROM=TO[,FROM=TO]: ask a mirror, keep the name
#   DIGESTPIN_PLATFORM         os/arch: pin one platform's manifest
#   DIGESTPIN_ON_ERROR         fail (default) or keep
#   DIGESTPIN_VERBOSE          "true" logs each resolution to stderr
#   DIGESTPIN_STEADY           "true" (default) keeps the chart's own
#                              randomness (generated certificates and
#                              passwords, random names, now) from changing
#                              the manifests; "false" renders once
#
# Only these reach digestpin from an Application. The sidecar's own
# DIGESTPIN_* variables (set by the Argo CD administrator in
# repo-server-patch.yaml: timeouts, insecure registries, a default cache
# TTL) apply to every Application; the options above win over them.
#
# Steady renders: the chart is rendered twice with the same arguments, and
# digestpin names the fields that differ between the two (--volatile-from)
# and writes the previous output of this Application again, byte for byte,
# when nothing else changed. The previous output is what this script wrote
# last time, kept on the sidecar (--state-dir) under the key
# DESTINATION-NAMESPACE/APP-NAME/SOURCE-PATH. The folder is
# DIGESTPIN_CMP_STATE_DIR on the sidecar (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/digestpin-state); its files hold rendered
# Secrets (mode 0600, folder 0700). Each repo-server replica keeps its own.
set -o errexit -o nounset -o pipefail

die() {
	echo "digestpin-cmp: $*" >&2
	exit 1
}

: "${ARGOCD_APP_NAME:?digestpin-cmp: ARGOCD_APP_NAME is not set: run by Argo CD}"

# repo is the root of the repository copy Argo CD gave the plugin: the source
# folder without ARGOCD_APP_SOURCE_PATH.
src=$(pwd -P)
repo=$src
if [[ -n "${ARGOCD_APP_SOURCE_PATH:-}" && "${ARGOCD_APP_SOURCE_PATH}" != "." ]]; then
	repo=$(cd "$src/$(sed 's|[^/][^/]*|..|g' <<<"${ARGOCD_APP_SOURCE_PATH%/}")" && pwd -P)
fi

# inside_repo checks that a path an Application names is a relative path to
# a file inside the repository, so that no Application reads the sidecar's
# own files. Symbolic links are followed first, every one of them: a link
# committed to the repository may point anywhere.
inside_repo() {
	local what=$1 path=$2 abs
	[[ "$path" != /* ]] || die "$what $path: want a path relative to the source folder"
	abs=$(realpath -e -- "$path" 2>/dev/null) || die "$what $path: no such file in the source folder"
	[[ "$abs" == "$repo"/* ]] || die "$what $path: outside the repository"
	[[ -f "$abs" ]] || die "$what $path: not a regular file"
}

helm_args=(template "$ARGOCD_APP_NAME" .
	--namespace "${ARGOCD_APP_NAMESPACE:-default}"
	--include-crds)
# Render for the destination cluster, as Argo CD's built-in Helm does.
if [[ -n "${KUBE_VERSION:-}" ]]; then
	helm_args+=(--kube-version "$KUBE_VERSION")
fi
if [[ -n "${KUBE_API_VERSIONS:-}" ]]; then
	helm_args+=(--api-versions "$KUBE_API_VERSIONS")
fi
IFS=, read -r -a values_files <<<"${ARGOCD_ENV_VALUES_FILES:-}"
for f in "${values_files[@]}"; do
	f=${f#"${f%%[![:space:]]*}"} # trim leading blanks
	f=${f%"${f##*[![:space:]]}"} # trim trailing blanks
	[[ -n "$f" ]] || continue
	inside_repo "values file" "$f"
	helm_args+=(--values "$f")
done

pin_args=()
if [[ -n "${ARGOCD_ENV_DIGESTPIN_LOCK:-}" ]]; then
	inside_repo "lock file" "$ARGOCD_ENV_DIGESTPIN_LOCK"
	pin_args+=(--lock "$ARGOCD_ENV_DIGESTPIN_LOCK")
	case "${ARGOCD_ENV_DIGESTPIN_FROZEN:-true}" in
	true) pin_args+=(--frozen) ;;
	false) ;;
	*) die "DIGESTPIN_FROZEN=${ARGOCD_ENV_DIGESTPIN_FROZEN}: want true or false" ;;
	esac
fi
# option FLAG NAME passes ARGOCD_ENV_NAME to digestpin as --FLAG when set.
option() {
	local var="ARGOCD_ENV_$2"
	if [[ -n "${!var:-}" ]]; then
		pin_args+=("--$1=${!var}")
	fi
}
option cache-ttl DIGESTPIN_CACHE_TTL
option mode DIGESTPIN_MODE
option registry-mirror DIGESTPIN_REGISTRY_MIRROR
option platform DIGESTPIN_PLATFORM
option on-error DIGESTPIN_ON_ERROR
option verbose DIGESTPIN_VERBOSE

case "${ARGOCD_ENV_DIGESTPIN_STEADY:-true}" in
true) ;;
false)
	helm "${helm_args[@]}" | digestpin "${pin_args[@]}"
	exit
	;;
*) die "DIGESTPIN_STEADY=${ARGOCD_ENV_DIGESTPIN_STEADY}: want true or false" ;;
esac

# A second render with the same arguments, for --volatile-from; the first
# goes to digestpin on stdin, as without steady renders.
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
helm "${helm_args[@]}" >"$tmp/second.yaml"
state_dir=${DIGESTPIN_CMP_STATE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/digestpin-state}
state=(--state-dir "$state_dir")
# DIGESTPIN_STATE_STORE on the sidecar (a Redis URL, which digestpin reads
# itself) keeps the state on Redis, shared by every replica, instead.
[[ -z "${DIGESTPIN_STATE_STORE:-}" ]] || state=()
pin_args+=(--volatile-from "$tmp/second.yaml"
	"${state[@]}"
	--state-key "${ARGOCD_APP_NAMESPACE:-default}/$ARGOCD_APP_NAME/${ARGOCD_APP_SOURCE_PATH:-.}")
helm "${helm_args[@]}" | digestpin "${pin_args[@]}"
