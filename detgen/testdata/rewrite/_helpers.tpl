{{- define "mychart.fullname" -}}
{{ .Release.Name }}-{{ randAlphaNum 5 | lower }}
{{- end -}}
{{- define "mychart.key" -}}
{{ genPrivateKey "ecdsa" }}
{{- end -}}
