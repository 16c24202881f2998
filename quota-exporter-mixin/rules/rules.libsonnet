// Recording rules shared by alerts and dashboards. Names follow level:metric:operations;
// "cgroup" keeps every per-cgroup identity label, "process" every per-process one.
local utils = import '../lib/utils.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local sel = c.quotaExporterSelector,
    local join = utils.labels(c.cgroupJoinLabels),
    local on = 'on(%s)' % join,
    local cgLabels = utils.labels(c.cgroupLabels),

    // The value of rule for the cgroup whose limit binds each cgroup (limit_cgroup of the
    // effective-limit series, issue 10), keyed by the cgroup itself; where no effective-limit
    // series exists (v1, older exporters) the cgroup's own value. On v2 before Linux 6.6 a
    // container without a limit of its own is throttled through its pod's cpu.stat only.
    local binding(rule) = |||
      max without (child_cgroup, limit_cgroup) (
        label_replace(
          label_replace(
            label_replace(quota_cpu_effective_limit_cores{%(sel)s}, "child_cgroup", "$1", "cgroup", "(.*)"),
            "cgroup", "$1", "limit_cgroup", "(.*)"
          ) * 0
          + %(on)s group_left()
          %(rule)s,
          "cgroup", "$1", "child_cgroup", "(.*)"
        )
      )
      or
      %(rule)s
    ||| % { sel: sel, on: on, rule: rule },

    // A container with a limit of its own inside a pod with one too (the kubelet sets both; for a
    // single-container pod they are equal): each level's counters count only its own throttling,
    // and the kernel throttles both levels in the same periods (measured on this host, issue 25:
    // container +5/s, pod +3-5/s of 10 periods for a service throttled in half of them). A sum
    // counts one stall twice; the container's value is the larger of its own share and its pod's
    // (the union's honest lower bound with per-level counters, see docs/cgroups.md).
    local withPod(rule) =
      local ctr = '(%(rule)s{container_id!=""} and on(%(join)s) quota_cpu_limit_cores{%(sel)s, container_id!=""})'
                  % { rule: rule, join: join, sel: sel };
      local pod = '%s{container_id="", pod_uid!=""}' % rule;
      local podOn = 'on(%s)' % utils.labels(c.podJoinLabels);
      |||
        (
          %(ctr)s >= %(podOn)s group_left() %(pod)s
          or on(%(join)s)
          %(ctr)s * 0 + %(podOn)s group_left() %(pod)s
        )
        or
        %(rule)s
      ||| % { ctr: ctr, pod: pod, podOn: podOn, join: join, rule: rule },

    // The limit that binds a cgroup: the effective limit where exported, else its own.
    local effective(own, eff) = |||
      max without (limit_cgroup) (%(eff)s{%(sel)s})
        or
      %(own)s{%(sel)s}
    ||| % { own: own, eff: eff, sel: sel },

    // Frozen windows: sampler windows (--throttle.window, 1 s by default) in which more than 90%
    // of the CFS periods were throttled. Only the le="0.5" and le="0.9" buckets are relied on.
    local frozen(range) = |||
      increase(quota_cpu_throttled_window_ratio_count{%(sel)s}[%(range)s])
        - ignoring(le)
      increase(quota_cpu_throttled_window_ratio_bucket{%(sel)s, le="0.9"}[%(range)s])
    ||| % { sel: sel, range: range },

    local clusterBy = utils.labels(c.clusterLabels + ['job', 'instance', 'cgroup']),
    local ksm = c.kubeStateMetricsSelector,
    local ksmBy = utils.labels(c.clusterLabels),
    local ksmPrefix = if c.clusterLabels == [] then '' else ksmBy + ', ',

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
            // Freezes at their real rate: a 5-minute average spreads one 3 s freeze a minute
            // to 5% of periods, these count the 3 frozen windows.
            record: 'cgroup:quota_cpu_frozen_windows:increase10m',
            expr: frozen('10m'),
          },
          {
            // The JVMs of a cgroup: heap committed now, and the most their heaps may grow to
            // (-Xmx or MaxRAMPercentage). A heap filling up to its max is planned growth, which a
            // working-set trend alone mistakes for creep.
            record: 'cgroup:quota_jvm_heap_committed_bytes:sum',
            expr: 'sum by (%(by)s) (quota_jvm_heap_committed_bytes{%(sel)s})' % { by: cgLabels, sel: sel },
          },
          {
            record: 'cgroup:quota_jvm_heap_max_bytes:sum',
            expr: 'sum by (%(by)s) (quota_jvm_heap_max_bytes{%(sel)s})' % { by: cgLabels, sel: sel },
          },
          {
            // The working set outside the JVM heaps (cgroups with a JVM only): native memory,
            // metaspace, thread stacks, page cache, other processes.
            record: 'cgroup:quota_memory_working_set_bytes:minus_jvm_heap',
            expr: |||
              quota_memory_working_set_bytes{%(sel)s}
                - %(on)s group_left()
              cgroup:quota_jvm_heap_committed_bytes:sum
            ||| % { sel: sel, on: on },
          },
          {
            record: 'cgroup:quota_cpu_limit_cores:effective',
            expr: effective('quota_cpu_limit_cores', 'quota_cpu_effective_limit_cores'),
          },
          {
            record: 'cgroup:quota_memory_limit_bytes:effective',
            expr: effective('quota_memory_limit_bytes', 'quota_memory_effective_limit_bytes'),
          },
          {
            // The larger of a cgroup's own throttling and its pod's where both have a limit (withPod): what
            // the per-level alerts (warm-up, stalls, system CPU) judge a container on.
            record: 'cgroup:quota_cpu_throttled_periods_with_pod:ratio_rate5m',
            expr: withPod('cgroup:quota_cpu_throttled_periods:ratio_rate5m'),
          },
          {
            // Throttling of the cgroup whose limit binds (the same cgroup unless an ancestor's binds).
            record: 'cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m',
            expr: binding('cgroup:quota_cpu_throttled_periods_with_pod:ratio_rate5m'),
          },
          {
            record: 'cgroup:quota_cpu_binding_frozen_windows:increase10m',
            expr: binding('cgroup:quota_cpu_frozen_windows:increase10m'),
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
            // The share of its CPU limit a cgroup uses: at cpuBoundUsageRatio or above it is
            // CPU-bound at its limit (QuotaCPUAtLimit), below it its freezes are bursts (QuotaCPUStalls).
            record: 'cgroup:quota_cpu_usage_over_limit:ratio_rate5m',
            expr: |||
              cgroup:quota_cpu_usage_seconds:rate5m
                / %(on)s
              cgroup:quota_cpu_limit_cores:effective
            ||| % { on: on },
          },
          {
            // rate over 5m divides a young series' increase by the whole 5 minutes, so a cgroup
            // started a minute ago reads a fifth of its use: what alerts about young processes
            // print and test against uses this short window (two samples at a 1m scrape).
            record: 'cgroup:quota_cpu_usage_seconds:rate2m',
            expr: 'sum without (mode) (rate(quota_cpu_usage_seconds_total{%(sel)s}[2m]))' % { sel: sel },
          },
          {
            record: 'process:quota_process_cpu_seconds:rate2m',
            expr: 'sum without (mode) (rate(quota_process_cpu_seconds_total{%(sel)s}[2m]))' % { sel: sel },
          },
          {
            // The start time of the process that uses most of its cgroup's CPU (with its
            // process label): warm-up is judged on it, not on any young helper or probe.
            record: 'cgroup:quota_process_start_time_seconds:top_cpu',
            expr: |||
              quota_process_start_time_seconds{%(sel)s}
                and on(%(join)s, process)
              topk by (%(join)s) (1, process:quota_process_cpu_seconds:rate2m)
            ||| % { sel: sel, join: join },
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
              cgroup:quota_cpu_limit_cores:effective
            ||| % { on: on },
          },
          {
            record: 'process:quota_jvm_gc_parallel_threads_over_cpu_limit:ratio',
            expr: |||
              quota_jvm_gc_parallel_threads{%(sel)s}
                / %(on)s group_left
              cgroup:quota_cpu_limit_cores:effective
            ||| % { sel: sel, on: on },
          },
          {
            record: 'process:quota_go_gomaxprocs_over_cpu_limit:ratio',
            expr: |||
              quota_go_gomaxprocs{%(sel)s}
                / %(on)s group_left
              cgroup:quota_cpu_limit_cores:effective
            ||| % { sel: sel, on: on },
          },
          // Go stop-the-world pause tail and median (gopause collector), GC and other pauses together.
          {
            record: 'process:quota_go_stw_pause_seconds:p99_10m',
            expr: |||
              histogram_quantile(0.99, sum without (kind) (rate(quota_go_stw_pause_seconds_bucket{%(sel)s}[10m])))
            ||| % { sel: sel },
          },
          {
            record: 'process:quota_go_stw_pause_seconds:p50_10m',
            expr: |||
              histogram_quantile(0.5, sum without (kind) (rate(quota_go_stw_pause_seconds_bucket{%(sel)s}[10m])))
            ||| % { sel: sel },
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
            // Mean time-to-safepoint per safepoint, in seconds (absolute, needs no baseline).
            record: 'process:quota_jvm_safepoint_sync_seconds:mean5m',
            expr: |||
              rate(quota_jvm_safepoint_sync_seconds_total{%(sel)s}[5m])
                /
              (rate(quota_jvm_safepoints_total{%(sel)s}[5m]) > 0)
            ||| % { sel: sel },
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
        ] + (
          if c.kubeNamesSource == 'kube-state-metrics' then [{
            // Kubernetes names per cgroup from kube-state-metrics: containers by container id,
            // pod slices by pod UID. Alerts join it on the cgroup (see _config.kubeNamesSource).
            // A container kube-state-metrics no longer lists (restarted: its info now carries the
            // new container id, as for the OOM-killed container whose kill counter the exporter
            // keeps) still gets its pod's namespace and name through the pod UID.
            record: 'cgroup:quota_kube_names:info',
            expr: |||
              (
                group by (%(by)s, container_id) (quota_cpu_usage_seconds_total{%(sel)s, container_id!=""})
                  * on(%(ksmPrefix)scontainer_id) group_left(namespace, pod, container)
                max by (%(ksmPrefix)scontainer_id, namespace, pod, container) (kube_pod_container_info{%(ksm)s, container_id!=""})
              )
              or on(%(by)s)
              (
                group by (%(by)s, pod_uid) (
                  quota_cpu_usage_seconds_total{%(sel)s, pod_uid!=""} or quota_memory_oom_kills_total{%(sel)s, pod_uid!=""}
                )
                  * on(%(ksmPrefix)spod_uid) group_left(namespace, pod)
                max by (%(ksmPrefix)spod_uid, namespace, pod) (label_replace(kube_pod_info{%(ksm)s}, "pod_uid", "$1", "uid", "(.*)"))
              )
            ||| % { by: clusterBy, sel: sel, ksm: ksm, ksmPrefix: ksmPrefix },
          }] else []
        ),
      },
      {
        // Long ranges, evaluated once a minute whatever the global evaluation_interval is.
        name: 'quota-exporter-slow.rules',
        interval: c.slowRulesInterval,
        rules: [
          {
            // The working set's trend (per second) over the creep lookback: the whole cgroup,
            // so two JVMs that together reach the limit count.
            record: 'cgroup:quota_memory_working_set_bytes:deriv' + c.memoryCreepLookback,
            expr: 'deriv(quota_memory_working_set_bytes{%(sel)s}[%(lb)s])' % { sel: sel, lb: c.memoryCreepLookback },
          },
          {
            // The same for the working set outside the JVM heaps: the creep alert's test of
            // whether anything but a filling heap grows.
            record: 'cgroup:quota_memory_working_set_bytes:minus_jvm_heap_deriv' + c.memoryCreepLookback,
            expr: 'deriv(cgroup:quota_memory_working_set_bytes:minus_jvm_heap[%(lb)s])' % { lb: c.memoryCreepLookback },
          },
        ],
      },
    ],
  },
}
