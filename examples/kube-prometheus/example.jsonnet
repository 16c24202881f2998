// kube-prometheus with the quota_exporter mixin, added the usual way (addMixin): its alerts and
// recording rules become one PrometheusRule, its dashboards a Grafana folder.
//   jb install   (this directory's jsonnetfile.json)
//   jsonnet -J vendor -m manifests example.jsonnet
// test/examples renders this file (TestKubePrometheusExample).
local addMixin = import 'kube-prometheus/lib/mixin.libsonnet';

local quota = addMixin({
  name: 'quota-exporter',
  dashboardFolder: 'Quota exporter',
  mixin: (import 'quota-exporter-mixin/mixin.libsonnet') + {
    _config+:: {
      // The PodMonitor of examples/kubernetes makes job="quota-exporter".
      quotaExporterSelector: 'job="quota-exporter"',
    },
  },
});

local kp = (import 'kube-prometheus/main.libsonnet') + {
  values+:: {
    common+: { namespace: 'monitoring' },
    grafana+: { folderDashboards+: quota.grafanaDashboards },
  },
};

{ ['setup/0namespace-' + name]: kp.kubePrometheus[name] for name in std.objectFields(kp.kubePrometheus) } +
{ ['grafana-' + name]: kp.grafana[name] for name in std.objectFields(kp.grafana) } +
{ 'quota-exporter-prometheusRule': quota.prometheusRules }
