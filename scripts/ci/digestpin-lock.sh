#!/usr/bin/env bash
# digestpin-lock.sh is a CI step that records, or checks, the digests of a
# Helm chart's images in a digestpin lock file.
#
# Usage:
#   digestpin-lock.sh [--check] [--lock FILE] [--output FILE] [--summary FILE] [--seed-file FILE] [--commit|--push] [--] CHART [HELM TEMPLATE FLAGS...]
#   digestpin-lock.sh --flux [--check] [--summary FILE] [--commit|--push] [--] FILE...
#
# Record (the default), after CI pushed the images:
#   digestpin template RELEASE CHART [FLAGS...] --seed-file SEED --write-lock FILE
# FILE (default CHART/digests.lock) then holds the digest of every image the
# chart uses, sorted: commit it, and Argo CD's digestpin plugin (or any
# `digestpin --lock FILE --frozen`) renders from it without asking a
# registry. The step says on stderr whether FILE changed.
#
# Check (--check): renders with `digestpin template … --lock FILE --check`
# and fails, naming each image, when the registry serves another digest
# than FILE, or an image is missing from it: a gate for pull requests and
# scheduled jobs.
#
# digestpin template renders the chart as `helm template` does (Helm 4's
# engine, helm template's flags), every generated password, key and
# certificate derived from the seed (docs/deterministic.md). The
# chart is rendered before any image is resolved: when it does not render,
# the step says so, with the reason, and neither asks a registry nor
# touches FILE (a failed render is never taken for a registry difference,
# nor recorded as a lock file without images).
#
# The seed: --seed-file SEED, else DIGESTPIN_SEED_FILE (a file that
# `digestpin seed` wrote, mode 0600, kept as a CI secret; SECURITY.md: The
# seed). Without one, the step renders with a new seed of its own, in a
# private temporary folder, removed at the end: the lock file holds image
# digests only, and the manifests are discarded, so no generated value
# leaves the step. --output keeps the manifests, and needs the seed.
#
# --output FILE keeps the pinned manifests (by default they are discarded).
# FILE is replaced only when digestpin wrote other bytes, so that an
# unchanged release leaves it untouched and there is nothing to commit; a
# failed step leaves FILE as it was. With the same seed, a chart's
# generated certificates and passwords are the same bytes on every run.
#
# What moved: the step prints digestpin's summary of the run (each image
# whose digest moved, old → new, with the workloads that roll; images
# added, removed and left as tags) on stderr, appends it in Markdown to
# $GITHUB_STEP_SUMMARY when that is set (a GitHub Actions job summary),
# writes it in Markdown to --summary FILE when given (whatever the step's
# outcome, once a render got that far: a GitLab artifact exposed in the
# merge request, a pull-request comment's body), and writes it into the
# message of the commit below, e.g.
#   registry.example/shop/web:dev a1b2c3d4e5f6 → 9f8e7d6c5b4a: Deployment/prod/web
# A --check that fails says so too.
#
# --commit (record only) then commits the lock file and the --output file
# in the git repository of the current folder when they differ from HEAD,
# a new, untracked lock file included; --push also pushes that commit, to
# PUSH_BRANCH (default: the branch checked out) of PUSH_REMOTE (default
# origin). Nothing is committed when nothing changed. Pipelines that push
# to one branch at once: when the push is rejected because the branch
# moved on, the step fetches the branch, rebases onto it, renders the chart
# again (every image resolved again) and records and commits the lock file
# anew, then pushes again, up to PUSH_ATTEMPTS times (default 10), after a
# random pause that grows with each attempt; when the branch already holds
# what it records, it is done.
#
# Flux (--flux): the FILEs are Flux HelmReleases or Kustomizations, and
# `digestpin flux pin FILE...` writes the digest of every image each runs
# into the FILE itself (docs/flux.md) in place of a lock file; --commit and
# --push commit the FILEs, and a push the branch moved past pins them again
# on the branch as it is now, as for a lock file. --check runs it with
# --dry-run and exits 3 when a FILE would change. What moved (per FILE and
# object: old → new digest per image, images added and removed, or that
# nothing moved; digestpin flux pin --summary) goes where a lock file's
# does: stderr, $GITHUB_STEP_SUMMARY, --summary FILE and the commit's
# message.
#
# The HELM TEMPLATE FLAGS are passed as they are (--values, --set,
# --namespace, …). A CHART that begins with - follows --; file names may
# hold spaces. The lock file and the --output file may be symbolic links
# only to files inside the working folder (the repository): the step never
# writes through a link that a commit points elsewhere.
#
# Environment: RELEASE is the release name (default: the chart folder's
# name); DIGESTPIN names the command (default: digestpin);
# COMMIT_MESSAGE the commit's message; PUSH_REMOTE and PUSH_BRANCH where
# --push pushes to; PUSH_ATTEMPTS how often (1 to 99, default 10); DIGESTPIN_* variables configure digestpin as usual
# (DIGESTPIN_PLATFORM, DIGESTPIN_INSECURE_REGISTRY, DIGESTPIN_SEED_FILE, …).
#
# Exit status: 0 done (--help too); 1 the render, digestpin or git failed
# (or --check could not check); 2 bad usage; 3 --check found the registry
# differs from the lock file (digestpin --check exits 3 for it too).
set -o errexit -o nounset -o pipefail

