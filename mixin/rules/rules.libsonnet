// Recording rules shared by alerts and dashboards. Names follow level:metric:operations;
// "cgroup" keeps every per-cgroup identity label, "process" every per-process one.
local utils = import '../lib/utils.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local sel = c.quotaExporterSelector,
    local on = 'on(%s)' % utils.labels(c.cgroupJoinLabels),

    groups+: [
      {
        name: 'quota-exporter.rules',
        rules: [
          {
            // Share of CFS periods in which the cgroup was throttled (the stall signal;
            // throttled seconds are summed over CPUs and can exceed wall time).
            record: 'cgroup:quota_cpu_throttled_periods:ratio_rate5m',
            expr: |||
              rate(quota_cpu_throttled_periods_total{%(sel)s}[5m])
                /
              (rate(quota_cpu_periods_total{%(sel)s}[5m]) > 0)
            ||| % { sel: sel },
          },
          {
            // Seconds, per 5 minutes, in which more than half the periods were throttled,
            // from the exporter's per-second sampler (short freezes a 5m average hides).
            record: 'cgroup:quota_cpu_stalled_seconds:increase5m',
            expr: |||
              increase(quota_cpu_throttled_window_ratio_count{%(sel)s}[5m])
                - ignoring(le)
              increase(quota_cpu_throttled_window_ratio_bucket{%(sel)s, le="0.5"}[5m])
            ||| % { sel: sel },
          },
          {
            record: 'cgroup:quota_cpu_stalled_seconds:increase1h',
            expr: |||
              increase(quota_cpu_throttled_window_ratio_count{%(sel)s}[1h])
                - ignoring(le)
              increase(quota_cpu_throttled_window_ratio_bucket{%(sel)s, le="0.5"}[1h])
            ||| % { sel: sel },
          },
          {
            record: 'cgroup_mode:quota_cpu_usage_seconds:rate5m',
            expr: 'rate(quota_cpu_usage_seconds_total{%(sel)s}[5m])' % { sel: sel },
          },
          {
            record: 'cgroup:quota_cpu_usage_seconds:rate5m',
            expr: 'sum without (mode) (cgroup_mode:quota_cpu_usage_seconds:rate5m)',
          },
          {
            // rate over 5m divides a young series' increase by the whole 5 minutes, so a cgroup
            // started a minute ago reads a fifth of its use: what alerts about young processes
            // print and test against uses this short window (two samples at a 1m scrape).
            record: 'cgroup:quota_cpu_usage_seconds:rate2m',
            expr: 'sum without (mode) (rate(quota_cpu_usage_seconds_total{%(sel)s}[2m]))' % { sel: sel },
          },
          {
            // Threads the runtime will run in parallel: JVM parallel GC threads, Go GOMAXPROCS.
            record: 'process:quota_runtime_parallelism:threads',
            expr: |||
              quota_jvm_gc_parallel_threads{%(sel)s}
                or
              quota_go_gomaxprocs{%(sel)s}
            ||| % { sel: sel },
          },
          {
            record: 'process:quota_runtime_parallelism_over_cpu_limit:ratio',
            expr: |||
              process:quota_runtime_parallelism:threads
                / %(on)s group_left
              quota_cpu_limit_cores{%(sel)s}
            ||| % { sel: sel, on: on },
          },
          {
            record: 'process:quota_jvm_gc_parallel_threads_over_cpu_limit:ratio',
            expr: |||
              quota_jvm_gc_parallel_threads{%(sel)s}
                / %(on)s group_left
              quota_cpu_limit_cores{%(sel)s}
            ||| % { sel: sel, on: on },
          },
          {
            record: 'process:quota_go_gomaxprocs_over_cpu_limit:ratio',
            expr: |||
              quota_go_gomaxprocs{%(sel)s}
                / %(on)s group_left
              quota_cpu_limit_cores{%(sel)s}
            ||| % { sel: sel, on: on },
          },
          {
            record: 'process:quota_jvm_safepoint_seconds:rate5m',
            expr: 'rate(quota_jvm_safepoint_seconds_total{%(sel)s}[5m])' % { sel: sel },
          },
          {
            // Time-to-safepoint: threads running to the safepoint while the world waits.
            record: 'process:quota_jvm_safepoint_sync_seconds:rate5m',
            expr: 'rate(quota_jvm_safepoint_sync_seconds_total{%(sel)s}[5m])' % { sel: sel },
          },
          {
            record: 'process:quota_jvm_jit_compilation_seconds:rate5m',
            expr: 'rate(quota_jvm_jit_compilation_seconds_total{%(sel)s}[5m])' % { sel: sel },
          },
          {
            // Share of the process's RSS resident in glibc arena heaps (non-main arenas).
            record: 'process:quota_process_malloc_heap_resident_bytes:ratio',
            expr: |||
              quota_process_malloc_heap_resident_bytes{%(sel)s}
                /
              (quota_process_resident_bytes{%(sel)s} > 0)
            ||| % { sel: sel },
          },
        ],
      },
    ],
  },
}
