{{/* Names */}}
{{- define "helm-locker.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "helm-locker.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "helm-locker.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "helm-locker.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "helm-locker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "helm-locker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "helm-locker.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "helm-locker.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret holding the serving certificate. */}}
{{- define "helm-locker.tlsSecret" -}}
{{- if eq .Values.certificates.mode "given" }}
{{- required "certificates.given.secretName is required in mode given (certs-gen --secret NAME writes one)" .Values.certificates.given.secretName }}
{{- else }}
{{- printf "%s-tls" (include "helm-locker.fullname" .) }}
{{- end }}
{{- end }}

{{- define "helm-locker.mutating" -}}
{{- if or .Values.webhook.mutating (eq .Values.mode "repair") }}true{{ end }}
{{- end }}

{{/*
One webhook of a webhook configuration. The same safe defaults as webhook-config/validating.yaml
(see the comments there; tests/e2e/test_chart.py checks that they agree). Rules enumerate the
API groups: a rule for all groups would also send leases, events, tokenreviews and
subjectaccessreviews to the locker, and rules cannot exclude.
*/}}
{{- define "helm-locker.webhook" -}}
- name: {{ .name }}
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: {{ .root.Values.webhook.failurePolicy }}
  timeoutSeconds: {{ .root.Values.webhook.timeoutSeconds }}
  matchPolicy: Equivalent
  {{- if .mutating }}
  reinvocationPolicy: Never
  {{- end }}
  clientConfig:
    {{- if eq .root.Values.certificates.mode "given" }}
    caBundle: {{ required "certificates.given.caBundle is required in mode given (base64 of the CA, certs-gen writes it as ca-bundle.b64)" .root.Values.certificates.given.caBundle }}
    {{- end }}
    service:
      name: {{ include "helm-locker.fullname" .root }}
      namespace: {{ .root.Release.Namespace }}
      path: {{ .path }}
      port: {{ .root.Values.service.port }}
  namespaceSelector:
    matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
      {{- range .root.Values.webhook.excludeNamespaces }}
      - {{ . }}
      {{- end }}
      {{- if not (has .root.Release.Namespace .root.Values.webhook.excludeNamespaces) }}
      - {{ .root.Release.Namespace }}
      {{- end }}
  {{- include "helm-locker.matchConditions" .root }}
  {{- if .status }}
  # Only objects Helm manages (Helm labels every object it applies): status writes are frequent.
  objectSelector:
    matchLabels:
      app.kubernetes.io/managed-by: Helm
  rules:
  - apiGroups: [""]
    apiVersions: ["*"]
    operations: [UPDATE]
    resources:
    - namespaces/status
    - persistentvolumeclaims/status
    - persistentvolumes/status
    - replicationcontrollers/status
    - resourcequotas/status
    - services/status
    scope: "*"
  - apiGroups:
    - apiextensions.k8s.io
    - apiregistration.k8s.io
    - apps
    - autoscaling
    - batch
    - networking.k8s.io
    - policy
    - storage.k8s.io
    {{- range .root.Values.webhook.extraApiGroups }}
    - {{ . }}
    {{- end }}
    apiVersions: ["*"]
    operations: [UPDATE]
    resources: ["*/status"]
    scope: "*"
  {{- else }}
  rules:
  - apiGroups: [""]
    apiVersions: ["*"]
    operations: [CREATE, UPDATE, DELETE]
    resources:
    - configmaps
    - endpoints
    - limitranges
    - namespaces
    - namespaces/finalize
    - persistentvolumeclaims
    - persistentvolumes
    - pods
    - pods/eviction
    - pods/resize
    - podtemplates
    - replicationcontrollers
    - replicationcontrollers/scale
    - resourcequotas
    - secrets
    - serviceaccounts
    - services
    scope: "*"
  - apiGroups:
    - apiextensions.k8s.io
    - apiregistration.k8s.io
    - apps
    - autoscaling
    - batch
    - discovery.k8s.io
    - extensions
    - flowcontrol.apiserver.k8s.io
    - networking.k8s.io
    - node.k8s.io
    - policy
    - rbac.authorization.k8s.io
    - scheduling.k8s.io
    - storage.k8s.io
    apiVersions: ["*"]
    operations: [CREATE, UPDATE, DELETE]
    resources: ["*", "*/scale"]
    scope: "*"
  {{- with .root.Values.webhook.extraApiGroups }}
  - apiGroups: {{ toJson . }}
    apiVersions: ["*"]
    operations: [CREATE, UPDATE, DELETE]
    resources: ["*", "*/scale"]
    scope: "*"
  {{- end }}
  {{- end }}
{{- end }}

{{/*
Kubernetes 1.28 and newer (matchConditions: beta and on by default in 1.28, GA in 1.30): the
API server calls the webhook only when every condition holds. files/match-conditions.yaml is a
copy of webhook-config/match-conditions/match-conditions.yaml, which certs-gen and
webhook-config-1.28 use (core/tests/match_conditions.rs keeps them equal).
*/}}
{{- define "helm-locker.matchConditions" -}}
{{- if and .Values.webhook.matchConditions (semverCompare ">=1.28-0" .Capabilities.KubeVersion.Version) }}
  # Only writes that could concern an object a Helm release owns (webhook.matchConditions).
  matchConditions:
  {{- $conditions := list }}
  {{- range (fromYaml (.Files.Get "files/match-conditions.yaml")).conditions }}
  {{- /* Sound only with the locker's default exemptions, which a config's `exempt` replaces. */}}
  {{- if not (and (eq .name "helm-locker.io/not-the-control-plane") (hasKey ($.Values.config | default dict) "exempt")) }}
  {{- $conditions = append $conditions . }}
  {{- end }}
  {{- end }}
  {{- $conditions | toYaml | nindent 2 }}
{{- end }}
{{- end }}

{{- define "helm-locker.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "certManager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "helm-locker.tlsSecret" .) }}
{{- end }}
{{- end }}

{{/* A duration such as 30s, 15m or 4h, in seconds. */}}
{{- define "helm-locker.seconds" -}}
{{- $n := trimSuffix "s" (trimSuffix "m" (trimSuffix "h" .)) | int -}}
{{- if hasSuffix "h" . }}{{ mul $n 3600 }}{{ else if hasSuffix "m" . }}{{ mul $n 60 }}{{ else }}{{ $n }}{{ end -}}
{{- end -}}
