#!/usr/bin/env bash
# generate.sh is the generate command of the digestpin Config Management
# Plugin (plugin.yaml). Argo CD runs it in the Application's source folder,
# after init.sh. It renders the folder as Argo CD's own tools would, and
# pins every image through digestpin. What it renders is decided as Argo CD
# decides it:
#
#   Chart.yaml              a Helm chart, rendered as Argo CD's Helm does,
#                           with Helm 4's engine in digestpin, every
#                           generator function (randAlphaNum, genCA, ...)
#                           derived from the sidecar's seed:
#                             digestpin template --seed-file=SEED \
#                               --namespace=NAMESPACE \
#                               --kube-version="$KUBE_VERSION" \
#                               --api-versions="$KUBE_API_VERSIONS" \
#                               [--values=FILE]... [--values=INLINE] \
#                               [--set|--set-string|--set-file=K=V]... \
#                               --include-crds [options] -- RELEASE .
#   kustomization.yaml,     a kustomization: kustomize build . | digestpin
#   .yml or Kustomization
#   anything else           plain manifests: the folder's *.yaml, *.yml and
#                           *.json files (not recursive, in name order),
#                           joined with ---, | digestpin
#
# stdout carries the manifests only; with pipefail a failure of digestpin
# or kustomize fails the generation, and its reason (on stderr) is what
# Argo CD shows in the Application's conditions.
#
# The seed (Helm charts only) is the sidecar's, never the Application's:
# the file DIGESTPIN_SEED_FILE of the sidecar's env (repo-server-patch.yaml:
# /home/argocd/digestpin-seed/seed, the key seed of the Secret
# digestpin-seed). With DIGESTPIN_CMP_SEED_PER_PROJECT=true in the
# sidecar's env, each Argo CD project has its own: the key
# project.PROJECT of that Secret, in the same folder, and an Application
# of a project without one fails. No seed, no render: the generation fails
# naming the Secret and key to create, rather than render with random
# values. Same seed, chart, values, release name and namespace: the same
# generated passwords, keys and certificates (SECURITY.md: The seed).
#
# Helm settings are the plugin's parameters (spec.source.plugin.parameters,
# announced in plugin.yaml, which lists them with the source.helm field each
# one replaces), read from ARGOCD_APP_PARAMETERS through `digestpin
# argocd-parameters`. RELEASE is the release-name parameter, else the
# Application's name (without the "NAMESPACE_" Argo CD puts before it for
# Applications outside its own namespace); NAMESPACE the namespace
# parameter, else the destination namespace. The inline values (the values
# parameter) go to a file in a private temporary folder, never to a command
# line. Helm parameters on a kustomization or plain YAML are an error.
#
# Application options (spec.source.plugin.env; Argo CD prefixes each name
# with ARGOCD_ENV_):
#
#   VALUES_FILES               comma-separated values files, relative to the
#                              source folder and inside the repository
#                              (before the values-files parameter)
#   DIGESTPIN_LOCK             lock file (relative, inside the repository):
#                              digests come from it, no registry is asked
#   DIGESTPIN_FROZEN           with DIGESTPIN_LOCK: "true" (default) fails on
#                              an image missing from the lock; "false"
#                              resolves it at its registry
#   DIGESTPIN_CONFIG           digestpin configuration file (relative,
#                              inside the repository): more pod spec, image
#                              and checksum paths
#   DIGESTPIN_CACHE_TTL        live resolution, cached this long (e.g. 5m)
#   DIGESTPIN_MODE             pin (default), digest or annotate
#   DIGESTPIN_REGISTRY_MIRROR  FROM=TO[,FROM=TO]: ask a mirror, keep the name
#   DIGESTPIN_PLATFORM         os/arch: pin one platform's manifest
#   DIGESTPIN_ON_ERROR         fail (default) or keep
#   DIGESTPIN_VERBOSE          "true" logs each resolution to stderr
#
# Only these reach digestpin from an Application. The sidecar's own
# DIGESTPIN_* variables (set by the Argo CD administrator in
# repo-server-patch.yaml: timeouts, insecure registries, a default cache
# TTL) apply to every Application; the options above win over them. An
# Application that names the seed (DIGESTPIN_SEED_FILE, DIGESTPIN_SEED,
# DIGESTPIN_CMP_SEED_PER_PROJECT in its env, a seed or seed-file
# parameter) fails: `digestpin argocd-parameters` refuses it.
#
# DIGESTPIN_STEADY, and the sidecar's DIGESTPIN_CMP_STATE_DIR, belonged to
# the retired two-render mode: `digestpin argocd-parameters` fails the
# generation when one is set, saying what replaces it (DIGESTPIN_STEADY
# "false", one render, is what the plugin does, and still works).
#
# Every path an Application names (values files, --set-file files, the lock
# file, and the plain YAML files themselves) must lie inside the
# repository once every symbolic link in it is followed, and no symbolic
# link of the repository may point outside it. digestpin template gets
# each value as --flag=VALUE and the release name after --, so that no
# parameter is read as a flag of its own; a values or --set-file path with
# a comma, and a --set key with a comma or =, are refused (Helm's reading
# of them, which digestpin template keeps, would read more files).
set -o errexit -o nounset -o pipefail

