#!/usr/bin/env bash
# digestpin-ci.sh runs the lock workflow of digestpin-lock.sh (beside it),
# or the refresh of Argo CD Applications after a push, from DIGESTPIN_CI_*
# variables: the GitHub Action (action.yml) sets them
# from its inputs, the GitLab CI template (gitlab/digestpin.gitlab-ci.yml)
# from its job's variables. Both ship it with digestpin-lock.sh, so the
# user's repository needs neither. digestpin template renders the chart
# (Helm 4's engine, in digestpin): no Helm CLI is needed.
#
#   DIGESTPIN_CI_CHART         the chart folder (required, but in refresh)
#   DIGESTPIN_CI_MODE          update (default): record the lock file and
#                              commit it; check: fail, naming each image,
#                              when the registry moved away from it;
#                              refresh: after a push of DIGESTPIN_CI_IMAGES,
#                              ask Argo CD for a hard refresh of exactly the
#                              Applications that run them (digestpin argocd
#                              refresh, with the job's KUBECONFIG); no chart,
#                              no lock file, none of the settings below;
#                              refresh-moved: on a schedule, refresh the
#                              Applications that render through the plugin
#                              and run a tag the registry has moved past
#                              (digestpin argocd refresh --moved: each tag
#                              resolved once, with the job's DIGESTPIN_*
#                              settings: DIGESTPIN_CACHE, mirrors, ...;
#                              the registry credentials of DOCKER_CONFIG)
#                              flux: write the digests of the Flux
#                              HelmReleases and Kustomizations of
#                              DIGESTPIN_CI_FLUX_FILES into those files
#                              (digestpin flux pin, docs/flux.md) and
#                              commit them, as update does the lock file;
#                              flux-check: fail when one would change
#   DIGESTPIN_CI_FLUX_FILES    flux, flux-check: the files, separated by
#                              spaces, commas or newlines; no chart, lock
#                              file, seed or output (DIGESTPIN_CI_SUMMARY
#                              gets what moved in them)
#   DIGESTPIN_CI_IMAGES        refresh: the pushed images, REPOSITORY:TAG,
#                              separated by spaces, commas or newlines
#   DIGESTPIN_CI_ARGOCD_NAMESPACE
#                              refresh, refresh-moved: only the Applications
#                              of this namespace (default every namespace)
#   DIGESTPIN_CI_ARGOCD_SELECTOR
#                              refresh, refresh-moved: only the Applications
#                              whose labels match this selector (kubectl -l)
#   DIGESTPIN_CI_RELEASE       release name (default: the chart folder's name)
#   DIGESTPIN_CI_NAMESPACE     --namespace
#   DIGESTPIN_CI_VALUES        values files, separated by newlines or commas
#   DIGESTPIN_CI_HELM_ARGS     more of helm template's flags, one per line,
#                              each as --flag=value
#   DIGESTPIN_CI_SEED          the seed (what `digestpin seed` prints), from
#                              a CI secret: written to a file of mode 0600
#                              in a private temporary folder, removed at the
#                              end, and never printed; the steps it runs do
#                              not see this variable
#   DIGESTPIN_CI_SEED_FILE     or the seed's file (mode 0600)
#                              Without either, the lock file is recorded with
#                              a throwaway seed, and DIGESTPIN_CI_OUTPUT is
#                              refused (digestpin-lock.sh says why)
#   DIGESTPIN_CI_LOCK_FILE     the lock file (default CHART/digests.lock)
#   DIGESTPIN_CI_OUTPUT        also write the pinned manifests there
#   DIGESTPIN_CI_SUMMARY       also write what moved, in Markdown, there
#                              (digestpin-lock.sh --summary; the GitLab
#                              template's artifact shown in the merge request)
#   DIGESTPIN_CI_COMMIT        update: commit the lock (and output) file when
#                              it changed or is new (default true)
#   DIGESTPIN_CI_PUSH          update: push that commit (default true), to
#                              PUSH_BRANCH of PUSH_REMOTE (digestpin-lock.sh)
#   DIGESTPIN_CI_PUSH_ATTEMPTS update: how often to push when other
#                              pipelines moved the branch on (default 10;
#                              digestpin-lock.sh's PUSH_ATTEMPTS)
#   DIGESTPIN_CI_GIT_NAME, DIGESTPIN_CI_GIT_EMAIL
#                              the commit's author and committer (default:
#                              git's own configuration)
#
# DIGESTPIN names the digestpin binary (default digestpin); DIGESTPIN_*
# variables configure digestpin itself.
set -o errexit -o nounset -o pipefail

here=$(cd "$(dirname "$0")" && pwd)

