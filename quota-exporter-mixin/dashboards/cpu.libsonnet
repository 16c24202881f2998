// CPU throttling and warm-up: usage against the limit, throttled share, the per-second
// histogram, process age and JIT compilation next to throttling.
local g = import '../lib/g.libsonnet';
local utils = import '../lib/utils.libsonnet';
local common = import 'common.libsonnet';

{
  new(c)::
    local d = common.new(c);
    local s = d.cgroupSel;
    local by = d.cgroupBy;
    local warmup = utils.seconds(c.warmupPeriod);

    d.dashboard(
      'quota-cpu-throttling.json',
      'CFS throttling per cgroup: usage against the limit, share of periods throttled, per-second stalls, stall lengths, and '
      + 'throttling as a function of process age (warm-up, JIT).',
      [
        common.row('Usage and throttling'),
        common.timeSeries(
          'CPU usage against the limit',
          'short',
          'CPU cores used by the cgroup (user + system) and its CFS limit (quota / period, dashed). Usage near the '
          + 'limit on average means the cgroup is throttled in bursts.',
          [
            common.workload('sum by (%s) (rate(quota_cpu_usage_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}} used'),
            common.workload('max by (%s) (cgroup:quota_cpu_limit_cores:binding{%s})' % [by, s], '{{name}} limit'),
          ],
        ) + common.limitsDashed,
        common.timeSeries(
          'Throttled share of CFS periods',
          'percentunit',
          'nr_throttled / nr_periods: the share of 100 ms periods in which the cgroup ran out of quota and every '
          + 'thread waited for the next period. This, not throttled seconds, is the stall signal.',
          [common.workload('sum by (%(by)s) (rate(quota_cpu_throttled_periods_total{%(s)s}[$__rate_interval]))\n/\nsum by (%(by)s) (rate(quota_cpu_periods_total{%(s)s}[$__rate_interval]))'
                           % { by: by, s: s }, '{{name}}')],
        ) + d.seriesDrillDown(['quota-runtime-pauses.json', 'quota-memory.json']),
        common.timeSeries(
          'JIT compilation (JVM)',
          'short',
          'CPU cores used by the JVM JIT compiler threads. During warm-up it competes with requests for the quota; '
          + 'compare with the throttled share next to it.',
          [common.workload('sum by (%s, process) (rate(quota_jvm_jit_compilation_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}} {{process}}')],
        ),
        common.timeSeries(
          'Frozen and half-throttled windows',
          'short',
          'Sampler windows (1 s by default), per interval, in which more than 90% (frozen, what QuotaCPUStalls '
          + 'counts) or more than 50% of the CFS periods were throttled: short freezes that a 5-minute average '
          + 'spreads thin.',
          [
            common.workload('sum by (%(by)s) (increase(quota_cpu_throttled_window_ratio_count{%(s)s}[$__rate_interval]))\n-\nsum by (%(by)s) (increase(quota_cpu_throttled_window_ratio_bucket{%(s)s, le="0.9"}[$__rate_interval]))'
                            % { by: by, s: s }, '{{name}} frozen'),
            common.workload('sum by (%(by)s) (increase(quota_cpu_throttled_window_ratio_count{%(s)s}[$__rate_interval]))\n-\nsum by (%(by)s) (increase(quota_cpu_throttled_window_ratio_bucket{%(s)s, le="0.5"}[$__rate_interval]))'
                            % { by: by, s: s }, '{{name}} half'),
          ],
        ),
        g.panel.heatmap.new('Per-second throttled share')
        + g.panel.heatmap.standardOptions.withUnit('s')
        + g.panel.heatmap.options.yAxis.withUnit('percentunit')
        + g.panel.heatmap.options.cellValues.withUnit('s')
        + g.panel.heatmap.panelOptions.withDescription(
          'Distribution of the per-second share of throttled periods (quota_cpu_throttled_window_ratio) of the '
          + 'selected container (select one; with All, of every container and non-Kubernetes cgroup, never summed '
          + 'with its pod slice): each cell counts windows. Mass in the top row means seconds in which the cgroup '
          + 'was frozen for most of every period.'
        )
        + g.panel.heatmap.queryOptions.withTargets([
          g.query.prometheus.new(
            '${datasource}',
            'sum by (le) (\n  increase(quota_cpu_throttled_window_ratio_bucket{%(s)s, container_id!=""}[$__rate_interval])\n  or\n  increase(quota_cpu_throttled_window_ratio_bucket{%(s)s, pod_uid="", %(node)s}[$__rate_interval])\n)'
            % { s: s, node: c.nodeSliceMatcher }
          )
          + g.query.prometheus.withLegendFormat('{{le}}')
          + g.query.prometheus.withFormat('heatmap'),
        ]),
        g.panel.heatmap.new('CFS stall lengths')
        + g.panel.heatmap.standardOptions.withUnit('short')
        + g.panel.heatmap.options.yAxis.withUnit('s')
        + g.panel.heatmap.options.cellValues.withUnit('short')
        + g.panel.heatmap.panelOptions.withDescription(
          'How long each CFS stall lasted (quota_cpu_throttle_stall_seconds, --collector.cfsstall, a BPF program; '
          + "empty where the kernel or the privileges do not allow it): from the first of the cgroup's CPUs being "
          + 'throttled to the last one released, so a freeze on many CPUs counts once. Each cell counts stalls of '
          + 'the cgroups whose own quota ran out. A cgroup with quota q per period p that burns through its quota '
          + 'stalls about p - q each period (80 ms for 20 ms / 100 ms); stalls above one period mean the cgroup '
          + 'overran its quota (many threads at once) and froze while the refills paid the debt off.'
        )
        + g.panel.heatmap.queryOptions.withTargets([
          g.query.prometheus.new(
            '${datasource}',
            'sum by (le) (increase(quota_cpu_throttle_stall_seconds_bucket{%(s)s}[$__rate_interval]))' % { s: s }
          )
          + g.query.prometheus.withLegendFormat('{{le}}')
          + g.query.prometheus.withFormat('heatmap'),
        ]),
        common.timeSeries(
          'Throttled time per second (summed over CPUs)',
          's',
          "throttled_time rate: summed over the CPUs the cgroup's threads waited on, so it exceeds 1 s/s when many "
          + 'threads are throttled at once (seed report: 3.5 s in one wall-clock second).',
          [common.workload('sum by (%s) (rate(quota_cpu_throttled_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}}')],
        ),

        common.row('Warm-up'),
        common.timeSeries(
          'Process age',
          's',
          'Time since each process started. Throttling while the age is below the warm-up period ('
          + c.warmupPeriod + ') is warm-up throttling (JIT, class loading, cache fill); the shaded annotations mark '
          + 'each warm-up period.',
          [common.workload('time() - quota_process_start_time_seconds{%s}' % s, '{{name}} {{process}} ({{runtime}})')],
        ),
        common.timeSeries(
          'CPU usage by mode',
          'short',
          'User and system CPU cores per cgroup. System time dominating a throttled cgroup points to kernel '
          + 'contention (see QuotaHighSystemCPUUnderQuota).',
          [common.workload('sum by (%s, mode) (rate(quota_cpu_usage_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}} {{mode}}')],
        ) + g.panel.timeSeries.fieldConfig.defaults.custom.withStacking('normal'),
        common.table(
          'CPU settings and QoS class',
          'The CFS limit, period, burst allowance, weight (shares) and cpuset size of each cgroup, with its '
          + 'Kubernetes QoS class. Guaranteed (request = limit) pods cannot burst during warm-up; Burstable pods '
          + 'with limit above request can. The exporter leaves out a period of 0.1 s, no burst allowance and a '
          + 'cpuset of every CPU (the defaults): those cells say so.',
          [
            common.column('Limit (cores)', 'max by (%s, qos_class) (quota_cpu_limit_cores{%s})' % [by, s], 'short'),
            common.column('Period', 'max by (%s, qos_class) (quota_cpu_period_seconds{%s})' % [by, s], 's', noValue='0.1 s (default)'),
            common.column('Burst (cores)', 'max by (%s, qos_class) (quota_cpu_burst_limit_cores{%s})' % [by, s], 'short', noValue='none'),
            common.column('Weight', 'max by (%s, qos_class) (quota_cpu_weight{%s})' % [by, s], 'short'),
            common.column('cpuset CPUs', 'max by (%s, qos_class) (quota_cpu_cpuset_cpus{%s})' % [by, s], 'short', noValue='all'),
          ],
          'Limit (cores)',
          width=12,
          height=8,
        ),
        common.timeSeries(
          'CPU pressure (PSI)',
          'percentunit',
          'Share of wall time in which some (waiting) or all (stalled) runnable tasks of the cgroup waited for a '
          + 'CPU (cgroup v2 cpu.pressure).',
          [
            common.workload('sum by (%s) (rate(quota_cpu_pressure_waiting_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}} some'),
            common.workload('sum by (%s) (rate(quota_cpu_pressure_stalled_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}} full'),
          ],
        ),
        common.timeSeries(
          'CFS burst used',
          'short',
          'CPU cores used above the quota from the burst allowance (cpu.max.burst), which absorbs short spikes '
          + 'without throttling.',
          [common.workload('sum by (%s) (rate(quota_cpu_burst_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}}')],
        ),
      ],
      annotations=[
        g.dashboard.annotation.new(
          'Warm-up periods',
          'max by (%s, process) (time() - quota_process_start_time_seconds{%s} < %d)' % [by, s, warmup],
          'rgba(255, 152, 48, 0.4)'
        ),
        g.dashboard.annotation.new(
          'Process restarts',
          'changes(quota_process_start_time_seconds{%s}[$__rate_interval]) > 0' % s,
          'red'
        ),
      ],
    ),
}
