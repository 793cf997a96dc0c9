{{/* The chart's name, or nameOverride. */}}
{{- define "kukie-gitops.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: object names start with it. */}}
{{- define "kukie-gitops.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "kukie-gitops.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kukie-gitops.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the pods; never changed after an install. */}}
{{- define "kukie-gitops.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kukie-gitops.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kukie-gitops.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kukie-gitops.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The secret files the service reads: setting, file name, and the values' reference.
*/}}
{{- define "kukie-gitops.secretFiles" -}}
- env: KUKIE_GITHUB_PRIVATE_KEY_FILE
  file: github-private-key.pem
  ref: githubPrivateKey
- env: KUKIE_GITHUB_WEBHOOK_SECRET_FILE
  file: github-webhook-secret
  ref: githubWebhookSecret
- env: KUKIE_GITHUB_CLIENT_SECRET_FILE
  file: github-client-secret
  ref: githubClientSecret
- env: KUKIE_ENCRYPTION_KEY_FILE
  file: encryption-key
  ref: encryptionKey
- env: KUKIE_DATABASE_URL_FILE
  file: database-url
  ref: databaseURL
{{- end }}

{{/*
Fails the render when config sets what the chart sets itself: the value would be
overridden by the chart's environment variables (or fight them) without a word.
*/}}
{{- define "kukie-gitops.checkConfig" -}}
{{- $owned := dict
  "server" (list "address" "shutdown_timeout" "drain_delay")
  "metrics" (list "address")
  "pipeline" (list "cache_dir")
  "database" (list "url" "url_file")
  "github" (list "private_key_file" "webhook_secret_file" "client_secret_file")
  "encryption" (list "key_file") }}
{{- range $section, $keys := $owned }}
{{- $set := index $.Values.config $section | default dict }}
{{- range $keys }}
{{- if hasKey $set . }}
{{- fail (printf "config.%s.%s is set by the chart; see values.yaml (port, metrics.port, drainDelaySeconds, shutdownTimeoutSeconds, cache, secrets)" $section .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
