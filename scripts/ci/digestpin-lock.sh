#!/usr/bin/env bash
# digestpin-lock.sh is a CI step that records, or checks, the digests of a
# Helm chart's images in a digestpin lock file.
#
# Usage:
#   digestpin-lock.sh [--check] [--lock FILE] [--output FILE] CHART [HELM TEMPLATE FLAGS...]
#
# Record (the default), after CI pushed the images:
#   helm template RELEASE CHART [FLAGS...] | digestpin --write-lock FILE
# FILE (default CHART/digests.lock) then holds the digest of every image the
# chart uses, sorted: commit it, and Argo CD's digestpin plugin (or any
# `digestpin --lock FILE --frozen`) renders from it without asking a
# registry. The step says on stderr whether FILE changed.
#
# Check (--check): renders with `digestpin --lock FILE --check` and fails,
# naming each image, when the registry serves another digest than FILE, or
# an image is missing from it: a gate for pull requests and scheduled jobs.
#
# --output FILE keeps the pinned manifests (by default they are discarded),
# and keeps them steady: the chart is rendered twice with the same flags and
# digestpin is given the second render (--volatile-from) and FILE as it is
# (--previous). When nothing but the chart's own randomness changed
# (generated certificates and passwords, random names, now), FILE is left
# untouched, byte for byte, and there is nothing to commit; otherwise it is
# replaced whole. A failed step leaves FILE as it was.
# The HELM TEMPLATE FLAGS are passed as they are (--values, --set,
# --namespace, …).
#
# Environment: RELEASE is the release name (default: the chart folder's
# name); HELM and DIGESTPIN name the commands (default: helm, digestpin);
# DIGESTPIN_* variables configure digestpin as usual (DIGESTPIN_PLATFORM,
# DIGESTPIN_INSECURE_REGISTRY, …).
#
# Exit status: 0 done; 1 the render or the check failed; 2 bad usage.
set -o errexit -o nounset -o pipefail

usage() {
	sed -n 's/^# \{0,1\}//; 5,6p' "$0" >&2
	exit 2
}

check=false
lock=
output=/dev/null
while [[ $# -gt 0 ]]; do
	case "$1" in
	--check) check=true ;;
	--lock)
		[[ $# -ge 2 ]] || usage
		lock=$2
		shift
		;;
	--output)
		[[ $# -ge 2 ]] || usage
		output=$2
		shift
		;;
	-h | --help) usage ;;
	-*) echo "digestpin-lock: unknown option $1" >&2 && usage ;;
	*) break ;;
	esac
	shift
done
[[ $# -ge 1 ]] || usage
chart=$1
shift
[[ -d "$chart" ]] || {
	echo "digestpin-lock: chart folder $chart not found" >&2
	exit 2
}
lock=${lock:-$chart/digests.lock}
release=${RELEASE:-$(basename "$(cd "$chart" && pwd -P)")}
helm=${HELM:-helm}
digestpin=${DIGESTPIN:-digestpin}

# pin renders the chart and pins it with digestpin and the flags in
# pin_flags, into --output. With an --output file, the chart is rendered
# twice and the file is replaced only when digestpin wrote something else.
# Each command's status is checked: errexit does not apply in `if ! pin`.
tmp=
trap 'if [[ -n "$tmp" ]]; then rm -rf -- "$tmp"; fi' EXIT
pin() {
	if [[ "$output" == /dev/null ]]; then
		"$helm" template "$release" "$chart" "$@" | "$digestpin" "${pin_flags[@]}" >/dev/null || return 1
		return 0
	fi
	tmp=$(mktemp -d "$(dirname -- "$output")/.digestpin-lock.XXXXXX") || return 1
	"$helm" template "$release" "$chart" "$@" >"$tmp/second.yaml" || return 1
	"$helm" template "$release" "$chart" "$@" |
		"$digestpin" "${pin_flags[@]}" --volatile-from "$tmp/second.yaml" --previous "$output" >"$tmp/output.yaml" || return 1
	if [[ -f "$output" ]] && cmp -s -- "$tmp/output.yaml" "$output"; then
		echo "digestpin-lock: $output unchanged" >&2
		return 0
	fi
	mv -f -- "$tmp/output.yaml" "$output" || return 1
	echo "digestpin-lock: $output updated: commit it" >&2
}

if [[ "$check" == true ]]; then
	[[ -f "$lock" ]] || {
		echo "digestpin-lock: lock file $lock not found: record it first (without --check)" >&2
		exit 1
	}
	pin_flags=(--lock "$lock" --check)
	if ! pin "$@"; then
		echo "digestpin-lock: $lock does not match the registry: run this step without --check and commit the lock file" >&2
		exit 1
	fi
	echo "digestpin-lock: $lock matches the registry" >&2
	exit 0
fi

before=
if [[ -f "$lock" ]]; then
	before=$(cat "$lock")
fi
pin_flags=(--write-lock "$lock")
pin "$@"
if [[ "$before" == "$(cat "$lock")" ]]; then
	echo "digestpin-lock: $lock unchanged" >&2
else
	echo "digestpin-lock: $lock updated: commit it" >&2
fi
