{{/* The image tag: global.image.tag, else the chart's appVersion. */}}
{{- define "argo-cd.defaultTag" -}}
{{- default .Chart.AppVersion .Values.global.image.tag }}
{{- end -}}