# isTrue reports whether $1 says yes; anything but true/false is an error.
isTrue() {
	case $2 in
	true | 1 | yes) return 0 ;;
	false | 0 | no) return 1 ;;
	esac
	echo "digestpin-ci: $1=$2: want true or false" >&2
	exit 2
}

# trim prints $1 without leading and trailing white space.
trim() {
	local v=${1#"${1%%[![:space:]]*}"}
	printf '%s' "${v%"${v##*[![:space:]]}"}"
}

# items prints the items of the list $2, split at each character of $1
# (and at newlines), one per line, each trimmed, the empty ones left out.
items() {
	local item
	while IFS= read -r item; do
		item=$(trim "$item")
		if [[ -n "$item" ]]; then
			printf '%s\n' "$item"
		fi
	done < <(printf '%s\n' "$2" | tr -s "$1" '\n')
}

# refreshArgs prints the flags of digestpin argocd refresh that the
# DIGESTPIN_CI_ARGOCD_* variables set, one per line.
refreshArgs() {
	if [[ -n "${DIGESTPIN_CI_ARGOCD_NAMESPACE:-}" ]]; then
		printf '%s\n' "--namespace=$DIGESTPIN_CI_ARGOCD_NAMESPACE"
	fi
	if [[ -n "${DIGESTPIN_CI_ARGOCD_SELECTOR:-}" ]]; then
		printf '%s\n' "--selector=$DIGESTPIN_CI_ARGOCD_SELECTOR"
	fi
}

if [[ ${DIGESTPIN_CI_MODE:-update} == refresh-moved ]]; then
	if [[ -n "$(trim "${DIGESTPIN_CI_IMAGES:-}")" ]]; then
		echo "digestpin-ci: DIGESTPIN_CI_MODE=refresh-moved finds what moved itself: DIGESTPIN_CI_IMAGES (the action's images input) is for mode refresh" >&2
		exit 2
	fi
	refresh=(argocd refresh --moved)
	while IFS= read -r a; do
		refresh+=("$a")
	done < <(refreshArgs)
	exec "${DIGESTPIN:-digestpin}" "${refresh[@]}"
fi

if [[ ${DIGESTPIN_CI_MODE:-update} == refresh ]]; then
	images=()
	while IFS= read -r i; do
		images+=("$i")
	done < <(items ', \t' "${DIGESTPIN_CI_IMAGES:-}")
	((${#images[@]})) || {
		echo "digestpin-ci: DIGESTPIN_CI_MODE=refresh: DIGESTPIN_CI_IMAGES (the action's images input) names no image" >&2
		exit 2
	}
	refresh=(argocd refresh)
	while IFS= read -r a; do
		refresh+=("$a")
	done < <(refreshArgs)
	# -- first: no image is taken for a flag.
	exec "${DIGESTPIN:-digestpin}" "${refresh[@]}" -- "${images[@]}"
fi

# commitArgs prints the lock step's --push or --commit, as
# DIGESTPIN_CI_PUSH and DIGESTPIN_CI_COMMIT say.
commitArgs() {
	if isTrue DIGESTPIN_CI_PUSH "${DIGESTPIN_CI_PUSH:-true}" && isTrue DIGESTPIN_CI_COMMIT "${DIGESTPIN_CI_COMMIT:-true}"; then
		printf '%s\n' --push
	elif isTrue DIGESTPIN_CI_COMMIT "${DIGESTPIN_CI_COMMIT:-true}"; then
		printf '%s\n' --commit
	fi
}

# gitEnv exports the variables of the commit and its push.
gitEnv() {
	if [[ -n "${DIGESTPIN_CI_PUSH_ATTEMPTS:-}" ]]; then
		export PUSH_ATTEMPTS=$DIGESTPIN_CI_PUSH_ATTEMPTS
	fi
	if [[ -n "${DIGESTPIN_CI_GIT_NAME:-}" ]]; then
		export GIT_AUTHOR_NAME=$DIGESTPIN_CI_GIT_NAME GIT_COMMITTER_NAME=$DIGESTPIN_CI_GIT_NAME
	fi
	if [[ -n "${DIGESTPIN_CI_GIT_EMAIL:-}" ]]; then
		export GIT_AUTHOR_EMAIL=$DIGESTPIN_CI_GIT_EMAIL GIT_COMMITTER_EMAIL=$DIGESTPIN_CI_GIT_EMAIL
	fi
}

if [[ ${DIGESTPIN_CI_MODE:-update} == flux || ${DIGESTPIN_CI_MODE:-update} == flux-check ]]; then
	files=()
	while IFS= read -r f; do
		files+=("$f")
	done < <(items ', \t' "${DIGESTPIN_CI_FLUX_FILES:-}")
	((${#files[@]})) || {
		echo "digestpin-ci: DIGESTPIN_CI_MODE=$DIGESTPIN_CI_MODE: DIGESTPIN_CI_FLUX_FILES (the action's flux-files input) names no file" >&2
		exit 2
	}
	args=(--flux)
	if [[ $DIGESTPIN_CI_MODE == flux-check ]]; then
		args+=(--check)
	else
		while IFS= read -r a; do
			args+=("$a")
		done < <(commitArgs)
	fi
	if [[ -n "${DIGESTPIN_CI_SUMMARY:-}" ]]; then
		args+=(--summary "$DIGESTPIN_CI_SUMMARY")
	fi
	gitEnv
	# -- first: a file name may begin with -.
	exec "$here/digestpin-lock.sh" "${args[@]}" -- "${files[@]}"
fi

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
	echo "digestpin-ci: DIGESTPIN_CI_MODE=${DIGESTPIN_CI_MODE}: want update, check, refresh, refresh-moved, flux or flux-check" >&2
	exit 2
	;;
esac
if [[ -n "${DIGESTPIN_CI_LOCK_FILE:-}" ]]; then
	args+=(--lock "$DIGESTPIN_CI_LOCK_FILE")
fi
if [[ -n "${DIGESTPIN_CI_OUTPUT:-}" ]]; then
	args+=(--output "$DIGESTPIN_CI_OUTPUT")
fi
if [[ -n "${DIGESTPIN_CI_SUMMARY:-}" ]]; then
	args+=(--summary "$DIGESTPIN_CI_SUMMARY")
fi
# The seed. Its value goes to a file with printf, a shell builtin, so that
# it is on no command line; the variable is unset, so that no program run
# from here has it in its environment.
if [[ -n "${DIGESTPIN_CI_SEED:-}" && -n "${DIGESTPIN_CI_SEED_FILE:-}" ]]; then
	echo "digestpin-ci: DIGESTPIN_CI_SEED and DIGESTPIN_CI_SEED_FILE are both set: give the seed one way" >&2
	exit 2
fi
seed_dir=
trap 'if [[ -n "$seed_dir" ]]; then rm -rf -- "$seed_dir"; fi' EXIT
if [[ -n "${DIGESTPIN_CI_SEED:-}" ]]; then
	seed_dir=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/digestpin-seed.XXXXXX")
	seed=${DIGESTPIN_CI_SEED%$'\n'}
	(
		umask 077
		printf '%s\n' "${seed%$'\r'}" >"$seed_dir/seed"
	)
	unset seed
	args+=(--seed-file "$seed_dir/seed")
elif [[ -n "${DIGESTPIN_CI_SEED_FILE:-}" ]]; then
	args+=(--seed-file "$DIGESTPIN_CI_SEED_FILE")
fi
unset DIGESTPIN_CI_SEED
# -- first: a chart folder may begin with -.
args+=(-- "$chart")
if [[ -n "${DIGESTPIN_CI_NAMESPACE:-}" ]]; then
	args+=("--namespace=$DIGESTPIN_CI_NAMESPACE")
fi
while IFS= read -r f; do
	args+=("--values=$f")
done < <(items , "${DIGESTPIN_CI_VALUES:-}")
while IFS= read -r a; do
	args+=("$a")
done < <(items '' "${DIGESTPIN_CI_HELM_ARGS:-}")

if [[ -n "${DIGESTPIN_CI_RELEASE:-}" ]]; then
	export RELEASE=$DIGESTPIN_CI_RELEASE
fi
if [[ -n "${DIGESTPIN_CI_PUSH_ATTEMPTS:-}" ]]; then
	export PUSH_ATTEMPTS=$DIGESTPIN_CI_PUSH_ATTEMPTS
fi
if [[ -n "${DIGESTPIN_CI_GIT_NAME:-}" ]]; then
	export GIT_AUTHOR_NAME=$DIGESTPIN_CI_GIT_NAME GIT_COMMITTER_NAME=$DIGESTPIN_CI_GIT_NAME
fi
if [[ -n "${DIGESTPIN_CI_GIT_EMAIL:-}" ]]; then
	export GIT_AUTHOR_EMAIL=$DIGESTPIN_CI_GIT_EMAIL GIT_COMMITTER_EMAIL=$DIGESTPIN_CI_GIT_EMAIL
fi
# Not exec: the trap removes the seed's file when the step ends.
status=0
"$here/digestpin-lock.sh" "${args[@]}" || status=$?
exit "$status"
