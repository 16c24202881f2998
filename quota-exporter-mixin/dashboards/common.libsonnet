// What the four dashboards share: variables, selectors, panel shortcuts.
local g = import '../lib/g.libsonnet';

local prometheus = g.query.prometheus;
local var = g.dashboard.variable;

{
  new(config)::
    local c = config;
    local clusterSel = if c.showMultiCluster then '%s=~"$cluster", ' % c.clusterLabel else '';
    {
      // Selectors for the dashboard variables: namespace -> pod -> container -> cgroup. A series
      // without Kubernetes names matches "All" ('.*' also matches an absent label).
      exporterSel: clusterSel + 'job=~"$job", instance=~"$instance"',
      cgroupSel: self.exporterSel + ', namespace=~"$namespace", pod=~"$pod", container=~"$container", cgroup=~"$cgroup"',
      // Containers and pods only: never the kubelet's node-level slices (/kubepods.slice, QoS slices).
      workloadSel: self.cgroupSel + ', ' + c.nodeSliceMatcher,
      // Aggregation labels (the cluster label too when multi-cluster); the names ride along.
      cgroupBy: std.join(', ', c.clusterLabels + ['instance', 'cgroup', 'namespace', 'pod', 'container']),
      cgroupJoin: 'on(%s)' % std.join(', ', c.cgroupJoinLabels),

      local nameVar(name, label, parentSel) =
        var.query.new(name, 'label_values(quota_memory_usage_bytes{%s}, %s)' % [parentSel, label])
        + var.query.selectionOptions.withIncludeAll(customAllValue='.*'),

      variables: [
        var.datasource.new('datasource', 'prometheus'),
      ] + (
        if c.showMultiCluster then [
          var.query.new(c.clusterLabel, 'label_values(quota_exporter_scrape_collector_success{%s}, %s)' % [c.quotaExporterSelector, c.clusterLabel])
          + var.query.selectionOptions.withMulti()
          + var.query.selectionOptions.withIncludeAll(),
        ] else []
      ) + [
        var.query.new('job', 'label_values(quota_exporter_scrape_collector_success{%s%s}, job)' % [clusterSel, c.quotaExporterSelector])
        + var.query.selectionOptions.withMulti()
        + var.query.selectionOptions.withIncludeAll(),
        var.query.new('instance', 'label_values(quota_exporter_scrape_collector_success{%sjob=~"$job"}, instance)' % clusterSel)
        + var.query.withLabel('node')
        + var.query.selectionOptions.withMulti()
        + var.query.selectionOptions.withIncludeAll(),
        // Single-select: one namespace, one pod, one container at a time (or All).
        nameVar('namespace', 'namespace', self.exporterSel),
        nameVar('pod', 'pod', self.exporterSel + ', namespace=~"$namespace"'),
        nameVar('container', 'container', self.exporterSel + ', namespace=~"$namespace", pod=~"$pod"'),
        // The cgroup path: what identifies series that have no Kubernetes names.
        var.query.new('cgroup', 'label_values(quota_memory_usage_bytes{%s, namespace=~"$namespace", pod=~"$pod", container=~"$container"}, cgroup)' % self.exporterSel)
        + var.query.selectionOptions.withMulti()
        + var.query.selectionOptions.withIncludeAll(customAllValue='.*'),
      ],

      // A dashboard with the mixin's uid, tags, links, variables and layout.
      dashboard(file, title, description, panels, annotations=[])::
        g.dashboard.new(c.dashboardNamePrefix + title)
        + g.dashboard.withUid(c.dashboardUIDs[file])
        + g.dashboard.withDescription(description)
        + g.dashboard.withTags(c.dashboardTags)
        + g.dashboard.withTimezone(c.dashboardTimezone)
        + g.dashboard.withRefresh(c.dashboardRefresh)
        + g.dashboard.time.withFrom(c.dashboardPeriod)
        + g.dashboard.withLinks([g.dashboard.link.dashboards.new('Quota dashboards', c.dashboardTags)])
        + g.dashboard.withVariables(self.variables)
        + g.dashboard.withAnnotations(annotations)
        + g.dashboard.withPanels(g.util.grid.makeGrid(panels)),
    },

  // named(expr): adds a "name" label: namespace/pod/container, namespace/pod for a pod slice,
  // the cgroup path for series without Kubernetes names.
  named(expr)::
    local keyed = 'label_join(%s, "key", ";", "namespace", "pod", "container", "cgroup")' % expr;
    local set(e, repl, re) = 'label_replace(%s, "name", "%s", "key", "%s")' % [e, repl, re];
    set(set(set(keyed, '$1', ';;;(.*)'), '$1/$2', '([^;]+);([^;]+);;.*'), '$1/$2/$3', '([^;]+);([^;]+);([^;]+);.*'),

  // Legends name the workload: a legend with {{cgroup}} gets {{name}} (see named) instead.
  legendQuery(q)::
    if std.length(std.findSubstr('{{cgroup}}', q[1])) > 0
    then [self.named(q[0]), std.strReplace(q[1], '{{cgroup}}', '{{name}}')]
    else q,

  // Range query targets with refIds A, B, ... in order: [[expr, legend], ...].
  targets(queries)::
    local qs = [self.legendQuery(q) for q in queries];
    [
      prometheus.new('${datasource}', qs[i][0])
      + prometheus.withLegendFormat(qs[i][1])
      + prometheus.withRefId(std.char(65 + i))
      for i in std.range(0, std.length(qs) - 1)
    ],

  // Instant table targets: [[expr], ...].
  tableTargets(exprs)::
    [
      prometheus.new('${datasource}', exprs[i])
      + prometheus.withInstant()
      + prometheus.withFormat('table')
      + prometheus.withRefId(std.char(65 + i))
      for i in std.range(0, std.length(exprs) - 1)
    ],

  // A time series panel: title, unit, description, [[expr, legend], ...].
  timeSeries(title, unit, description, queries, width=12)::
    local ts = g.panel.timeSeries;
    ts.new(title)
    + ts.standardOptions.withUnit(unit)
    + ts.panelOptions.withDescription(description)
    + ts.queryOptions.withTargets(self.targets(queries))
    + { gridPos: { w: width, h: 8 } },

  // Dashed lines for series whose legend ends in "limit" (the ceilings).
  limitsDashed::
    local ts = g.panel.timeSeries;
    ts.standardOptions.withOverrides([
      ts.standardOptions.override.byRegexp.new('/limit/')
      + ts.standardOptions.override.byRegexp.withProperty('custom.lineStyle', { fill: 'dash', dash: [10, 10] })
      + ts.standardOptions.override.byRegexp.withProperty('custom.fillOpacity', 0)
      + ts.standardOptions.override.byRegexp.withProperty('color', { mode: 'fixed', fixedColor: 'red' }),
    ]),

  // A table of instant queries merged on their labels: columns = [[header, expr, unit], ...],
  // or [header, expr, unit, noValue] for a column whose series is absent at its default.
  // Columns with a null header are joined only for their labels (e.g. runtime).
  table(title, description, columns, sortBy, width=24, height=12)::
    local t = g.panel.table;
    local n = std.length(columns);
    local valueName(i) = 'Value #%s' % std.char(65 + i);
    t.new(title)
    + t.standardOptions.withUnit('short')
    + t.panelOptions.withDescription(description)
    + t.queryOptions.withTargets(self.tableTargets([col[1] for col in columns]))
    + t.queryOptions.withTransformations([
      t.transformation.new('merge'),
      t.transformation.new('organize', {
        excludeByName: { Time: true } + {
          [valueName(i)]: true
          for i in std.range(0, n - 1)
          if columns[i][0] == null
        },
        renameByName: {
          [valueName(i)]: columns[i][0]
          for i in std.range(0, n - 1)
          if columns[i][0] != null
        },
        indexByName: {},
      }),
    ])
    + t.options.withSortBy(sortBy)
    + t.standardOptions.withOverrides([
      t.standardOptions.override.byName.new(col[0])
      + t.standardOptions.override.byName.withProperty('unit', col[2])
      + (if std.length(col) > 3 then t.standardOptions.override.byName.withProperty('noValue', col[3]) else {})
      for col in columns
      if col[0] != null
    ])
    + { gridPos: { w: width, h: height } },

  row(title):: g.panel.row.new(title),
}
