{{- define "web.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}{{ .Release.Name | trunc 63 }}{{ else }}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{ end }}
{{- end }}
{{- define "web.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{/* Renders a nested settings map as dotted keys, one level at a time. */}}
{{- define "web.flatten" -}}
{{- range $k, $v := .map }}
{{- if kindIs "map" $v }}
{{- include "web.flatten" (dict "map" $v "prefix" (printf "%s%s." $.prefix $k)) }}
{{- else }}
{{ $.prefix }}{{ $k }}={{ $v }}
{{- end }}
{{- end }}
{{- end -}}
