#!/usr/bin/env bash
# test-deps.sh installs what the end-to-end tests need beyond Go and make,
# when it is missing: script(1) for a pseudo-terminal (Helm 4's
# --tty-errors), bash-completion, zsh and fish for the completion scripts, curl for the
# plugin install hook, wget for the Argo CD init container's busybox branch, git for the Helm 3 plugin install from a git URL,
# redis-server for the shared cache and state on Redis, PostgreSQL and
# setpriv for the private Sigstore's Trillian (e2e/flux), time(1) for the
# peak memory of the hostile-input runs, shellcheck for `make lint`.
# `make test` runs it, so the README's quick start works on a fresh
# Debian or Ubuntu machine; elsewhere it names what to install.
set -o errexit -o nounset -o pipefail

need=()
command -v script >/dev/null || need+=(bsdutils)
[ -f /usr/share/bash-completion/bash_completion ] || need+=(bash-completion)
command -v zsh >/dev/null || need+=(zsh)
command -v fish >/dev/null || need+=(fish)
command -v curl >/dev/null || need+=(curl)
command -v wget >/dev/null || need+=(wget)
[ -x /usr/bin/time ] || need+=(time)
command -v git >/dev/null || need+=(git)
command -v redis-server >/dev/null || need+=(redis-server)
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || need+=(postgresql)
command -v setpriv >/dev/null || need+=(util-linux)
command -v shellcheck >/dev/null || need+=(shellcheck)
((${#need[@]})) || exit 0

if ! command -v apt-get >/dev/null; then
  echo "test-deps: install ${need[*]} (the end-to-end tests use them)" >&2
  exit 1
fi
sudo=
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "test-deps: as root, run: apt-get install ${need[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "test-deps: installing ${need[*]}"
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${need[@]}" >/dev/null
