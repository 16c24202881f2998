// Runtime pauses: JVM safepoints, GC pauses and threads, Go GOMAXPROCS, against the CPU limit.
local common = import 'common.libsonnet';

{
  new(c)::
    local d = common.new(c);
    local s = d.cgroupSel;
    local by = d.cgroupBy;
    // The CPU limit of cgroups that run a JVM / a Go program.
    local limitOf(metric) =
      'max by (%s) (cgroup:quota_cpu_limit_cores:binding{%s} and %s %s{%s})' % [by, s, d.cgroupJoin, metric, s];
    // The application's own metrics carry its pod's namespace and pod (from its own scrape).
    local appSel(sel) = sel + ', namespace=~"$namespace", pod=~"$pod"';

    d.dashboard(
      'quota-runtime-pauses.json',
      'Stop-the-world inflation under CPU quotas: JVM safepoints, GC pauses and thread counts, Go GOMAXPROCS, '
      + 'threads and measured stop-the-world pauses, against the CPU limit.',
      [
        common.row('JVM'),
        common.timeSeries(
          'Safepoint time and time-to-safepoint',
          'percentunit',
          'Share of wall time the JVM spent at safepoints (all threads stopped) and reaching them '
          + '(time-to-safepoint: the world waits for the last thread, which may be descheduled by CFS throttling).',
          [
            common.workload('sum by (%s, process) (rate(quota_jvm_safepoint_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}} {{process}} at safepoint'),
            common.workload('sum by (%s, process) (rate(quota_jvm_safepoint_sync_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}} {{process}} reaching safepoint'),
          ],
        ),
        common.timeSeries(
          'Average time-to-safepoint',
          's',
          'Time-to-safepoint per safepoint. Milliseconds here while the cgroup is throttled are CFS stalls '
          + 'inside stop-the-world pauses.',
          [common.workload('sum by (%(by)s, process) (rate(quota_jvm_safepoint_sync_seconds_total{%(s)s}[$__rate_interval]))\n/\nsum by (%(by)s, process) (rate(quota_jvm_safepoints_total{%(s)s}[$__rate_interval]))'
                           % { by: by, s: s }, '{{name}} {{process}}')],
        ),
        common.timeSeries(
          'GC pause time by collector',
          'percentunit',
          'Share of wall time in GC pauses, by collector (young, full, concurrent). A short GC pause in the GC log '
          + 'next to a long application stall points to throttling, not GC work.',
          [common.workload('sum by (%s, process, collector) (rate(quota_jvm_gc_pause_seconds_total{%s}[$__rate_interval]))' % [by, s], '{{name}} {{process}} {{collector}}')],
        ),
        common.timeSeries(
          'GC pauses per second by collector',
          'short',
          'GC pauses per second, by collector.',
          [common.workload('sum by (%s, process, collector) (rate(quota_jvm_gc_pauses_total{%s}[$__rate_interval]))' % [by, s], '{{name}} {{process}} {{collector}}')],
        ),
        common.timeSeries(
          'Configured GC and JIT threads against the CPU limit',
          'short',
          'ParallelGCThreads, ConcGCThreads and JIT compiler threads as configured, and the CPU the JVM believes it '
          + 'has, against the cgroup CPU limit (dashed). Parallel GC threads well above the limit burn the quota in '
          + 'milliseconds (seed report: 18 GC threads, 3-core quota, 0.12 s GC pause, 3 s freeze).',
          [
            common.workload('quota_jvm_gc_parallel_threads{%s}' % s, '{{name}} {{process}} parallel GC'),
            common.workload('quota_jvm_gc_concurrent_threads{%s}' % s, '{{name}} {{process}} concurrent GC'),
            common.workload('quota_jvm_jit_threads{%s}' % s, '{{name}} {{process}} JIT'),
            common.workload('quota_jvm_cpu_count{%s}' % s, '{{name}} {{process}} CPUs seen'),
            common.workload(limitOf('quota_jvm_gc_parallel_threads'), '{{name}} limit'),
          ],
        ) + common.limitsDashed,
        common.timeSeries(
          'Observed JVM threads by kind against the CPU limit',
          'short',
          'Live JVM threads by kind (gc, jit, vm, app) and the CPU limit (dashed).',
          [
            common.workload('sum by (%s, process, kind) (quota_jvm_threads{%s})' % [by, s], '{{name}} {{process}} {{kind}}'),
            common.workload(limitOf('quota_jvm_threads'), '{{name}} limit'),
          ],
        ) + common.limitsDashed,
        common.timeSeries(
          'Runtime threads per core of limit',
          'short',
          'JVM parallel GC threads or Go GOMAXPROCS divided by the CPU limit (recorded as '
          + 'process:quota_runtime_parallelism_over_cpu_limit:ratio). Above 1 the runtime runs more threads in '
          + 'parallel than the quota allows.',
          [common.workload('process:quota_runtime_parallelism_over_cpu_limit:ratio{%s}' % s, '{{name}} {{process}} ({{runtime}})')],
        ) + d.seriesDrillDown(['quota-cpu-throttling.json']),
        common.timeSeries(
          'Throttled share of CFS periods',
          'percentunit',
          'Share of periods throttled for the same cgroups, to set pauses against throttling.',
          [common.workload('cgroup:quota_cpu_throttled_periods:ratio_rate5m{%s}' % s, '{{name}}')],
        ) + d.seriesDrillDown(['quota-cpu-throttling.json', 'quota-memory.json']),

        common.row('Go'),
        common.timeSeries(
          'GOMAXPROCS and threads against the CPU limit',
          'short',
          'Effective GOMAXPROCS and OS threads of Go programs against the CPU limit (dashed). Seed report: '
          + 'GOMAXPROCS=76 and 171 threads under a 0.5-core quota gave 50-100 ms GC pauses; GOMAXPROCS=1 cut them to '
          + 'tens of microseconds and threads to 11.',
          [
            common.workload('quota_go_gomaxprocs{%s}' % s, '{{name}} {{process}} GOMAXPROCS'),
            common.workload('quota_process_threads{%s, runtime="go"}' % s, '{{name}} {{process}} threads'),
            common.workload(limitOf('quota_go_gomaxprocs'), '{{name}} limit'),
          ],
        ) + common.limitsDashed,
        common.table(
          'Go programs',
          'Go version, whether the binary sizes GOMAXPROCS from the CPU limit (container_aware: Go >= 1.25 with a '
          + 'go >= 1.25 go.mod, or automaxprocs), and GOMAXPROCS against the limit.',
          [
            common.labelColumn('max by (%s, process, version, automaxprocs, container_aware) (quota_go_info{%s})' % [by, s]),
            common.column('GOMAXPROCS', 'max by (%s, process) (quota_go_gomaxprocs{%s})' % [by, s], 'short'),
            common.column('GOMAXPROCS / limit', 'max by (%s, process) (process:quota_go_gomaxprocs_over_cpu_limit:ratio{%s})' % [by, s], 'short'),
          ],
          'GOMAXPROCS / limit',
          width=12,
          height=8,
        ),
        common.timeSeries(
          'Go stop-the-world pauses (measured)',
          's',
          'p99 and p50 of every stop-the-world pause of each Go program, timed from outside by uprobes on the '
          + 'runtime (--collector.gopause; no change to the application), GC and other pauses apart. Seed report: '
          + '50-100+ ms with GOMAXPROCS=76 under a 0.5-core quota, tens of microseconds with GOMAXPROCS=1. '
          + 'QuotaGoSTWInflation fires on a p99 above ' + c.goSTWPauseP99Seconds + ' s over 10 minutes.',
          [
            common.workload('histogram_quantile(0.99, sum by (%s, process, kind, le) (rate(quota_go_stw_pause_seconds_bucket{%s}[$__rate_interval])))' % [by, s], '{{name}} {{process}} {{kind}} p99'),
            common.workload('histogram_quantile(0.5, sum by (%s, process, kind, le) (rate(quota_go_stw_pause_seconds_bucket{%s}[$__rate_interval])))' % [by, s], '{{name}} {{process}} {{kind}} p50'),
          ],
        ),
        common.timeSeries(
          'Go stop-the-world pauses per second',
          'short',
          'Stop-the-world pauses per second of each Go program (--collector.gopause), by kind: gc (sweep and mark '
          + 'termination, two per GC cycle) and other (GOMAXPROCS changes, ReadMemStats, stack dumps, traces).',
          [
            common.workload('sum by (%s, process, kind) (rate(quota_go_stw_pause_seconds_count{%s}[$__rate_interval]))' % [by, s], '{{name}} {{process}} {{kind}}'),
          ],
        ),
      ] + (
        if c.goGCPausesSelector != '' then [
          common.timeSeries(
            'Application GC pauses (go_gc_pauses_seconds)',
            's',
            "p99 and p50 of stop-the-world GC pauses reported by the applications' own client_golang metrics "
            + '(scraped from the applications, selector ' + c.goGCPausesSelector + ', filtered by the namespace and '
            + 'pod variables). Pauses of tens of ms under a quota, with GOMAXPROCS above the limit, are scheduling '
            + 'delay, not GC work.',
            [
              common.series('histogram_quantile(0.99, sum by (namespace, pod, le) (rate(go_gc_pauses_seconds_bucket{%s}[$__rate_interval])))' % appSel(c.goGCPausesSelector), '{{namespace}}/{{pod}} p99'),
              common.series('histogram_quantile(0.5, sum by (namespace, pod, le) (rate(go_gc_pauses_seconds_bucket{%s}[$__rate_interval])))' % appSel(c.goGCPausesSelector), '{{namespace}}/{{pod}} p50'),
            ],
          ),
        ] else []
      ) + (
        if c.goRuntimeSelector != '' then [
          common.timeSeries(
            'Application GOMAXPROCS and stop-the-world GC time',
            'short',
            "The applications' own view (client_golang runtime metrics, selector " + c.goRuntimeSelector
            + '): go_sched_gomaxprocs_threads, and the p99 of go_sched_pauses_total_gc_seconds (total stop-the-world '
            + 'time of a GC, in ms) to set against the GOMAXPROCS the exporter reads.',
            [
              common.series('max by (namespace, pod) (go_sched_gomaxprocs_threads{%s})' % appSel(c.goRuntimeSelector), '{{namespace}}/{{pod}} GOMAXPROCS'),
              common.series('1000 * histogram_quantile(0.99, sum by (namespace, pod, le) (rate(go_sched_pauses_total_gc_seconds_bucket{%s}[$__rate_interval])))' % appSel(c.goRuntimeSelector), '{{namespace}}/{{pod}} GC stop-the-world p99 (ms)'),
            ],
          ),
        ] else []
      ),
    ),
}
