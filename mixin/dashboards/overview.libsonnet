// Overview: one row per watched cgroup, worst offender on top.
local g = import '../lib/g.libsonnet';
local common = import 'common.libsonnet';

{
  new(c)::
    local d = common.new(c);
    local s = d.cgroupSel;
    local by = std.join(', ', c.cgroupLabels);
    local stat(title, unit, description, expr) =
      g.panel.stat.new(title)
      + g.panel.stat.standardOptions.withUnit(unit)
      + g.panel.stat.panelOptions.withDescription(description)
      + g.panel.stat.queryOptions.withTargets(common.targets([[expr, '']]))
      + { gridPos: { w: 6, h: 4 } };

    d.dashboard(
      'quota-overview.json',
      'Overview',
      'Every watched cgroup with its CPU limit, throttling, stalls, runtime parallelism and memory against the limit.',
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
        stat('Stalled seconds (1h)',
             's',
             'Seconds in the last hour in which more than half of the CFS periods were throttled, summed over the selected cgroups.',
             'sum(cgroup:quota_cpu_stalled_seconds:increase1h{%s}) or vector(0)' % s),
        common.table(
          'Cgroups',
          'One row per cgroup. Stalled s (1h): seconds in the last hour with more than half the CFS periods throttled '
          + '(from the per-second sampler). Throttled: share of periods throttled over 5 minutes. Threads / limit: JVM '
          + 'parallel GC threads or Go GOMAXPROCS per core of CPU limit (above 1 the runtime bursts past the quota). '
          + 'RSS / limit: resident memory against the memory limit. Arenas: glibc malloc arenas of its processes. '
          + 'Sorted by stalled seconds; click a header to sort by another column.',
          [
            ['CPU limit (cores)', 'max by (%s) (quota_cpu_limit_cores{%s})' % [by, s], 'short'],
            ['CPU used (cores)', 'max by (%s) (cgroup:quota_cpu_usage_seconds:rate5m{%s})' % [by, s], 'short'],
            ['Throttled', 'max by (%s) (cgroup:quota_cpu_throttled_periods:ratio_rate5m{%s})' % [by, s], 'percentunit'],
            ['Stalled s (1h)', 'max by (%s) (cgroup:quota_cpu_stalled_seconds:increase1h{%s})' % [by, s], 's'],
            [null, 'max by (%s, runtime) (quota_process_start_time_seconds{%s, runtime=~"jvm|go"})' % [by, s], 'short'],
            ['Threads / limit', 'max by (%s) (process:quota_runtime_parallelism_over_cpu_limit:ratio{%s})' % [by, s], 'short'],
            ['RSS', 'max by (%s) (quota_memory_rss_bytes{%s})' % [by, s], 'bytes'],
            ['RSS / limit', 'max by (%s) (quota_memory_rss_bytes{%s} / quota_memory_limit_bytes{%s})' % [by, s, s], 'percentunit'],
            ['Arenas', 'sum by (%s) (quota_process_malloc_arenas{%s})' % [by, s], 'short'],
            ['Firing alerts', 'count by (%s) (ALERTS{alertstate="firing", alertname=~"Quota.*", %s})' % [by, s], 'short'],
          ],
          'Stalled s (1h)',
          height=16,
        ),
        common.timeSeries(
          'Top 10 stalled cgroups',
          's',
          'Seconds per 5 minutes in which more than half of the CFS periods were throttled, for the ten worst cgroups.',
          [['topk(10, cgroup:quota_cpu_stalled_seconds:increase5m{%s})' % s, '{{instance}} {{cgroup}}']],
        ),
        common.timeSeries(
          'Top 10 cgroups by RSS / memory limit',
          'percentunit',
          'Resident memory of the cgroup against its memory limit; cgroups without a limit are absent.',
          [['topk(10, quota_memory_rss_bytes{%s} / quota_memory_limit_bytes{%s})' % [s, s], '{{instance}} {{cgroup}}']],
        ),
      ],
    ),
}
