// A stand-in for kube-prometheus's main.libsonnet, written for TestKubePrometheusExample: only
// what examples/kube-prometheus uses. values.common.namespace; values.grafana.dashboards (file
// name -> dashboard) and folderDashboards (folder -> file name -> dashboard); the components
// kubePrometheus (the namespace) and grafana (one ConfigMap per dashboard, and the provisioning
// that maps each folder to its ConfigMaps' mount path).
{
  values:: {
    common: { namespace: 'default' },
    grafana: { dashboards: {}, folderDashboards: {} },
  },

  local v = self.values,
  local ns = v.common.namespace,
  local slug(s) = std.asciiLower(std.strReplace(std.strReplace(s, ' ', '-'), '.json', '')),
  local configMap(name, data) = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: name, namespace: ns },
    data: data,
  },
  local dashboardMap(prefix, file, dashboard) =
    configMap('grafana-dashboard-' + prefix + slug(file), { [file]: std.manifestJsonEx(dashboard, '    ') }),

  kubePrometheus: {
    namespace: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
  },

  grafana: {
    dashboardDefinitions: {
      apiVersion: 'v1',
      kind: 'ConfigMapList',
      items: [dashboardMap('', f, v.grafana.dashboards[f]) for f in std.objectFields(v.grafana.dashboards)] + [
        dashboardMap(slug(folder) + '-', f, v.grafana.folderDashboards[folder][f])
        for folder in std.objectFields(v.grafana.folderDashboards)
        for f in std.objectFields(v.grafana.folderDashboards[folder])
      ],
    },
    dashboardSources: configMap('grafana-dashboards', {
      'dashboards.yaml': std.manifestJsonEx({
        apiVersion: 1,
        providers: [
          { name: '0', folder: 'Default', type: 'file', options: { path: '/grafana-dashboard-definitions/0' } },
        ] + [
          { name: slug(folder), folder: folder, type: 'file', options: { path: '/grafana-dashboard-definitions/' + slug(folder) } }
          for folder in std.objectFields(v.grafana.folderDashboards)
        ],
      }, '    '),
    }),
  },
}
