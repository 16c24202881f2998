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

    // rule at the level whose limit binds, per cgroup: the larger of its own value, that of the
    // cgroup whose limit binds it (binding_cgroup of the binding-limit series, issue 10: on v2
    // before Linux 6.6 a container without a limit of its own is throttled through its pod's
    // cpu.stat only) and, for a container with a limit of its own, its pod's. The kubelet sets a
    // single-container pod's limit equal to its container's, and the kernel throttles both levels
    // in the same periods (measured, issue 25: container +5/s, pod +3-5/s of 10): a sum would
    // count one stall twice, the larger is the union's honest lower bound (docs/cgroups.md).
    local binding(rule) =
      local byLimit(m) = 'label_replace(%s{%s}, "binding_cgroup", "$1", "cgroup", "(.*)")' % [rule, m];
      |||
        max without (binding_cgroup) (
          %(rule)s
          or
          quota_cpu_binding_limit_cores{%(sel)s} * 0 + on(%(limitOn)s) group_left() %(limit)s
          or
          %(rule)s{container_id!=""} * 0 + on(%(podOn)s) group_left(binding_cgroup) %(pod)s
        )
      ||| % {
        rule: rule,
        sel: sel,
        limitOn: utils.labels(c.clusterLabels + ['job', 'instance', 'binding_cgroup']),
        limit: byLimit(''),
        podOn: utils.labels(c.podJoinLabels),
        pod: byLimit('container_id="", pod_uid!=""'),
      },

    // The limit that binds a cgroup: the binding limit where exported, else its own.
    local bindingLimit(own, eff) = |||
      max without (binding_cgroup) (%(eff)s{%(sel)s})
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
            record: 'cgroup:quota_cpu_limit_cores:binding',
            expr: bindingLimit('quota_cpu_limit_cores', 'quota_cpu_binding_limit_cores'),
          },
          {
            record: 'cgroup:quota_memory_limit_bytes:binding',
            expr: bindingLimit('quota_memory_limit_bytes', 'quota_memory_binding_limit_bytes'),
          },
          {
            // The throttled share every alert judges a cgroup on: at the level whose limit binds.
            record: 'cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m',
            expr: binding('cgroup:quota_cpu_throttled_periods:ratio_rate5m'),
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
            // group_left keeps the cgroup's labels (pod_uid, container_id, names), which alerts name.
            record: 'cgroup:quota_cpu_usage_over_limit:ratio_rate5m',
            expr: |||
              cgroup:quota_cpu_usage_seconds:rate5m
                / %(on)s group_left()
              cgroup:quota_cpu_limit_cores:binding
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
              cgroup:quota_cpu_limit_cores:binding
            ||| % { on: on },
          },
          {
            record: 'process:quota_jvm_gc_parallel_threads_over_cpu_limit:ratio',
            expr: |||
              quota_jvm_gc_parallel_threads{%(sel)s}
                / %(on)s group_left
              cgroup:quota_cpu_limit_cores:binding
            ||| % { sel: sel, on: on },
          },
          {
            record: 'process:quota_go_gomaxprocs_over_cpu_limit:ratio',
            expr: |||
              quota_go_gomaxprocs{%(sel)s}
                / %(on)s group_left
              cgroup:quota_cpu_limit_cores:binding
            ||| % { sel: sel, on: on },
          },
          {
            // Heavily throttled while the process using most of the cgroup's CPU is young, for
            // runtimes that warm up (JIT, class loading: warmupRuntimes): in most periods over 5
            // minutes, or frozen in bursts (a JVM warming up under a small limit freezes for
            // seconds while its 5-minute share stays below half). The value: the throttled share.
            record: 'cgroup:quota_cpu_warmup_throttled_periods:ratio_rate5m',
            expr: |||
              (
                cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m > %(ratio)g
                or
                cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m
                  and %(on)s cgroup:quota_cpu_frozen_windows:increase10m >= %(frozen)g
              )
              and %(on)s
              time() - cgroup:quota_process_start_time_seconds:top_cpu{runtime=~"%(rt)s"} < %(warmup)d
            ||| % {
              ratio: c.warmupThrottledPeriodsRatio,
              frozen: c.frozenSecondsPer10m,
              on: on,
              rt: c.warmupRuntimes,
              warmup: utils.seconds(c.warmupPeriod),
            },
          },
          {
            // Cgroups whose throttling has an alert of its own, which QuotaCPUStalls and
            // QuotaCPUAtLimit leave to it (one problem, one alert): a runtime's parallelism (Go
            // GOMAXPROCS, JVM parallel GC threads) or a JVM's warm-up.
            record: 'cgroup:quota_cpu_throttling_cause:info',
            expr: |||
              group by (%(by)s, pod_uid, container_id) (
                quota_go_gomaxprocs{%(sel)s} > 2 and process:quota_go_gomaxprocs_over_cpu_limit:ratio > %(go)g
                or
                quota_jvm_gc_parallel_threads{%(sel)s} > 1 and process:quota_jvm_gc_parallel_threads_over_cpu_limit:ratio > %(gc)g
                or
                cgroup:quota_cpu_warmup_throttled_periods:ratio_rate5m
              )
            ||| % { by: join, sel: sel, go: c.goMaxProcsPerLimitCore, gc: c.gcThreadsPerLimitCore },
          },
          {
            // The same for a pod slice when one of its containers has it (a container's cgroup
            // is a child of its pod slice's).
            record: 'cgroup:quota_cpu_throttling_explained:info',
            expr: |||
              group by (%(by)s) (cgroup:quota_cpu_throttling_cause:info)
              or
              group by (%(by)s) (
                label_replace(cgroup:quota_cpu_throttling_cause:info{container_id!="", pod_uid!=""}, "cgroup", "$1", "cgroup", "(.+)/[^/]+")
              )
            ||| % { by: join },
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
            // A static pod's cgroups carry the kubelet's hash of its manifest as pod UID, which
            // kube_pod_info (the mirror pod's own UID) never shows: its containers, which
            // kube-state-metrics lists by id from the mirror pod's status, name its pod UID.
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
                (
                  max by (%(ksmPrefix)spod_uid, namespace, pod) (label_replace(kube_pod_info{%(ksm)s}, "pod_uid", "$1", "uid", "(.*)"))
                    or
                  max by (%(ksmPrefix)spod_uid, namespace, pod) (
                    group by (%(ksmPrefix)spod_uid, container_id) (quota_cpu_usage_seconds_total{%(sel)s, pod_uid!="", container_id!=""})
                      * on(%(ksmPrefix)scontainer_id) group_left(namespace, pod)
                    max by (%(ksmPrefix)scontainer_id, namespace, pod) (kube_pod_container_info{%(ksm)s, container_id!=""})
                  )
                )
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
          {
            // A cgroup whose JVM heaps may still grow to their max with the rest under 95% of the
            // limit, and whose memory outside the heaps does not creep into that room within the
            // horizon: its working set grows because a heap fills up to -Xmx (MaxRAMPercentage),
            // by design, which QuotaMemoryCreep leaves alone.
            record: 'cgroup:quota_memory_heap_fill_fits:info',
            expr: |||
              (
                cgroup:quota_jvm_heap_max_bytes:sum + %(on)s cgroup:quota_memory_working_set_bytes:minus_jvm_heap
                  < %(on)s (0.95 * cgroup:quota_memory_limit_bytes:binding)
              )
              unless %(on)s
              (
                (
                  cgroup:quota_memory_limit_bytes:binding
                    - %(on)s cgroup:quota_jvm_heap_max_bytes:sum
                    - %(on)s cgroup:quota_memory_working_set_bytes:minus_jvm_heap
                )
                  / %(on)s
                (cgroup:quota_memory_working_set_bytes:minus_jvm_heap_deriv%(lb)s > 0)
                < %(horizon)d
              )
            ||| % { on: on, lb: c.memoryCreepLookback, horizon: utils.seconds(c.memoryCreepHorizon) },
          },
        ],
      },
    ],
  },
}
