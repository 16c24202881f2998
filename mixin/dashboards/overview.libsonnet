// Overview: one row per container or pod, worst offender (most frozen seconds) on top.
local g = import '../lib/g.libsonnet';
local common = import 'common.libsonnet';

{
  new(c)::
    local d = common.new(c);
    local s = d.workloadSel;
    local by = std.join(', ', c.cgroupLabels + ['namespace', 'pod', 'container']);
    local frozen(range) =
      'increase(quota_cpu_throttled_window_ratio_count{%(s)s}[%(r)s]) - ignoring(le) increase(quota_cpu_throttled_window_ratio_bucket{%(s)s, le="0.9"}[%(r)s])'
      % { s: s, r: range };
    local stat(title, unit, description, expr) =
      g.panel.stat.new(title)
      + g.panel.stat.standardOptions.withUnit(unit)
      + g.panel.stat.panelOptions.withDescription(description)
      + g.panel.stat.queryOptions.withTargets(common.targets([[expr, '']]))
      + { gridPos: { w: 6, h: 4 } };

    d.dashboard(
      'quota-overview.json',
      'Overview',
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
        stat('Frozen windows (1h)',
             'short',
             'Sampler windows (1 s by default) in the last hour in which more than 90% of the CFS periods were throttled, summed over the selected containers and pods.',
             'sum(%s) or vector(0)' % frozen('1h')),
        common.table(
          'Containers and pods',
          'One row per container, pod slice or other cgroup (never the node-level kubepods slices). Frozen (1h): '
          + 'sampler windows (1 s by default) in the last hour with more than 90% of the CFS periods throttled. Throttled: share of periods throttled over 5 minutes. Threads / limit: JVM '
          + 'parallel GC threads or Go GOMAXPROCS per core of CPU limit (above 1 the runtime bursts past the quota). '
          + 'RSS / limit: resident memory against the memory limit. Arenas: glibc malloc arenas of its processes. '
          + 'Sorted worst first by frozen windows; click a header to sort by another column.',
          [
            ['CPU limit (cores)', 'max by (%s) (cgroup:quota_cpu_limit_cores:effective{%s})' % [by, s], 'short'],
            ['CPU used (cores)', 'max by (%s) (cgroup:quota_cpu_usage_seconds:rate5m{%s})' % [by, s], 'short'],
            ['Throttled', 'max by (%s) (cgroup:quota_cpu_throttled_periods:ratio_rate5m{%s})' % [by, s], 'percentunit'],
            ['Frozen (1h)', 'max by (%s) (%s)' % [by, frozen('1h')], 'short'],
            [null, 'max by (%s, runtime) (quota_process_start_time_seconds{%s, runtime=~"jvm|go"})' % [by, s], 'short'],
            ['Threads / limit', 'max by (%s) (process:quota_runtime_parallelism_over_cpu_limit:ratio{%s})' % [by, s], 'short'],
            ['RSS', 'max by (%s) (quota_memory_rss_bytes{%s})' % [by, s], 'bytes'],
            ['Working set / limit', 'max by (%s) (quota_memory_working_set_bytes{%s} / cgroup:quota_memory_limit_bytes:effective{%s})' % [by, s, s], 'percentunit'],
            ['Arenas', 'sum by (%s) (quota_process_malloc_arenas{%s})' % [by, s], 'short'],
            ['Firing alerts', 'count by (%s) (ALERTS{alertstate="firing", alertname=~"Quota.*", %s})' % [by, s], 'short'],
          ],
          'Frozen (1h)',
          height=16,
        ),
        common.timeSeries(
          'Top 10 frozen containers and pods',
          'short',
          'Frozen windows per 10 minutes (more than 90% of the CFS periods throttled; what QuotaCPUStalls counts), '
          + 'for the ten worst containers and pods.',
          [['topk(10, cgroup:quota_cpu_frozen_windows:increase10m{%s})' % s, '{{instance}} {{cgroup}}']],
        ),
        common.timeSeries(
          'Top 10 containers and pods by working set / memory limit',
          'percentunit',
          'Working set against the memory limit that binds (its own or its pod\'s); cgroups without a limit are absent.',
          [['topk(10, quota_memory_working_set_bytes{%s} / cgroup:quota_memory_limit_bytes:effective{%s})' % [s, s], '{{instance}} {{cgroup}}']],
        ),
      ],
    ),
}
