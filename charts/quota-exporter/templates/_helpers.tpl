{{/* Names, labels and the privileges that follow from the collectors. */}}

{{- define "quota-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "quota-exporter.fullname" -}}
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

{{- define "quota-exporter.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "quota-exporter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "quota-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "quota-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "quota-exporter.labels" -}}
helm.sh/chart: {{ include "quota-exporter.chart" . }}
{{ include "quota-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: exporter
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels of the objects a Prometheus selects (monitors, rules): the selector labels and the object's own. */}}
{{- define "quota-exporter.prometheusLabels" -}}
{{ include "quota-exporter.labels" .ctx }}
{{- with .ctx.Values.prometheusSelectorLabels }}
{{ toYaml . }}
{{- end }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "quota-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "quota-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "quota-exporter.image" -}}
{{- $repo := .Values.image.repository }}
{{- with .Values.image.registry }}{{ $repo = printf "%s/%s" . $repo }}{{ end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* "true" when a collector that reads other processes' /proc files is on: hostPID, root, SYS_PTRACE, DAC_READ_SEARCH. */}}
{{- define "quota-exporter.readsProcesses" -}}
{{- $c := .Values.collectors }}
{{- if or $c.process $c.go $c.jvm $c.malloc $c.smaps $c.gopause }}true{{ end }}
{{- end }}

{{/* "true" when a BPF collector is on: BPF, PERFMON. */}}
{{- define "quota-exporter.usesBPF" -}}
{{- if or .Values.collectors.gopause .Values.collectors.cfsstall }}true{{ end }}
{{- end }}

{{- define "quota-exporter.webConfigEnabled" -}}
{{- if or .Values.web.tls.enabled .Values.web.basicAuth.enabled }}true{{ end }}
{{- end }}

{{- define "quota-exporter.webConfigSecretName" -}}
{{- printf "%s-web-config" (include "quota-exporter.fullname" .) }}
{{- end }}

{{- define "quota-exporter.scrapeAuthSecretName" -}}
{{- default (printf "%s-scrape-auth" (include "quota-exporter.fullname" .)) .Values.web.basicAuth.existingSecret }}
{{- end }}

{{- define "quota-exporter.scheme" -}}
{{- if .Values.web.tls.enabled }}https{{ else }}http{{ end }}
{{- end }}

{{/* The endpoint settings shared by the PodMonitor and the ServiceMonitor: scheme, TLS, basic auth, job and target labels. */}}
{{- define "quota-exporter.endpoint" -}}
{{- $ctx := .ctx }}
{{- $m := .monitor }}
path: /metrics
scheme: {{ include "quota-exporter.scheme" $ctx }}
{{- with $m.interval }}
interval: {{ . }}
{{- end }}
{{- with $m.scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- if $ctx.Values.web.tls.enabled }}
tlsConfig:
  ca:
    secret:
      name: {{ $ctx.Values.web.tls.secretName }}
      key: ca.crt
  serverName: {{ $ctx.Values.web.tls.serverName | quote }}
{{- end }}
{{- if $ctx.Values.web.basicAuth.enabled }}
basicAuth:
  username:
    name: {{ include "quota-exporter.scrapeAuthSecretName" $ctx }}
    key: username
  password:
    name: {{ include "quota-exporter.scrapeAuthSecretName" $ctx }}
    key: password
{{- end }}
relabelings:
  # The mixin selects job="quota-exporter" (prometheus.jobName).
  - targetLabel: job
    replacement: {{ $ctx.Values.prometheus.jobName }}
  # One exporter per node: instance is the node name, which survives an exporter rollout.
  - sourceLabels: [__meta_kubernetes_pod_node_name]
    targetLabel: instance
  # The series carry the workload's namespace, pod and container: the exporter pod's own must
  # neither overwrite them nor rename them to exported_*.
  - action: labeldrop
    regex: (namespace|pod|container|endpoint|service)
{{- with $m.relabelings }}
{{ toYaml . }}
{{- end }}
{{- with $m.metricRelabelings }}
metricRelabelings:
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Fails the render on settings that cannot work. */}}
{{- define "quota-exporter.validate" -}}
{{- if and .Values.web.tls.enabled (not .Values.web.tls.secretName) }}
{{- fail "web.tls.enabled needs web.tls.secretName (a kubernetes.io/tls Secret)" }}
{{- end }}
{{- if and .Values.web.tls.enabled (not .Values.web.tls.serverName) }}
{{- fail "web.tls.enabled needs web.tls.serverName (the name the certificate holds, which the monitors verify)" }}
{{- end }}
{{- if .Values.web.basicAuth.enabled }}
{{- if and .Values.web.basicAuth.existingSecret (not .Values.web.basicAuth.passwordHash) }}
{{- fail "web.basicAuth.existingSecret needs web.basicAuth.passwordHash (the chart cannot read the Secret to hash it)" }}
{{- end }}
{{- if and (not .Values.web.basicAuth.existingSecret) (not .Values.web.basicAuth.password) }}
{{- fail "web.basicAuth.enabled needs web.basicAuth.password or web.basicAuth.existingSecret" }}
{{- end }}
{{- end }}
{{- if and .Values.prometheus.monitor.enabled (not .Values.service.enabled) }}
{{- fail "prometheus.monitor (a ServiceMonitor) needs service.enabled" }}
{{- end }}
{{- end }}
