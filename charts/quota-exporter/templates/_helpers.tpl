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

{{/* An image reference: global.imageRegistry wins over the image's own registry; a digest wins over the tag. */}}
{{- define "quota-exporter.imageRef" -}}
{{- $img := .image }}
{{- $repo := $img.repository }}
{{- with (default $img.registry .global.imageRegistry) }}{{ $repo = printf "%s/%s" . $repo }}{{ end }}
{{- if $img.digest }}
{{- printf "%s@%s" $repo $img.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .defaultTag $img.tag) }}
{{- end }}
{{- end }}

{{- define "quota-exporter.image" -}}
{{- include "quota-exporter.imageRef" (dict "image" .Values.image "global" .Values.global "defaultTag" .Chart.AppVersion) }}
{{- end }}

{{- define "quota-exporter.rbacProxyImage" -}}
{{- include "quota-exporter.imageRef" (dict "image" .Values.kubeRBACProxy.image "global" .Values.global "defaultTag" "") }}
{{- end }}

{{/* The pod securityContext: what the collectors need, then openshift.seLinuxType, then the securityContext value merged over it. */}}
{{- define "quota-exporter.podSecurityContext" -}}
{{- $sc := dict "seccompProfile" (dict "type" "RuntimeDefault") }}
{{- if include "quota-exporter.readsProcesses" . }}
{{- $_ := set $sc "runAsUser" 0 }}
{{- $_ = set $sc "runAsGroup" 0 }}
{{- $_ = set $sc "runAsNonRoot" false }}
{{- else }}
{{- $_ := set $sc "runAsUser" 65534 }}
{{- $_ = set $sc "runAsGroup" 65534 }}
{{- $_ = set $sc "runAsNonRoot" true }}
{{- end }}
{{- if .Values.openshift.enabled }}
{{- $_ := set $sc "seLinuxOptions" (dict "type" .Values.openshift.seLinuxType) }}
{{- end }}
{{- toYaml (mergeOverwrite $sc (deepCopy .Values.securityContext)) }}
{{- end }}

{{/* The capabilities the collectors need, in the order they are added. */}}
{{- define "quota-exporter.capabilities" -}}
{{- $caps := list }}
{{- if include "quota-exporter.readsProcesses" . }}{{ $caps = concat $caps (list "SYS_PTRACE" "DAC_READ_SEARCH") }}{{ end }}
{{- if include "quota-exporter.usesBPF" . }}
{{- $caps = concat $caps (list "BPF" "PERFMON") }}
{{- if .Values.bpf.memlockCapability }}{{ $caps = append $caps "SYS_RESOURCE" }}{{ end }}
{{- end }}
{{- toJson $caps }}
{{- end }}

{{/* The exporter container's securityContext: least privilege for the collectors on, then the containerSecurityContext value merged over it. */}}
{{- define "quota-exporter.containerSecurityContext" -}}
{{- $caps := dict "drop" (list "ALL") }}
{{- $add := include "quota-exporter.capabilities" . | fromJsonArray }}
{{- if $add }}{{ $_ := set $caps "add" $add }}{{ end }}
{{- $sc := dict "privileged" false "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" $caps }}
{{- if include "quota-exporter.readsProcesses" . }}{{ $_ := set $sc "runAsUser" 0 }}{{ end }}
{{- toYaml (mergeOverwrite $sc (deepCopy .Values.containerSecurityContext)) }}
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

{{/* "true" when the exporter itself serves TLS or basic auth (--web.config.file); with kube-rbac-proxy the proxy serves TLS and the exporter plain HTTP on loopback. */}}
{{- define "quota-exporter.webConfigEnabled" -}}
{{- if and (or .Values.web.tls.enabled .Values.web.basicAuth.enabled) (not .Values.kubeRBACProxy.enabled) }}true{{ end }}
{{- end }}

{{- define "quota-exporter.webConfigSecretName" -}}
{{- printf "%s-web-config" (include "quota-exporter.fullname" .) }}
{{- end }}

{{- define "quota-exporter.scrapeAuthSecretName" -}}
{{- default (printf "%s-scrape-auth" (include "quota-exporter.fullname" .)) .Values.web.basicAuth.existingSecret }}
{{- end }}

