{{/* Chart name, truncated to the 63 characters a label value may hold. */}}
{{- define "crawlhouse.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the prefix of every resource name. */}}
{{- define "crawlhouse.fullname" -}}
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

{{- define "crawlhouse.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every resource. */}}
{{- define "crawlhouse.labels" -}}
helm.sh/chart: {{ include "crawlhouse.chart" . }}
{{ include "crawlhouse.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: crawlhouse
{{- end }}

{{- define "crawlhouse.selectorLabels" -}}
app.kubernetes.io/name: {{ include "crawlhouse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels and selector labels of one component: (dict "ctx" $ "component" "receiver"). */}}
{{- define "crawlhouse.componentLabels" -}}
{{ include "crawlhouse.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "crawlhouse.componentSelectorLabels" -}}
{{ include "crawlhouse.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "crawlhouse.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "crawlhouse.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image of one binary: (dict "ctx" $ "binary" "receiver"). */}}
{{- define "crawlhouse.image" -}}
{{- printf "%s/%s:%s" (trimSuffix "/" .ctx.Values.image.repository) .binary (.ctx.Values.image.tag | default .ctx.Chart.AppVersion) }}
{{- end }}

{{/* The Secret holding WEBHOOK_SECRETS and the other secret variables. */}}
{{- define "crawlhouse.secretName" -}}
{{- default (printf "%s-secrets" (include "crawlhouse.fullname" .)) .Values.secrets.existingSecret }}
{{- end }}

{{/*
Environment entries for secret variables: (dict "ctx" $ "keys" (list ...)).
Each comes from the Secret under its own name. Keys other than WEBHOOK_SECRETS
are optional: a Secret without them leaves the variable unset. A chart-managed
Secret holds only the keys that have a value.
*/}}
{{- define "crawlhouse.secretEnv" -}}
{{- $ctx := .ctx }}
{{- range .keys }}
- name: {{ . }}
  valueFrom:
    secretKeyRef:
      name: {{ include "crawlhouse.secretName" $ctx }}
      key: {{ . }}
      optional: {{ or (ne . "WEBHOOK_SECRETS") $ctx.Values.webhook.allowUnsigned }}
{{- end }}
{{- end }}

{{/* NATS variables both binaries read, for their ConfigMaps. */}}
{{- define "crawlhouse.natsConfig" -}}
NATS_URL: {{ .Values.nats.url | quote }}
NATS_STREAM: {{ .Values.nats.stream | quote }}
NATS_SUBJECT_PREFIX: {{ .Values.nats.subjectPrefix | quote }}
NATS_DEDUP_WINDOW: {{ .Values.nats.dedupWindow | quote }}
NATS_MAX_AGE: {{ .Values.nats.maxAge | quote }}
NATS_REPLICAS: {{ .Values.nats.replicas | quote }}
{{- if .Values.nats.credentials.secretName }}
NATS_CREDS: {{ printf "/etc/crawlhouse/nats-creds/%s" .Values.nats.credentials.key | quote }}
{{- end }}
{{- if .Values.nats.tls.caSecretName }}
NATS_TLS_CA: {{ printf "/etc/crawlhouse/nats-ca/%s" .Values.nats.tls.caKey | quote }}
{{- end }}
LOG_FORMAT: {{ .Values.logs.format | quote }}
LOG_LEVEL: {{ .Values.logs.level | quote }}
{{- end }}

{{/* Volumes for the NATS credentials file and CA, when configured. */}}
{{- define "crawlhouse.natsVolumes" -}}
{{- if .Values.nats.credentials.secretName }}
- name: nats-creds
  secret:
    secretName: {{ .Values.nats.credentials.secretName }}
    defaultMode: 0440
{{- end }}
{{- if .Values.nats.tls.caSecretName }}
- name: nats-ca
  secret:
    secretName: {{ .Values.nats.tls.caSecretName }}
    defaultMode: 0444
{{- end }}
{{- end }}

{{- define "crawlhouse.natsVolumeMounts" -}}
{{- if .Values.nats.credentials.secretName }}
- name: nats-creds
  mountPath: /etc/crawlhouse/nats-creds
  readOnly: true
{{- end }}
{{- if .Values.nats.tls.caSecretName }}
- name: nats-ca
  mountPath: /etc/crawlhouse/nats-ca
  readOnly: true
{{- end }}
{{- end }}

{{/* Soft spread across nodes when no topologySpreadConstraints are given: (dict "ctx" $ "component" "receiver" "values" .Values.receiver). */}}
{{- define "crawlhouse.topologySpread" -}}
{{- if .values.topologySpreadConstraints }}
{{- toYaml .values.topologySpreadConstraints }}
{{- else }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "crawlhouse.componentSelectorLabels" (dict "ctx" .ctx "component" .component) | nindent 6 }}
{{- end }}
{{- end }}

{{/* The URL to give the crawl API as its webhook URL. */}}
{{- define "crawlhouse.webhookURL" -}}
{{- if and .Values.receiver.ingress.enabled .Values.receiver.ingress.hosts }}
{{- $host := first .Values.receiver.ingress.hosts }}
{{- $tls := false }}
{{- range .Values.receiver.ingress.tls }}{{- if has $host .hosts }}{{- $tls = true }}{{- end }}{{- end }}
{{- printf "%s://%s%s" (ternary "https" "http" $tls) $host .Values.webhook.path }}
{{- else }}
{{- printf "http://%s-receiver.%s.svc:%v%s" (include "crawlhouse.fullname" .) .Release.Namespace .Values.receiver.service.port .Values.webhook.path }}
{{- end }}
{{- end }}