die() {
	echo "digestpin-cmp: $*" >&2
	exit 1
}

: "${ARGOCD_APP_NAME:?digestpin-cmp: ARGOCD_APP_NAME is not set: run by Argo CD}"

# repo is the root of the repository copy Argo CD gave the plugin: the source
# folder without ARGOCD_APP_SOURCE_PATH. Argo CD passes the path as the
# Application wrote it ("./web", "web/", "a//b"), and runs the plugin in
# the folder it names, cleaned: the path is cleaned the same way, and the
# source folder, links resolved, must end with it. Otherwise a "." or a
# link inside the path would make a folder above the repository its root,
# and the files beside it (other Applications' checkouts) its own.
src=$(pwd -P)
clean=()
IFS=/ read -r -a parts <<<"${ARGOCD_APP_SOURCE_PATH:-}"
for part in "${parts[@]}"; do
	case $part in
	'' | .) ;;
	..)
		((${#clean[@]})) || die "ARGOCD_APP_SOURCE_PATH \"$ARGOCD_APP_SOURCE_PATH\": leaves the repository"
		clean=("${clean[@]:0:${#clean[@]}-1}")
		;;
	*) clean+=("$part") ;;
	esac
done
repo=$src
if ((${#clean[@]})); then
	rel=$(
		IFS=/
		echo "${clean[*]}"
	)
	[[ "$src" == */"$rel" ]] ||
		die "ARGOCD_APP_SOURCE_PATH \"$ARGOCD_APP_SOURCE_PATH\": goes through a symbolic link (the folder is $src); name the folder itself"
	repo=${src%/"$rel"}
fi

# No symbolic link of the repository may point outside it (Argo CD's own
# rule, unless its repo server runs with --allow-oob-symlinks): Helm reads a
# chart's files through links (.Files.Get), kustomize its resources, and a
# link to the sidecar's docker config or Redis password would render them
# into the manifests. A link inside the repository is fine.
while IFS= read -r -d '' link; do
	rel=${link#"$repo"/}
	target=$(realpath -m -- "$link" 2>/dev/null) || die "$rel: a symbolic link that cannot be followed"
	[[ "$target" == "$repo" || "$target" == "$repo"/* ]] ||
		die "$rel: a symbolic link to outside the repository ($(readlink -- "$link")); Argo CD refuses those too"
done < <(find "$repo" -type l -print0)

# inside_repo checks that a path an Application names is a relative path to
# a file inside the repository, so that no Application reads the sidecar's
# own files. Symbolic links are followed first, every one of them: a link
# committed to the repository may point anywhere. The path to pass on is in
# $inside_repo: the file's absolute path, links resolved, so that a tool
# never reads the Application's text as anything else (a URL, a flag).
inside_repo() {
	local what=$1 path=$2 abs
	[[ "$path" != /* ]] || die "$what $path: want a path relative to the source folder"
	abs=$(realpath -e -- "$path" 2>/dev/null) || die "$what $path: no such file in the source folder"
	[[ "$abs" == "$repo"/* ]] || die "$what $path: outside the repository"
	[[ -f "$abs" ]] || die "$what $path: not a regular file"
	size=$(stat -c %s -- "$abs") || die "$what $path: cannot read its size"
	((size <= max_file_size)) || die "$what $path: $size bytes, more than $max_file_size (64 MiB)"
	inside_repo=$abs
}
# max_file_size bounds each file an Application names: Helm reads a values
# file whole into memory, in the sidecar every Application shares.
max_file_size=$((64 << 20))

# no_list checks that a path Helm reads as a list of paths (--values, and
# the file of --set-file) is one path: Helm splits at a comma, and would
# read what follows it, a file outside the repository, too.
no_list() {
	[[ "$2" != *[,$'\n\r"']* ]] || die "$1 $3: a comma, quote or line break in the path (Helm would read it as several files)"
}

# is_bool checks the value of a true/false parameter or option.
is_bool() {
	[[ "$2" == true || "$2" == false ]] || die "$1=$2: want true or false"
}

# set_key checks the key of a --set, --set-string or --set-file parameter:
# Helm reads KEY=VALUE[,KEY=VALUE]..., so a comma or an = in a key would
# start another assignment (for --set-file, the reading of any file of the
# sidecar); Helm has no escape for them in a key.
set_key() {
	[[ "$2" != *[,=]* ]] || die "$1 key \"$2\": a comma or = in the key (Helm would read another assignment)"
}

# set_value escapes the commas of a --set value as Argo CD's Helm does, so
# that "a,b" is one string and not two assignments; a value in braces is a
# Helm list ({a,b}) and stays as it is. The result is in $set_value.
set_value() {
	local v=$1 c prev='' i
	set_value=''
	if [[ "$v" == \{*\} ]]; then
		set_value=$v
		return
	fi
	for ((i = 0; i < ${#v}; i++)); do
		c=${v:i:1}
		if [[ "$c" == , && "$prev" != "\\" ]]; then
			set_value+='\,'
		else
			set_value+=$c
		fi
		prev=$c
	done
}

tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT

# What Argo CD would render here.
if [[ -f Chart.yaml ]]; then
	flavour=helm
elif [[ -f kustomization.yaml || -f kustomization.yml || -f Kustomization ]]; then
	flavour=kustomization
else
	flavour=directory
fi

# The Application's parameters, as NAME KEY VALUE records; digestpin
# refuses unknown names, values of the wrong kind and the retired settings
# (see above). Read into variables first: the order of the parameters must
# not matter.
release=${ARGOCD_APP_NAME#*_}
namespace=${ARGOCD_APP_NAMESPACE:-default}
kube_version=${KUBE_VERSION:-}
api_versions=${KUBE_API_VERSIONS:-}
param_api_versions=()
param_values_files=()
inline_values=
has_inline_values=false
sets=()
set_files=()
ignore_missing=false
skip_crds=false
skip_tests=false
skip_schema=false
digestpin argocd-parameters >"$tmp/parameters"
while IFS= read -r -d '' name && IFS= read -r -d '' key && IFS= read -r -d '' value; do
	[[ "$flavour" == helm ]] || die "parameter $name: only for a Helm chart, and ${ARGOCD_APP_SOURCE_PATH:-the source folder} is a $flavour (no Chart.yaml)"
	case $name in
	release-name) release=$value ;;
	namespace) namespace=$value ;;
	values-files) param_values_files+=("$value") ;;
	values)
		inline_values=$value
		has_inline_values=true
		;;
	set)
		set_key "$name" "$key"
		set_value "$value"
		sets+=("--set=$key=$set_value")
		;;
	set-string)
		set_key "$name" "$key"
		set_value "$value"
		sets+=("--set-string=$key=$set_value")
		;;
	set-file)
		set_key "$name" "$key"
		set_files+=("$key" "$value")
		;;
	ignore-missing-value-files)
		is_bool "$name" "$value"
		ignore_missing=$value
		;;
	skip-crds)
		is_bool "$name" "$value"
		skip_crds=$value
		;;
	skip-tests)
		is_bool "$name" "$value"
		skip_tests=$value
		;;
	skip-schema-validation)
		is_bool "$name" "$value"
		skip_schema=$value
		;;
	kube-version) kube_version=$value ;;
	api-versions) param_api_versions+=("$value") ;;
	*) die "parameter $name: not handled by generate.sh" ;;
	esac
done <"$tmp/parameters"
if ((${#param_api_versions[@]})); then
	api_versions=$(
		IFS=,
		echo "${param_api_versions[*]}"
	)
fi

# seed_file sets $seed_file to the seed the sidecar renders this
# Application's chart with (see the top), and fails the generation with
# what to create when there is none.
seed_file() {
	local file=${DIGESTPIN_SEED_FILE:-} key project
	[[ "$file" == /* ]] ||
		die "the sidecar's DIGESTPIN_SEED_FILE is \"$file\": want the absolute path of the key seed of the mounted Secret digestpin-seed (repo-server-patch.yaml)"
	key=${file##*/}
	case ${DIGESTPIN_CMP_SEED_PER_PROJECT:-false} in
	false) ;;
	true)
		project=${ARGOCD_APP_PROJECT_NAME:-}
		# An AppProject's name is a DNS subdomain: no / and no leading
		# dot, so the key is a file of the Secret's folder.
		[[ "$project" =~ ^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$ ]] ||
			die "ARGOCD_APP_PROJECT_NAME \"$project\": not an Argo CD project name, and DIGESTPIN_CMP_SEED_PER_PROJECT=true picks the seed by it"
		key=project.$project
		file=${file%/*}/$key
		;;
	*) die "the sidecar's DIGESTPIN_CMP_SEED_PER_PROJECT=$DIGESTPIN_CMP_SEED_PER_PROJECT: want true or false" ;;
	esac
	if [[ ! -e "$file" ]]; then
		[[ "$key" != project.* ]] ||
			die "no seed for the project $project at $file: add the key $key to the Secret digestpin-seed (SECURITY.md: The seed); nothing rendered"
		die "no seed at $file: create the Secret digestpin-seed: kubectl -n argocd create secret generic digestpin-seed --from-file=$key=<(digestpin seed) (SECURITY.md: The seed); nothing rendered"
	fi
	[[ -r "$file" ]] ||
		die "seed file $file: the sidecar's user $(id -u) cannot read it: give the repo server's pod securityContext.fsGroup: 999 (repo-server-patch.yaml)"
	seed_file=$file
}

# render writes the manifests of a kustomization or a plain folder to
# stdout.
render() {
	case $flavour in
	kustomization) kustomize build . ;;
	directory)
		local f
		for f in "${manifests[@]}"; do
			cat -- "$f"
			# A file without a final newline must not run into the
			# separator.
			[[ -z "$(tail -c 1 -- "$f")" ]] || echo
			echo ---
		done
		;;
	esac
}

case $flavour in
helm)
	seed_file
	# Every value goes in a --flag=VALUE word and the release name and
	# the chart after --, so that no value of the Application is ever
	# read as a flag of digestpin template's (a release name
	# "--seed-file=x" would choose the seed, "--log-file=x" write a file
	# of the sidecar's).
	helm_args=("--seed-file=$seed_file" "--namespace=$namespace")
	# Render for the destination cluster, as Argo CD's built-in Helm does.
	if [[ -n "$kube_version" ]]; then
		helm_args+=("--kube-version=$kube_version")
	fi
	if [[ -n "$api_versions" ]]; then
		helm_args+=("--api-versions=$api_versions")
	fi
	IFS=, read -r -a values_files <<<"${ARGOCD_ENV_VALUES_FILES:-}"
	for f in "${values_files[@]}" "${param_values_files[@]}"; do
		f=${f#"${f%%[![:space:]]*}"} # trim leading blanks
		f=${f%"${f##*[![:space:]]}"} # trim trailing blanks
		[[ -n "$f" ]] || continue
		if [[ "$ignore_missing" == true && ! -e "$f" && ! -L "$f" ]]; then
			echo "digestpin-cmp: values file $f: no such file, ignored (ignore-missing-value-files)" >&2
			continue
		fi
		inside_repo "values file" "$f"
		no_list "values file" "$inside_repo" "$f"
		helm_args+=("--values=$inside_repo")
	done
	# Inline values come after the files, as in Argo CD. A file, not the
	# command line: they may hold secrets, and Helm's errors quote its
	# command line.
	if [[ "$has_inline_values" == true ]]; then
		(
			umask 077
			printf '%s' "$inline_values" >"$tmp/values-parameter.yaml"
		)
		helm_args+=("--values=$tmp/values-parameter.yaml")
	fi
	helm_args+=("${sets[@]}")
	for ((i = 0; i < ${#set_files[@]}; i += 2)); do
		inside_repo "set-file ${set_files[i]}" "${set_files[i + 1]}"
		no_list "set-file ${set_files[i]}" "$inside_repo" "${set_files[i + 1]}"
		helm_args+=("--set-file=${set_files[i]}=$inside_repo")
	done
	if [[ "$skip_crds" == false ]]; then
		helm_args+=(--include-crds)
	fi
	if [[ "$skip_tests" == true ]]; then
		helm_args+=(--skip-tests)
	fi
	if [[ "$skip_schema" == true ]]; then
		helm_args+=(--skip-schema-validation)
	fi
	;;
kustomization)
	# The Helm options of the Application's env do not apply either.
	[[ -z "${ARGOCD_ENV_VALUES_FILES:-}" ]] || die "VALUES_FILES: only for a Helm chart, and ${ARGOCD_APP_SOURCE_PATH:-the source folder} is a kustomization (no Chart.yaml)"
	;;
directory)
	[[ -z "${ARGOCD_ENV_VALUES_FILES:-}" ]] || die "VALUES_FILES: only for a Helm chart, and ${ARGOCD_APP_SOURCE_PATH:-the source folder} holds plain manifests (no Chart.yaml)"
	manifests=()
	shopt -s nullglob
	for f in *.yaml *.yml *.json; do
		inside_repo "manifest" "$f"
		manifests+=("$f")
	done
	shopt -u nullglob
	# Sorted by name across the three patterns, as Argo CD reads them.
	if ((${#manifests[@]})); then
		mapfile -d '' -t manifests < <(printf '%s\0' "${manifests[@]}" | LC_ALL=C sort -z)
	else
		die "${ARGOCD_APP_SOURCE_PATH:-the source folder}: no Chart.yaml, no kustomization and no *.yaml, *.yml or *.json file: nothing to render"
	fi
	;;
esac

# Options reach digestpin as flags (pin_args) or, where digestpin's
# messages should name them as the Application wrote them, as the variable
# of the same name (pin_env), which wins over the sidecar's own.
pin_args=()
pin_env=()
if [[ -n "${ARGOCD_ENV_DIGESTPIN_LOCK:-}" ]]; then
	inside_repo "lock file" "$ARGOCD_ENV_DIGESTPIN_LOCK"
	pin_args+=("--lock=$ARGOCD_ENV_DIGESTPIN_LOCK")
	case "${ARGOCD_ENV_DIGESTPIN_FROZEN:-true}" in
	true) pin_args+=(--frozen) ;;
	false) ;;
	*) die "DIGESTPIN_FROZEN=${ARGOCD_ENV_DIGESTPIN_FROZEN}: want true or false" ;;
	esac
fi
if [[ -n "${ARGOCD_ENV_DIGESTPIN_CONFIG:-}" ]]; then
	inside_repo "configuration file" "$ARGOCD_ENV_DIGESTPIN_CONFIG"
	pin_env+=("DIGESTPIN_CONFIG=$ARGOCD_ENV_DIGESTPIN_CONFIG")
fi
# option NAME passes ARGOCD_ENV_NAME to digestpin as the variable NAME
# when set: digestpin's messages then name what the Application wrote
# (DIGESTPIN_MODE), not a flag it never wrote (--mode).
option() {
	local var="ARGOCD_ENV_$1"
	if [[ -n "${!var:-}" ]]; then
		pin_env+=("$1=${!var}")
	fi
}
option DIGESTPIN_CACHE_TTL
option DIGESTPIN_MODE
option DIGESTPIN_REGISTRY_MIRROR
option DIGESTPIN_PLATFORM
option DIGESTPIN_ON_ERROR
option DIGESTPIN_VERBOSE

case $flavour in
helm) env "${pin_env[@]}" digestpin template "${helm_args[@]}" "${pin_args[@]}" -- "$release" . ;;
*) render | env "${pin_env[@]}" digestpin "${pin_args[@]}" ;;
esac
