{{- define "edge-proxy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* release-chart, unless the release name already holds the chart's name. */}}
{{- define "edge-proxy.fullname" -}}
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

{{/* The controller's objects: <fullname>-<controller.name>. */}}
{{- define "edge-proxy.controller.fullname" -}}
{{- printf "%s-%s" (include "edge-proxy.fullname" .) .Values.controller.name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "edge-proxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "edge-proxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "edge-proxy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 }}
{{ include "edge-proxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.controller.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: {{ include "edge-proxy.name" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The controller's pods. */}}
{{- define "edge-proxy.controller.selectorLabels" -}}
{{ include "edge-proxy.selectorLabels" . }}
app.kubernetes.io/component: {{ .Values.controller.name }}
{{- end }}

{{- define "edge-proxy.controller.labels" -}}
{{ include "edge-proxy.labels" . }}
app.kubernetes.io/component: {{ .Values.controller.name }}
{{- end }}

{{- define "edge-proxy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "edge-proxy.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The admission webhook's Service and configuration. */}}
{{- define "edge-proxy.admission.fullname" -}}
{{- printf "%s-admission" (include "edge-proxy.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The leader election lease. */}}
{{- define "edge-proxy.electionId" -}}
{{- printf "%s-leader" (include "edge-proxy.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