# usage prints the usage lines of the comment above.
usage() {
	sed -n 's/^# \{0,1\}//; 5,7p' "$0"
}

# bad_usage says what is wrong with the command line, then how to use it,
# on stderr, and exits 2.
bad_usage() {
	if [[ $# -gt 0 ]]; then
		echo "digestpin-lock: $*" >&2
	fi
	usage >&2
	exit 2
}

# fail says why the step failed, in one line on stderr, and exits 1.
fail() {
	echo "digestpin-lock: $*" >&2
	exit 1
}

check=false
lock=
output=/dev/null
summary=
seed=
commit=false
push=false
flux=false
while [[ $# -gt 0 ]]; do
	case "$1" in
	--check) check=true ;;
	--flux) flux=true ;;
	--commit) commit=true ;;
	--push) commit=true push=true ;;
	--lock)
		[[ $# -ge 2 ]] || bad_usage "--lock needs a FILE"
		lock=$2
		shift
		;;
	--output)
		[[ $# -ge 2 ]] || bad_usage "--output needs a FILE"
		output=$2
		shift
		;;
	--summary)
		[[ $# -ge 2 && -n "$2" ]] || bad_usage "--summary needs a FILE"
		summary=$2
		shift
		;;
	--seed-file)
		[[ $# -ge 2 && -n "$2" ]] || bad_usage "--seed-file needs a FILE"
		seed=$2
		shift
		;;
	-h | --help)
		usage
		exit 0
		;;
	--)
		shift
		break
		;;
	-*) bad_usage "unknown option $1" ;;
	*) break ;;
	esac
	shift
done
[[ $# -ge 1 ]] || bad_usage
[[ "$check" == false || "$commit" == false ]] || bad_usage "--commit and --push record a lock file; --check only reads it"
digestpin=${DIGESTPIN:-digestpin}
if [[ "$flux" == true ]]; then
	[[ -z "$lock" && "$output" == /dev/null && -z "$seed" ]] ||
		bad_usage "--flux writes the digests into the Flux FILEs themselves: --lock, --output and --seed-file are for a chart"
	fluxfiles=("$@")
	for f in "${fluxfiles[@]}"; do
		[[ -f "$f" ]] || bad_usage "Flux file $f not found"
		if [[ -n "$summary" && "$(readlink -m -- "$summary")" == "$(readlink -m -- "$f")" ]]; then
			bad_usage "--summary $summary is a Flux file: give it a file of its own"
		fi
	done
	chart="the Flux files ${fluxfiles[*]}"
	lock=/dev/null
else
	chart=$1
	shift
	[[ -d "$chart" ]] || bad_usage "chart folder $chart not found"
	lock=${lock:-$chart/digests.lock}
	release=${RELEASE:-$(basename -- "$(cd -- "$chart" && pwd -P)")}
	# digestpin reads a chart argument that begins with - as a flag.
	[[ "$chart" != -* ]] || chart=./$chart
fi
if [[ -z "$seed" && -z "${DIGESTPIN_SEED_FILE:-}" && "$output" != /dev/null ]]; then
	bad_usage "--output keeps the manifests, whose generated passwords, keys and certificates derive from the seed: give --seed-file FILE or DIGESTPIN_SEED_FILE (digestpin seed > FILE, kept as a CI secret)"
fi

# in_work checks that FILE ($2), when its name is in the working folder
# (relative without .., or absolute under it), is there once its symbolic
# links are followed: a pull request may commit a link in place of the
# lock file, to a file of the runner's that the step would then write
# (the job's own paths elsewhere, such as --output /tmp/x, are its choice).
work=$(pwd -P)
in_work() {
	local what=$1 file=$2 target
	case /$file/ in */../*) return 0 ;; esac
	if [[ "$file" == /* && "$file" != "$work"/* && "$file" != "$(pwd -L)"/* ]]; then
		return 0
	fi
	if [[ -e "$file" || -L "$file" ]]; then
		target=$(readlink -f -- "$file") || fail "$what $file: cannot follow its symbolic links"
	else
		# A folder that is missing fails later, when the step writes.
		target=$(cd -- "$(dirname -- "$file")" 2>/dev/null && pwd -P) || return 0
		target=$target/$(basename -- "$file")
	fi
	[[ "$target" == "$work"/* ]] ||
		fail "$what $file: a symbolic link to $target, outside the working folder $work: refusing to use it"
}
[[ "$flux" == true ]] || in_work "lock file" "$lock"
[[ "$output" == /dev/null ]] || in_work "output file" "$output"
if [[ -n "$summary" ]]; then
	in_work "summary file" "$summary"
	# The summary replaces its file: never the lock file's or the
	# manifests'.
	for f in "$lock" "$output"; do
		if [[ "$f" != /dev/null && "$(readlink -m -- "$summary")" == "$(readlink -m -- "$f")" ]]; then
			bad_usage "--summary $summary is the file of --lock or --output: give it a file of its own"
		fi
	done
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/digestpin-lock.XXXXXX")
newoutput=
newlock=
# finish appends the summary of the last render to the GitHub job summary,
# and puts it in the --summary file (a new file moved into place, never
# written through a link), once, whatever the step's outcome (a failed
# push still recorded it), and removes the temporary files.
finish() {
	if [[ -n "${GITHUB_STEP_SUMMARY:-}" && -s "$tmp/summary.md" ]]; then
		cat -- "$tmp/summary.md" >>"$GITHUB_STEP_SUMMARY" || echo "digestpin-lock: cannot append the summary to GITHUB_STEP_SUMMARY" >&2
	fi
	# The folder is checked again: a branch fetched after a rejected push
	# may have made it a link.
	if [[ -n "$summary" && -s "$tmp/summary.md" ]] && (in_work "summary file" "$summary"); then
		local new=
		if new=$(beside "$summary") && cat -- "$tmp/summary.md" >"$new" && chmod 0644 -- "$new" && mv -f -- "$new" "$summary"; then
			echo "digestpin-lock: summary written to $summary" >&2
		else
			rm -f -- ${new:+"$new"}
			echo "digestpin-lock: cannot write the summary to $summary" >&2
		fi
	fi
	rm -rf -- "$tmp"
	rm -f -- ${newlock:+"$newlock"} ${newoutput:+"$newoutput"}
}
trap finish EXIT
summary_flags=("--summary=$tmp/summary.md" "--summary-text=$tmp/summary.txt")

# say_summary prints the summary of the last render on stderr.
say_summary() {
	if [[ -s "$tmp/summary.txt" ]]; then
		sed 's/^/digestpin-lock: /' -- "$tmp/summary.txt" >&2
	fi
}

# The seed digestpin template renders with (see the top): the one given,
# else a throwaway one in the private $tmp (mktemp -d: mode 0700), which
# only the discarded manifests use.
seed_flags=()
if [[ "$flux" == true ]]; then
	: # digestpin flux pin renders with Helm's own functions: no seed
elif [[ -n "$seed" ]]; then
	seed_flags=("--seed-file=$seed")
elif [[ -z "${DIGESTPIN_SEED_FILE:-}" ]]; then
	"$digestpin" seed "$tmp/seed" || fail "digestpin seed failed (its error is above)"
	seed_flags=("--seed-file=$tmp/seed")
	echo "digestpin-lock: no seed given (--seed-file, DIGESTPIN_SEED_FILE): generated values come from a throwaway seed; the manifests are discarded" >&2
fi

# beside makes a new temporary file beside file $1, and prints its name.
beside() {
	local dir
	dir=$(dirname -- "$1")
	# mktemp reads a template that begins with - as an option.
	[[ "$dir" == /* ]] || dir=./$dir
	mktemp "$dir/.digestpin-lock.XXXXXX"
}

# template runs digestpin template with the HELM TEMPLATE FLAGS and the
# flags in pin_flags, writing the manifests to $1; its messages go to
# stderr. When the chart does not render (digestpin's error is about
# rendering the chart: nothing was resolved), it says so in one line with
# that error, and fails the step; otherwise it returns digestpin's status.
template() {
	local to=$1 status=0
	shift
	"$digestpin" template "$@" "${seed_flags[@]}" "${pin_flags[@]}" -- "$release" "$chart" >"$to" 2>"$tmp/digestpin.err" || status=$?
	cat -- "$tmp/digestpin.err" >&2
	[[ "$status" != 0 ]] || return 0
	local msg
	msg=$(grep -m 1 '^digestpin: error: rendering chart ' "$tmp/digestpin.err" || true)
	if [[ -n "$msg" ]]; then
		fail "render failed, nothing was resolved: digestpin template $release $chart: ${msg#digestpin: error: }"
	fi
	return "$status"
}

# pin renders the chart and pins it with the flags in pin_flags, into
# --output, and reports whether digestpin succeeded. An --output file is
# replaced only when digestpin wrote something else.
pin() {
	local status=0
	if [[ "$output" == /dev/null ]]; then
		template /dev/null "$@"
		return
	fi
	newoutput=$(beside "$output") || fail "cannot write beside $output"
	template "$newoutput" "$@" || status=$?
	[[ "$status" == 0 ]] || return "$status"
	if [[ -f "$output" ]] && cmp -s -- "$newoutput" "$output"; then
		echo "digestpin-lock: $output unchanged" >&2
		return 0
	fi
	mv -f -- "$newoutput" "$output" || fail "cannot replace $output"
	newoutput=
	echo "digestpin-lock: $output updated: commit it" >&2
}

# flux_pin runs digestpin flux pin on the FILEs, with the flags $@, its
# lines on stderr; its files are checked again each time: a branch fetched
# after a rejected push may have made one a link.
flux_pin() {
	local f
	for f in "${fluxfiles[@]}"; do
		in_work "Flux file" "$f"
	done
	rm -f -- "$tmp/summary.md" "$tmp/summary.txt"
	"$digestpin" flux pin "$@" "${summary_flags[@]}" -- "${fluxfiles[@]}" >"$tmp/flux.out" || {
		sed 's/^/digestpin-lock: /' -- "$tmp/flux.out" >&2
		fail "digestpin flux pin failed (its error is above), no file was written"
	}
	sed 's/^/digestpin-lock: /' -- "$tmp/flux.out" >&2
	say_summary
}

if [[ "$check" == true && "$flux" == true ]]; then
	flux_pin --dry-run
	if grep -q ': would write ' "$tmp/flux.out"; then
		echo "digestpin-lock: the Flux files do not match the registry: run this step without --check and commit them" >&2
		exit 3
	fi
	echo "digestpin-lock: the Flux files match the registry" >&2
	exit 0
fi

if [[ "$check" == true ]]; then
	[[ -f "$lock" ]] || fail "lock file $lock not found: record it first (without --check)"
	pin_flags=("--lock=$lock" --check "${summary_flags[@]}")
	status=0
	pin "$@" || status=$?
	case $status in
	0) say_summary ;;
	3)
		say_summary
		echo "digestpin-lock: $lock does not match the registry: run this step without --check and commit the lock file" >&2
		exit 3
		;;
	*) fail "digestpin failed (its error is above), $lock was not checked" ;;
	esac
	echo "digestpin-lock: $lock matches the registry" >&2
	exit 0
fi

# record renders the chart with the HELM TEMPLATE FLAGS ($@) and records
# the lock file (and --output). digestpin writes the new lock file beside
# the lock file (through a symbolic link, beside its target), as a copy of
# it, so that it keeps the file's mode; it replaces the lock file only when
# its content changed, so that an unchanged lock file is left untouched.
# The files are checked again each time: a branch fetched after a rejected
# push may have made the lock file a link.
record() {
	if [[ "$flux" == true ]]; then
		flux_pin
		return
	fi
	local target=$lock
	in_work "lock file" "$lock"
	[[ "$output" == /dev/null ]] || in_work "output file" "$output"
	if [[ -L "$lock" ]]; then
		target=$(readlink -f -- "$lock") || fail "cannot follow the symbolic link $lock"
	fi
	newlock=$(beside "$target") || fail "cannot write beside $lock"
	if [[ -f "$target" ]]; then
		cp -p -- "$target" "$newlock" || fail "cannot copy $lock"
	else
		rm -f -- "$newlock"
	fi
	pin_flags=("--write-lock=$newlock" "${summary_flags[@]}")
	rm -f -- "$tmp/summary.md" "$tmp/summary.txt"
	pin "$@" || fail "digestpin failed (its error is above), $lock was left as it was"
	say_summary
	if [[ -f "$target" ]] && cmp -s -- "$newlock" "$target"; then
		rm -f -- "$newlock"
		echo "digestpin-lock: $lock unchanged" >&2
	else
		mv -f -- "$newlock" "$target" || fail "cannot replace $lock"
		echo "digestpin-lock: $lock updated: commit it" >&2
	fi
	newlock=
}

record "$@"
[[ "$commit" == true ]] || exit 0

files=("$lock")
if [[ "$flux" == true ]]; then
	files=("${fluxfiles[@]}")
fi
if [[ "$output" != /dev/null ]]; then
	files+=("$output")
fi
# commit_files commits what changed, and fails (returns 1) when nothing
# did: git add, then compare the index with HEAD, so that a new, untracked
# lock file counts as a change (git diff alone does not see it).
commit_files() {
	git add -- "${files[@]}" || fail "git add ${files[*]} failed"
	if git diff --cached --quiet -- "${files[@]}"; then
		return 1
	fi
	# The message: COMMIT_MESSAGE (or ours), then what moved.
	{
		printf '%s\n' "${COMMIT_MESSAGE:-digestpin: pin the image digests of $chart}"
		if [[ -s "$tmp/summary.txt" ]]; then
			printf '\n'
			cat -- "$tmp/summary.txt"
		fi
	} >"$tmp/message"
	git commit --quiet -F "$tmp/message" -- "${files[@]}" ||
		fail "git commit ${files[*]} failed"
	echo "digestpin-lock: committed ${files[*]} as $(git rev-parse --short HEAD)" >&2
}
if ! commit_files; then
	echo "digestpin-lock: ${files[*]} as committed, nothing to commit" >&2
	exit 0
fi
[[ "$push" == true ]] || exit 0

remote=${PUSH_REMOTE:-origin}
branch=${PUSH_BRANCH:-$(git symbolic-ref --quiet --short HEAD || true)}
[[ -n "$branch" ]] || fail "no branch is checked out (detached HEAD): set PUSH_BRANCH to the branch to push to"
attempts=${PUSH_ATTEMPTS:-10}
[[ "$attempts" =~ ^[1-9][0-9]?$ ]] || bad_usage "PUSH_ATTEMPTS=$attempts: want a number of attempts from 1 to 99"

# backoff sleeps before attempt $1: a random time (full jitter) up to
# 0.25 s times 2^(attempt-2), at most 8 s (from the 7th attempt on), so that pipelines that collided
# do not collide again in step.
backoff() {
	local e=$(($1 - 2)) cap
	((e <= 5)) || e=5
	cap=$((250 << e))
	local ms=$(((RANDOM * 32768 + RANDOM) % cap))
	sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
}

# Pipelines that push to one branch at once: a push that the branch moved
# past is rejected; then the step fetches the branch, drops its own commit,
# brings any other local commits onto the branch (fast-forward, else
# rebase), renders the chart as it is on the branch now, resolving every
# image again, and records and commits the lock file anew, rather than
# merging lock files as text (the chart itself may have changed, and a
# digest recorded before another pipeline's push may be older than the
# registry's). When the branch already holds what it records, it is done.
# Other push failures (permissions, the network) fail at once.
attempt=1
while ! git push --quiet "$remote" "HEAD:refs/heads/$branch" 2>"$tmp/push.err"; do
	# Moved on: git's own refusal of a push that is not a fast-forward, or
	# the server's lost race for the branch (another push updated it first).
	# A hook or a protected branch that declines is not retried.
	if ! grep -qE '\[rejected\].*\((fetch first|non-fast-forward)\)|\[remote rejected\].*\((cannot lock ref|failed to update ref|incorrect old value)' "$tmp/push.err"; then
		cat -- "$tmp/push.err" >&2
		fail "git push to branch $branch failed (its error is above): the commit is only local; run the job again"
	fi
	if ((attempt >= attempts)); then
		fail "git push to branch $branch was rejected $attempt times (the branch kept moving; PUSH_ATTEMPTS=$attempts): the commit is only local; run the job again"
	fi
	attempt=$((attempt + 1))
	backoff "$attempt"
	echo "digestpin-lock: branch $branch moved on: fetching it and recording again (attempt $attempt of $attempts)" >&2
	git fetch --quiet "$remote" "refs/heads/$branch" 2>"$tmp/git.err" ||
		fail "git fetch of branch $branch failed: $(head -n 1 "$tmp/git.err")"
	git reset --quiet --keep HEAD^ 2>"$tmp/git.err" ||
		fail "cannot drop the lock file's commit to record it again: $(head -n 1 "$tmp/git.err")"
	if ! git merge --quiet --ff-only FETCH_HEAD >/dev/null 2>&1; then
		if ! git rebase --quiet FETCH_HEAD >/dev/null 2>"$tmp/git.err"; then
			conflicts=$(git diff --name-only --diff-filter=U | tr '\n' ' ')
			git rebase --abort >/dev/null 2>&1 || true
			fail "rebasing the local commits onto branch $branch failed${conflicts:+ (conflicts in ${conflicts% })}: $(head -n 1 "$tmp/git.err"); resolve it by hand"
		fi
	fi
	record "$@"
	if ! commit_files; then
		echo "digestpin-lock: branch $branch already holds ${files[*]} as recorded now, nothing to push" >&2
		exit 0
	fi
done
echo "digestpin-lock: pushed to branch $branch" >&2
