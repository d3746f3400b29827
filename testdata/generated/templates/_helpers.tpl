{{- define "webhook.password" -}}
{{ randAlphaNum 24 }}
{{- end -}}
{{- define "webhook.certs" -}}
{{- $svc := printf "%s-webhook.%s.svc" .Release.Name .Release.Namespace -}}
{{- $ca := genCA (printf "%s-ca" .Release.Name) (int .Values.certDays) -}}
{{- $cert := genSignedCert $svc nil (list $svc (printf "%s.%s" $svc .Values.clusterDomain)) (int .Values.certDays) $ca -}}
caCert: {{ $ca.Cert | b64enc }}
tlsCert: {{ $cert.Cert | b64enc }}
tlsKey: {{ $cert.Key | b64enc }}
{{- end -}}