{{- define "quota-exporter.scheme" -}}
{{- if or .Values.web.tls.enabled .Values.kubeRBACProxy.enabled }}https{{ else }}http{{ end }}
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
{{- else if $ctx.Values.kubeRBACProxy.enabled }}
# kube-rbac-proxy's own certificate is generated at start and signed by nobody (web.tls gives it one).
tlsConfig:
  insecureSkipVerify: true
{{- end }}
{{- with $m.authorization }}
authorization:
  {{- toYaml . | nindent 2 }}
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

{{/* The monitor spec fields of both monitors: scrape class and per-scrape limits (0: none). */}}
{{- define "quota-exporter.monitorSpec" -}}
{{- with .scrapeClassName }}
scrapeClassName: {{ . }}
{{- end }}
{{- range $k := list "sampleLimit" "targetLimit" "labelLimit" "labelNameLengthLimit" "labelValueLengthLimit" }}
{{- with index $ $k }}
{{ $k }}: {{ . }}
{{- end }}
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
{{- if and .Values.kubeRBACProxy.enabled .Values.web.basicAuth.enabled }}
{{- fail "kubeRBACProxy.enabled authenticates by token: turn web.basicAuth off" }}
{{- end }}
{{- if and .Values.kubeRBACProxy.enabled (eq (int .Values.kubeRBACProxy.upstreamPort) (int .Values.web.port)) }}
{{- fail "kubeRBACProxy.upstreamPort must differ from web.port (the proxy listens there)" }}
{{- end }}
{{- include "quota-exporter.validateNetworkPolicy" . }}
{{- end }}

{{/* The NetworkPolicy admits namespaces by kubernetes.io/metadata.name only: the API server sets it to the namespace's name, and nobody can change it; any other namespace label may be set by the namespace's owner, and an empty selector admits every namespace. */}}
{{- define "quota-exporter.validateNetworkPolicy" -}}
{{- $np := .Values.networkPolicy }}
{{- if hasKey $np "prometheusNamespaceSelector" }}
{{- fail "networkPolicy.prometheusNamespaceSelector is gone (its default {} admitted every namespace): the policy admits the namespaces named in networkPolicy.namespaces (by kubernetes.io/metadata.name); more sources in networkPolicy.extraFrom" }}
{{- end }}
{{- if $np.enabled }}
{{- if and (not $np.namespaces) (not $np.extraFrom) }}
{{- fail "networkPolicy.enabled admits nobody: name the monitoring namespace in networkPolicy.namespaces" }}
{{- end }}
{{- range $i, $peer := $np.extraFrom }}
{{- if hasKey $peer "namespaceSelector" }}
{{- $sel := $peer.namespaceSelector | default dict }}
{{- if not (or $sel.matchLabels $sel.matchExpressions) }}
{{- fail (printf "networkPolicy.extraFrom[%d]: an empty namespaceSelector admits every namespace" $i) }}
{{- end }}
{{- range $k, $_ := $sel.matchLabels }}
{{- if ne $k "kubernetes.io/metadata.name" }}
{{- fail (printf "networkPolicy.extraFrom[%d]: namespaceSelector on %s, a label the namespace's owner may set: select kubernetes.io/metadata.name" $i $k) }}
{{- end }}
{{- end }}
{{- range $e := $sel.matchExpressions }}
{{- if or (ne $e.key "kubernetes.io/metadata.name") (ne $e.operator "In") }}
{{- fail (printf "networkPolicy.extraFrom[%d]: namespaceSelector expression %s %s: only kubernetes.io/metadata.name In [...] names namespaces" $i $e.key $e.operator) }}
{{- end }}
{{- end }}
{{- else if hasKey $peer "ipBlock" }}
{{- if has $peer.ipBlock.cidr (list "0.0.0.0/0" "::/0") }}
{{- fail (printf "networkPolicy.extraFrom[%d]: ipBlock %s admits every address" $i $peer.ipBlock.cidr) }}
{{- end }}
{{- else }}
{{- fail (printf "networkPolicy.extraFrom[%d]: a podSelector alone admits pods by labels whoever creates pods in the exporter's namespace sets: add a namespaceSelector on kubernetes.io/metadata.name, or use an ipBlock" $i) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
