// The rules and alerts with Kubernetes names joined from kube-state-metrics
// (_config.kubeNamesSource), and QuotaExporterMissing judged per node from kube_node_info
// (_config.exporterMissingUsesKubeStateMetrics), for quota-exporter-mixin/tests/ksm_test.yaml. `make test-mixin` renders them
// with `jsonnet -S -m DIR` next to a copy of that test file.
local mixin = (import '../mixin.libsonnet') + { _config+:: { kubeNamesSource: 'kube-state-metrics', exporterMissingUsesKubeStateMetrics: true } };
local yaml(x) = std.manifestYamlDoc(x, indent_array_in_object=false, quote_keys=false) + '\n';

{
  'quota-rules.yaml': yaml(mixin.prometheusRules),
  'quota-alerts.yaml': yaml(mixin.prometheusAlerts),
}
