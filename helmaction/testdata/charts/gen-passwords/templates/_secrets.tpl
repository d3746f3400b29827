{{- /* The password under .key in the values, or a generated one. */ -}}
{{- define "gen.secrets.passwords.manage" -}}
{{- $given := index .context.Values.auth .key -}}
{{- if $given -}}
{{- $given | b64enc | quote -}}
{{- else -}}
{{- randAlphaNum 16 | b64enc | quote -}}
{{- end -}}
{{- end -}}
