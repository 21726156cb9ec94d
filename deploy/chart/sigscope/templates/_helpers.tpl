{{/* The chart's name, or nameOverride. */}}
{{- define "sigscope.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object names: the release name, with the chart's name unless it already contains it. */}}
{{- define "sigscope.fullname" -}}
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

{{/* Labels that select the agent's pods; they never change after install. */}}
{{- define "sigscope.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sigscope.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "sigscope.labels" -}}
{{ include "sigscope.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: node-agent
app.kubernetes.io/part-of: sigscope
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "sigscope.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sigscope.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "sigscope.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The probes' port, scheme and headers: the health port in plain HTTP when
healthPort is set, else the main port as webConfig says.
*/}}
{{- define "sigscope.probeTarget" -}}
{{- if .Values.healthPort -}}
port: health
scheme: HTTP
{{- else -}}
port: metrics
scheme: {{ .Values.webConfig.probeScheme }}
{{- with .Values.webConfig.probeHTTPHeaders }}
httpHeaders:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}
