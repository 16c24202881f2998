// quota_exporter monitoring mixin: import and override _config, e.g.
//   local quota = (import 'mixin.libsonnet') + { _config+:: { quotaExporterSelector: 'job="quota"' } };
//   quota.prometheusAlerts, quota.prometheusRules, quota.grafanaDashboards
(import 'config.libsonnet') +
(import 'alerts/alerts.libsonnet') +
(import 'rules/rules.libsonnet') +
(import 'dashboards/dashboards.libsonnet')
