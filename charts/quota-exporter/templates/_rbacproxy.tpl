{{/* kube-rbac-proxy (kubeRBACProxy.enabled): its container, volumes and authorization config. */}}

{{- define "quota-exporter.rbacProxyConfigName" -}}
{{- printf "%s-rbac-proxy" (include "quota-exporter.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "quota-exporter.rbacProxyContainer" -}}
{{- $krp := .Values.kubeRBACProxy -}}
- name: kube-rbac-proxy
  image: {{ include "quota-exporter.rbacProxyImage" . }}
  imagePullPolicy: {{ $krp.image.pullPolicy }}
  args:
    - --secure-listen-address=:{{ .Values.web.port }}
    - --upstream=http://127.0.0.1:{{ $krp.upstreamPort }}/
    - --config-file=/etc/kube-rbac-proxy/config.yaml
    # The kubelet's probes carry no token: these two paths only pass unauthenticated.
    - --ignore-paths=/-/ready,/-/healthy
    {{- if .Values.web.tls.enabled }}
    - --tls-cert-file=/etc/quota-exporter/tls/tls.crt
    - --tls-private-key-file=/etc/quota-exporter/tls/tls.key
    - --tls-min-version=Version{{ .Values.web.tls.minVersion }}
    {{- end }}
    {{- with $krp.extraArgs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: metrics
      containerPort: {{ .Values.web.port }}
      protocol: TCP
  securityContext:
    {{- $sc := dict "runAsUser" 65534 "runAsGroup" 65534 "runAsNonRoot" true "privileged" false "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "capabilities" (dict "drop" (list "ALL")) }}
    {{- toYaml (mergeOverwrite $sc (deepCopy $krp.containerSecurityContext)) | nindent 4 }}
  {{- with $krp.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  # The only container with an API token (TokenReview, SubjectAccessReview).
  volumeMounts:
    - name: kube-rbac-proxy-config
      mountPath: /etc/kube-rbac-proxy
      readOnly: true
    - name: kube-api-access
      mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      readOnly: true
    {{- if .Values.web.tls.enabled }}
    - name: tls
      mountPath: /etc/quota-exporter/tls
      readOnly: true
    {{- end }}
{{- end }}

{{- define "quota-exporter.rbacProxyVolumes" -}}
- name: kube-rbac-proxy-config
  configMap:
    name: {{ include "quota-exporter.rbacProxyConfigName" . }}
# What automountServiceAccountToken would mount into every container, for the proxy alone.
- name: kube-api-access
  projected:
    defaultMode: 0444
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3607
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                apiVersion: v1
                fieldPath: metadata.namespace
{{- end }}
