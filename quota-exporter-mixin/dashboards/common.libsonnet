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
      // without Kubernetes names matches "All" ('.*' also matches an absent label). A pod shows once:
      // its sandbox (container="POD", the pause or infra container) is left out.
      exporterSel: clusterSel + 'job=~"$job", instance=~"$instance"',
      cgroupSel: self.exporterSel + ', namespace=~"$namespace", pod=~"$pod", container=~"$container", container!="POD", cgroup=~"$cgroup"',
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
        nameVar('container', 'container', self.exporterSel + ', namespace=~"$namespace", pod=~"$pod", container!="POD"'),
        // The cgroup path: what identifies series that have no Kubernetes names.
        var.query.new('cgroup', 'label_values(quota_memory_usage_bytes{%s, namespace=~"$namespace", pod=~"$pod", container=~"$container"}, cgroup)' % self.exporterSel)
        + var.query.selectionOptions.withMulti()
        + var.query.selectionOptions.withIncludeAll(customAllValue='.*'),
      ],

      // The four dashboards, so that each can link to the others.
      local titles = {
        'quota-overview.json': 'Overview',
        'quota-cpu-throttling.json': 'CPU throttling and warm-up',
        'quota-runtime-pauses.json': 'Runtime pauses',
        'quota-memory.json': 'Memory and RSS creep',
      },
      local url(file) = '/d/' + c.dashboardUIDs[file],

      // A dashboard with the mixin's uid, tags, variables and layout, and a link to each of the
      // other three that keeps the time range and the variables.
      dashboard(file, description, panels, annotations=[])::
        g.dashboard.new(c.dashboardNamePrefix + titles[file])
        + g.dashboard.withUid(c.dashboardUIDs[file])
        + g.dashboard.withDescription(description)
        + g.dashboard.withTags(c.dashboardTags)
        + g.dashboard.withTimezone(c.dashboardTimezone)
        + g.dashboard.withRefresh(c.dashboardRefresh)
        + g.dashboard.time.withFrom(c.dashboardPeriod)
        + g.dashboard.withLinks([
          g.dashboard.link.link.new(c.dashboardNamePrefix + titles[other], url(other))
          + g.dashboard.link.link.options.withIncludeVars(true)
          + g.dashboard.link.link.options.withKeepTime(true)
          for other in std.objectFields(titles)
          if other != file
        ])
        + g.dashboard.withVariables(self.variables)
        + g.dashboard.withAnnotations(annotations)
        + g.dashboard.withPanels(g.util.grid.makeGrid(panels)),

      // Drill-down: data links that open the dashboards in files on the workload clicked, a
      // table row's or a time series' instance, namespace, pod, container and cgroup. The panel's
      // queries must keep those labels.
      local drillDown(files, ref) =
        local keep = std.join('', ['&${%s:queryparam}' % v for v in c.clusterLabels + ['job']]);
        local pick = std.join('', ['&var-%s=%s' % [l, ref(l)] for l in ['instance', 'namespace', 'pod', 'container', 'cgroup']]);
        g.panel.timeSeries.standardOptions.withLinks([
          g.panel.timeSeries.standardOptions.link.withTitle(c.dashboardNamePrefix + titles[f])
          + g.panel.timeSeries.standardOptions.link.withUrl(url(f) + '?${__url_time_range}&${datasource:queryparam}' + keep + pick)
          for f in files
        ]),
      seriesDrillDown(files):: drillDown(files, function(l) '${__field.labels.%s}' % l),
      rowDrillDown(files):: drillDown(files, function(l) '${__data.fields.%s}' % l),
    },

  // named(expr): adds a "name" label: namespace/pod/container, namespace/pod for a pod slice,
  // the cgroup path for series without Kubernetes names.
  named(expr)::
    local keyed = 'label_join(%s, "key", ";", "namespace", "pod", "container", "cgroup")' % expr;
    local set(e, repl, re) = 'label_replace(%s, "name", "%s", "key", "%s")' % [e, repl, re];
    set(set(set(keyed, '$1', ';;;(.*)'), '$1/$2', '([^;]+);([^;]+);;.*'), '$1/$2/$3', '([^;]+);([^;]+);([^;]+);.*'),

  // ---- targets (refIds A, B, ... in the order a panel lists them) ----

  // A range query and its legend.
  series(expr, legend):: prometheus.new('${datasource}', expr) + prometheus.withLegendFormat(legend),
  // A range query whose series are named after their workload: legend may use {{name}}.
  workload(expr, legend):: self.series(self.named(expr), legend),

  local withRefIds(targets) = [targets[i] + prometheus.withRefId(std.char(65 + i)) for i in std.range(0, std.length(targets) - 1)],

  // A table column: an instant query whose value is shown under header, in unit, with noValue
  // where its series is absent.
  column(header, expr, unit, noValue=null):: {
    header: header,
    unit: unit,
    noValue: noValue,
    target: prometheus.new('${datasource}', expr) + prometheus.withInstant() + prometheus.withFormat('table'),
  },
  // A table query joined only for its labels (e.g. runtime); its value is hidden.
  labelColumn(expr):: self.column(null, expr, 'short'),

  // A time series panel of targets (series, workload).
  timeSeries(title, unit, description, targets, width=12)::
    local ts = g.panel.timeSeries;
    ts.new(title)
    + ts.standardOptions.withUnit(unit)
    + ts.panelOptions.withDescription(description)
    + ts.queryOptions.withTargets(withRefIds(targets))
    + ts.panelOptions.withGridPos(w=width),

  // Dashed lines for series whose legend ends in "limit" (the ceilings).
  limitsDashed::
    local ts = g.panel.timeSeries;
    ts.standardOptions.withOverrides([
      ts.standardOptions.override.byRegexp.new('/limit/')
      + ts.standardOptions.override.byRegexp.withProperty('custom.lineStyle', { fill: 'dash', dash: [10, 10] })
      + ts.standardOptions.override.byRegexp.withProperty('custom.fillOpacity', 0)
      + ts.standardOptions.override.byRegexp.withProperty('color', { mode: 'fixed', fixedColor: 'red' }),
    ]),

  // A table of columns (column, labelColumn) merged on their labels, sorted by one header.
  table(title, description, columns, sortBy, width=24, height=12)::
    local t = g.panel.table;
    local n = std.length(columns);
    local valueName(i) = 'Value #%s' % std.char(65 + i);
    t.new(title)
    + t.standardOptions.withUnit('short')
    + t.panelOptions.withDescription(description)
    + t.queryOptions.withTargets(withRefIds([col.target for col in columns]))
    + t.queryOptions.withTransformations([
      t.transformation.new('merge'),
      t.transformation.new('organize', {
        excludeByName: { Time: true } + {
          [valueName(i)]: true
          for i in std.range(0, n - 1)
          if columns[i].header == null
        },
        renameByName: {
          [valueName(i)]: columns[i].header
          for i in std.range(0, n - 1)
          if columns[i].header != null
        },
        indexByName: {},
      }),
    ])
    + t.options.withSortBy(sortBy)
    + t.standardOptions.withOverrides([
      t.standardOptions.override.byName.new(col.header)
      + t.standardOptions.override.byName.withProperty('unit', col.unit)
      + (if col.noValue != null then t.standardOptions.override.byName.withProperty('noValue', col.noValue) else {})
      for col in columns
      if col.header != null
    ])
    + t.panelOptions.withGridPos(h=height, w=width),

  row(title):: g.panel.row.new(title),
}
