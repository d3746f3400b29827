#!/usr/bin/env bash
# The Argo CD plugin's generate command is digestpin argocd generate (plugin.yaml runs it); this path stays for installs and images that name it.
exec digestpin argocd generate "$@"
