{{- define "gen.password" -}}
{{ randAlphaNum 24 }}
{{- end -}}

{{- define "gen.tls" -}}
{{- $ca := genCA (printf "%s-ca" .name) 365 -}}
{{- $cert := genSignedCert .name nil (list .name) 365 $ca -}}
tls.key: {{ $cert.Key | b64enc }}
tls.crt: {{ $cert.Cert | b64enc }}
{{- end -}}
