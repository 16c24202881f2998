// Overview: one row per container or pod, worst offender (most frozen seconds) on top.
local g = import '../lib/g.libsonnet';
local common = import 'common.libsonnet';

{
  new(c)::
    local d = common.new(c);
    local s = d.workloadSel;
    local by = std.join(', ', c.cgroupLabels + ['namespace', 'pod', 'container']);
    local stat(title, unit, description, expr) =
      g.panel.stat.new(title)
      + g.panel.stat.standardOptions.withUnit(unit)
      + g.panel.stat.panelOptions.withDescription(description)
      + g.panel.stat.queryOptions.withTargets([common.series(expr, '')])
      + g.panel.stat.panelOptions.withGridPos(h=4, w=6);

    d.dashboard(
      'quota-overview.json',
      'Every container and pod with its CPU limit, throttling, freezes, runtime parallelism and memory against the limit, worst first.',
      [
        stat('Exporters up',
             'short',
             'quota_exporter targets that answered the last scrape.',
             'count(up{%s} == 1)' % d.exporterSel),
        stat('Failing collectors',
             'short',
             'Collectors that failed in the last scrape (see QuotaExporterCollectorFailed).',
             'count(quota_exporter_scrape_collector_success{%s} == 0) or vector(0)' % d.exporterSel),
        stat('Firing Quota alerts',
             'short',
             'Alerts of this mixin firing now for the selected exporters.',
             'count(ALERTS{alertstate="firing", alertname=~"Quota.*", %s}) or vector(0)' % d.exporterSel),
        stat('Frozen windows (10m)',
             'short',
             'Sampler windows (1 s by default) in the last 10 minutes in which more than 90% of the CFS periods were throttled, summed over the selected containers and pods.',
             'sum(cgroup:quota_cpu_frozen_windows:increase10m{%s}) or vector(0)' % s),
        common.table(
          'Containers and pods',
          'One row per container, pod slice or other cgroup (never a sandbox, container="POD", or the node-level kubepods slices). '
          + 'scope: what the alerts name the row as: container, pod (the pod alone holds the limits) or cgroup; empty where the alerts name its pod or its containers instead. Frozen (10m): '
          + 'sampler windows (1 s by default) in the last 10 minutes with more than 90% of the CFS periods throttled. Throttled: share of periods throttled over 5 minutes. Threads / limit: JVM '
          + 'parallel GC threads or Go GOMAXPROCS per core of CPU limit (above 1 the runtime bursts past the quota). '
          + 'RSS / limit: resident memory against the memory limit. Arenas: glibc malloc arenas of its processes. '
          + 'Sorted worst first by frozen windows; click a header to sort by another column.',
          [
            common.column('CPU limit (cores)', 'max by (%s) (cgroup:quota_cpu_limit_cores:binding{%s})' % [by, s], 'short'),
            common.column('CPU used (cores)', 'max by (%s) (cgroup:quota_cpu_usage_seconds:rate5m{%s})' % [by, s], 'short'),
            common.column('Throttled', 'max by (%s) (cgroup:quota_cpu_throttled_periods:ratio_rate5m{%s})' % [by, s], 'percentunit'),
            common.column('Frozen (10m)', 'max by (%s) (cgroup:quota_cpu_frozen_windows:increase10m{%s})' % [by, s], 'short'),
            // The scope the alerts name a row at (cgroup:quota_scope:info): container, pod (where the
            // pod alone holds the limits), cgroup; empty for a pod slice whose containers hold them
            // and for the containers under pod-level limits.
            common.labelColumn('max by (%s, scope) (quota_memory_usage_bytes{%s} * 0 + %s group_left(scope) cgroup:quota_scope:info)' % [by, s, d.cgroupJoin]),
            common.labelColumn('max by (%s, runtime) (quota_process_start_time_seconds{%s, runtime=~"jvm|go"})' % [by, s]),
            common.column('Threads / limit', 'max by (%s) (process:quota_runtime_parallelism_over_cpu_limit:ratio{%s})' % [by, s], 'short'),
            common.column('RSS', 'max by (%s) (quota_memory_rss_bytes{%s})' % [by, s], 'bytes'),
            common.column('Working set / limit', 'max by (%s) (quota_memory_working_set_bytes{%s} / cgroup:quota_memory_limit_bytes:binding{%s})' % [by, s, s], 'percentunit'),
            common.column('Arenas', 'sum by (%s) (quota_process_malloc_arenas{%s})' % [by, s], 'short'),
            common.column('Firing alerts', 'count by (%s) (ALERTS{alertstate="firing", alertname=~"Quota.*", %s})' % [by, s], 'short'),
          ],
          'Frozen (10m)',
          height=16,
        ) + d.rowDrillDown(['quota-cpu-throttling.json', 'quota-runtime-pauses.json', 'quota-memory.json']),
        common.timeSeries(
          'Top 10 frozen containers and pods',
          'short',
          'Frozen windows per 10 minutes (more than 90% of the CFS periods throttled; what QuotaCPUStalls counts), '
          + 'for the ten worst containers and pods.',
          [common.workload('topk(10, cgroup:quota_cpu_frozen_windows:increase10m{%s})' % s, '{{instance}} {{name}}')],
        ) + d.seriesDrillDown(['quota-cpu-throttling.json']),
        common.timeSeries(
          'Top 10 containers and pods by working set / memory limit',
          'percentunit',
          "Working set against the memory limit that binds (its own or its pod's); cgroups without a limit are absent.",
          [common.workload('topk(10, quota_memory_working_set_bytes{%s} / cgroup:quota_memory_limit_bytes:binding{%s})' % [s, s], '{{instance}} {{name}}')],
        ) + d.seriesDrillDown(['quota-memory.json']),
      ],
    ),
}
