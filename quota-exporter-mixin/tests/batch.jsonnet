// The rules and alerts with a batch-workload selector (_config.batchWorkloadSelector), for
// quota-exporter-mixin/tests/batch_test.yaml. `make test-mixin` renders them with
// `jsonnet -S -m DIR` next to a copy of that test file, as for ksm.jsonnet.
local mixin = (import '../mixin.libsonnet') + { _config+:: { batchWorkloadSelector: 'namespace="batch"' } };
local yaml(x) = std.manifestYamlDoc(x, indent_array_in_object=false, quote_keys=false) + '\n';

{
  'quota-rules.yaml': yaml(mixin.prometheusRules),
  'quota-alerts.yaml': yaml(mixin.prometheusAlerts),
}
