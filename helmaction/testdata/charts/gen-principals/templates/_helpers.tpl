{{- /* A hexadecimal secret of . characters, one randInt per character. */ -}}
{{- define "gen.randHex" -}}
{{- $result := "" }}
{{- range $i := until . }}
{{- $result = print $result (printf "%x" (randInt 0 16)) }}
{{- end }}
{{- $result }}
{{- end -}}
