#!/usr/bin/env bash
# init.sh is the init command of the digestpin Config Management Plugin
# (plugin.yaml). Argo CD runs it in the Application's source folder before
# every generation. First it checks the sidecar's tools, so that a broken
# image fails with one line that says so rather than with a render error.
# Then, for a Helm chart whose dependencies are not all in charts/ already,
# it runs `helm dependency build`, as Argo CD's own Helm does, so that
# the generate command (digestpin argocd generate) renders the chart as
# `helm install` would. A kustomization or
# a folder of plain manifests needs nothing.
#
# Dependencies from file:// work as they are; oci:// ones log in through
# HELM_REGISTRY_CONFIG (the mounted docker config). https:// chart
# repositories need no configuration when they are public: Helm fetches
# their index. Credentials (or a CA) for a private one come from the
# repository config the operator mounts, HELM_REPOSITORY_CONFIG (see
# repo-server-patch.yaml, a Secret with a repositories.yaml as `helm repo
# add` writes it); a repository listed there is asked with them.
set -o errexit -o nounset -o pipefail

die() {
	echo "digestpin-cmp: $*" >&2
	exit 1
}

# The start-up check: both tools run, and say which version they are
# (Argo CD shows init's stderr only on failure, and logs it at --loglevel
# info).
for tool in digestpin helm; do
	command -v "$tool" >/dev/null || die "$tool is not on the sidecar's PATH ($PATH): install the plugin with scripts/argocd/repo-server-patch.yaml or argocd-values.yaml (Argo CD's image and the init container digestpin-install), or use the image built from scripts/argocd/Dockerfile"
done
# digestpin exits 2 for a DIGESTPIN_* variable of the sidecar that it
# refuses (a retired one, a value it cannot read): its own line says
# which, and is passed on as it is.
status=0
v=$(digestpin --version 2>&1) || status=$?
if [[ "$status" == 2 ]]; then
	echo "$v" >&2
	exit 2
fi
[[ "$status" == 0 ]] || die "digestpin --version failed: $v"
h=$(helm version --short 2>&1) || die "helm version failed: $h"
echo "digestpin-cmp: $v, helm $h" >&2
if [[ ! -f Chart.yaml && (-f kustomization.yaml || -f kustomization.yml || -f Kustomization) ]]; then
	command -v kustomize >/dev/null || die "kustomize is not on the sidecar's PATH ($PATH), and ${ARGOCD_APP_SOURCE_PATH:-the source folder} is a kustomization: run the sidecar on Argo CD's image, which has it, or on the image built from scripts/argocd/Dockerfile"
fi

[[ -f Chart.yaml ]] || exit 0
grep -q '^dependencies:' Chart.yaml || exit 0
# Every dependency already in charts/ (vendored as an archive or a folder,
# or built by an earlier generation of the same copy): nothing to fetch,
# nothing to ask a repository.
if helm dependency list . 2>/dev/null | awk 'NR > 1 && NF && $NF != "ok" && $NF != "unpacked" { missing = 1 } END { exit !missing }'; then
	helm dependency build . >&2
fi
