// A stand-in for kube-prometheus's lib/mixin.libsonnet (which jsonnet-bundler cannot fetch here),
// written for TestKubePrometheusExample with the same interface:
//   addMixin({ name, mixin, namespace?, labels?, dashboardFolder? })
//     -> { prometheusRules: a PrometheusRule with the mixin's alert groups, then its rule groups,
//          grafanaDashboards: the mixin's dashboards, under { [dashboardFolder]: ... } when given }
function(params)
  local p = { namespace: 'monitoring', labels: { prometheus: 'k8s' } } + params;
  local groups(field) = if std.objectHasAll(p.mixin, field) then p.mixin[field].groups else [];
  local dashboards = if std.objectHasAll(p.mixin, 'grafanaDashboards') then p.mixin.grafanaDashboards else {};
  {
    prometheusRules: {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'PrometheusRule',
      metadata: { name: p.name, namespace: p.namespace, labels: p.labels },
      spec: { groups: groups('prometheusAlerts') + groups('prometheusRules') },
    },
    grafanaDashboards: if std.objectHas(p, 'dashboardFolder') then { [p.dashboardFolder]+: dashboards } else dashboards,
  }
