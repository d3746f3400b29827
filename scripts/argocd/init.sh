#!/usr/bin/env bash
# init.sh is the init command of the digestpin Config Management Plugin
# (plugin.yaml). Argo CD runs it in the Application's source folder before
# every generation: it builds charts/ from Chart.yaml's dependencies, so
# that generate.sh renders the chart as `helm install` would.
#
# Dependencies from file:// and oci:// work as they are (OCI registries
# log in through HELM_REGISTRY_CONFIG, the mounted docker config); an
# https:// chart repository must be known to Helm first (HELM_REPOSITORY_CONFIG).
set -o errexit -o nounset -o pipefail

if [[ ! -f Chart.yaml ]]; then
	echo "digestpin-cmp: no Chart.yaml in ${ARGOCD_APP_SOURCE_PATH:-the source folder}: the digestpin plugin renders Helm charts" >&2
	exit 1
fi
if grep -q '^dependencies:' Chart.yaml; then
	helm dependency build --skip-refresh . >&2
fi
