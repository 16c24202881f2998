// Recording rules shared by alerts and dashboards. Names follow level:metric:operations;
// "cgroup" keeps every per-cgroup identity label, "process" every per-process one. A rule reads
// raw series or rules of the levels before it, at most three deep: raw -> 1 -> 2 -> 3.
local utils = import '../lib/utils.libsonnet';

{
  prometheusRules+:: {
    local c = $._config,
    local sel = c.quotaExporterSelector,
    local join = utils.labels(c.cgroupJoinLabels),
    local on = 'on(%s)' % join,
    local cgLabels = utils.labels(c.cgroupLabels),
    local node = c.nodeSliceMatcher,
    local ksm = c.kubeStateMetricsSelector,
    local ksmMode = c.kubeNamesSource == 'kube-state-metrics',
    local ksmPrefix = if c.clusterLabels == [] then '' else utils.labels(c.clusterLabels) + ', ',
    local podOn = 'on(%s)' % utils.labels(c.podJoinLabels),

    // A rule at the level whose limit binds, per cgroup: the larger of its own value, that of the
    // cgroup whose limit binds it (binding_cgroup of the binding-limit series: on v2 before Linux
    // 6.6 a container without a limit of its own is throttled through its pod's cpu.stat only)
    // and, for a container with a limit of its own, its pod's. The kernel throttles both levels in
    // the same periods: a sum would count one stall twice (docs/cgroups.md).
    local binding(rule) =
      local byLimit(m) = 'label_replace(%s{%s}, "binding_cgroup", "$1", "cgroup", "(.*)")' % [rule, m];
      |||
        max without (binding_cgroup) (
          %(rule)s
          or
          quota_cpu_binding_limit_cores{%(sel)s} * 0 + on(%(limitOn)s) group_left() %(limit)s
          or
          %(rule)s{container_id!=""} * 0 + %(podOn)s group_left(binding_cgroup) %(pod)s
        )
      ||| % {
        rule: rule,
        sel: sel,
        limitOn: utils.labels(c.clusterLabels + ['job', 'instance', 'binding_cgroup']),
        limit: byLimit(''),
        podOn: podOn,
        pod: byLimit('container_id="", pod_uid!=""'),
      },

    // The limit that binds a cgroup: the binding limit where exported, else its own.
    local bindingLimit(own, binding) = |||
      max without (binding_cgroup) (%(binding)s{%(sel)s})
        or
      %(own)s{%(sel)s}
    ||| % { own: own, binding: binding, sel: sel },

    // Frozen windows: sampler windows (--throttle.window, 1 s by default) in which more than 90%
    // of the CFS periods were throttled. Only the le="0.5" and le="0.9" buckets are relied on.
    local frozen(range) = |||
      increase(quota_cpu_throttled_window_ratio_count{%(sel)s}[%(range)s])
        - ignoring(le)
      increase(quota_cpu_throttled_window_ratio_bucket{%(sel)s, le="0.9"}[%(range)s])
    ||| % { sel: sel, range: range },

    // Heavily throttled while the process using most of the cgroup's CPU is young, for runtimes
    // that warm up (JIT, class loading: warmupRuntimes): in most periods over 5 minutes, or frozen
    // in bursts (a JVM warming up under a small limit freezes for seconds while its 5-minute share
    // stays below half). The value: the throttled share.
    local warmup = |||
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

    // The scope rules' input: every cgroup (a retained OOM-kill counter counts: its cgroup may be gone).
    local cgroups(m) =
      'group by (%(by)s, pod_uid) (\n  quota_cpu_usage_seconds_total{%(sel)s, %(m)s}\n  or quota_memory_working_set_bytes{%(sel)s, %(m)s}\n  or quota_memory_oom_kills_total{%(sel)s, %(m)s}\n)'
      % { by: join, sel: sel, m: m },
    // Pods whose limits are the pod's alone: the pod slice has one, and has had one for 5
    // minutes, and none of its containers had one in the last 15 minutes (pod-level resources).
    // The kubelet makes the pod slice before its containers, and a container is exported once
    // the kubelet has linked it: one OOM-killed seconds after its start can go unscraped in its
    // first runs (seen on the v2 node, 60 s without a container). A container in
    // CrashLoopBackOff is gone for up to the kubelet's 5-minute back-off between its runs: its
    // pod still is not one. A sandbox has none of its own, so it never counts.
    local podsHoldingLimits = |||
      (
        group by (%(pod)s) (
          quota_cpu_limit_cores{%(sel)s, container_id="", pod_uid!=""} or quota_memory_limit_bytes{%(sel)s, container_id="", pod_uid!=""}
        )
          and %(podOn)s
        group by (%(pod)s) (
          present_over_time(quota_cpu_limit_cores{%(sel)s, container_id="", pod_uid!=""}[15m] offset 5m)
          or present_over_time(quota_memory_limit_bytes{%(sel)s, container_id="", pod_uid!=""}[15m] offset 5m)
        )
          unless %(podOn)s
        (
          present_over_time(quota_cpu_limit_cores{%(sel)s, container_id!=""}[15m])
          or present_over_time(quota_memory_limit_bytes{%(sel)s, container_id!=""}[15m])
        )
      )
    ||| % { pod: utils.labels(c.podJoinLabels), sel: sel, podOn: podOn },
    // kube-state-metrics mode: a live container that kube-state-metrics does not list in a pod it
    // knows is the pod's sandbox (kube_pod_container_info has no pause or infra container).
    local ksmSandbox = |||
      group by (%(by)s, pod_uid) (
        quota_cpu_usage_seconds_total{%(sel)s, container_id!=""}
          and on(%(ksmPrefix)spod_uid) label_replace(kube_pod_info{%(ksm)s}, "pod_uid", "$1", "uid", "(.*)")
          unless on(%(ksmPrefix)scontainer_id) kube_pod_container_info{%(ksm)s}
      )
    ||| % { by: join, sel: sel, ksm: ksm, ksmPrefix: ksmPrefix },
    local scope(name, expr) = { record: 'cgroup:quota_scope:info', labels: { scope: name }, expr: expr },

    groups+: [
      {
        name: 'quota-exporter.rules',
        rules: [
          // What each cgroup is to Kubernetes, decided once for every alert (docs/architecture.md,
          // "scope"): the alerts name containers, pods and other cgroups through it, and never a
          // sandbox or a node-level slice (they have no scope). One level per pod: its containers,
          // or the pod slice where the pod alone holds the limits (and then not its containers,
          // whose limit is the pod's).
          scope('container', '%s\n  unless %s\n%s%s' % [
            cgroups('container_id!="", container!="POD"'),
            podOn,
            podsHoldingLimits,
            if ksmMode then '  unless %s\n%s' % [on, ksmSandbox] else '',
          ]),
          scope('sandbox', cgroups('container="POD"') + (if ksmMode then '\nor\n' + ksmSandbox else '\n')),
          scope('pod', '%s\n  and %s\n%s' % [cgroups('container_id="", pod_uid!=""'), podOn, podsHoldingLimits]),
          scope('cgroup', cgroups('container_id="", pod_uid="", ' + node) + '\n'),
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
              sum by (%(by)s) (quota_jvm_heap_committed_bytes{%(sel)s})
            ||| % { sel: sel, on: on, by: cgLabels },
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
            // Each cgroup's binding cgroup (binding_cgroup): the exporter's, else itself where it
            // has a limit of its own.
            record: 'cgroup:quota_cpu_binding_cgroup:info',
            expr: |||
              group by (%(join)s, binding_cgroup) (quota_cpu_binding_limit_cores{%(sel)s})
                or %(on)s
              group by (%(join)s, binding_cgroup) (label_replace(quota_cpu_limit_cores{%(sel)s}, "binding_cgroup", "$1", "cgroup", "(.*)"))
            ||| % { join: join, sel: sel, on: on },
          },
          {
            record: 'cgroup_mode:quota_cpu_usage_seconds:rate5m',
            expr: 'rate(quota_cpu_usage_seconds_total{%(sel)s}[5m])' % { sel: sel },
          },
          {
            record: 'cgroup:quota_cpu_usage_seconds:rate5m',
            expr: 'sum without (mode) (rate(quota_cpu_usage_seconds_total{%(sel)s}[5m]))' % { sel: sel },
          },
          {
            // rate over 5m divides a young series' increase by the whole 5 minutes, so a cgroup
            // started a minute ago reads a fifth of its use: what alerts about young processes
            // print and test against uses this short range (two samples at a 1m scrape).
            record: 'cgroup:quota_cpu_usage_seconds:rate2m',
            expr: 'sum without (mode) (rate(quota_cpu_usage_seconds_total{%(sel)s}[2m]))' % { sel: sel },
          },
          {
            record: 'process:quota_process_cpu_seconds:rate2m',
            expr: 'sum without (mode) (rate(quota_process_cpu_seconds_total{%(sel)s}[2m]))' % { sel: sel },
          },
          {
            // Kills by the OOM killer in the last oomKilledWindow. A restarted container's old
            // cgroup is gone before the next scrape: the exporter keeps its kill counter, which
            // may first be seen already above zero.
            record: 'cgroup:quota_memory_oom_kills:increase' + c.oomKilledWindow,
            expr: |||
              increase(quota_memory_oom_kills_total{%(sel)s}[%(window)s]) > 0
              or
              (
                quota_memory_oom_kills_total{%(sel)s} > 0
                unless
                quota_memory_oom_kills_total{%(sel)s} offset %(window)s
              )
            ||| % { sel: sel, window: c.oomKilledWindow },
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
          // Go stop-the-world pause tail and median (gopause collector), GC and other pauses together.
          {
            record: 'process:quota_go_stw_pause_seconds:p99_10m',
            expr: |||
              histogram_quantile(0.99, sum without (kind) (rate(quota_go_stw_pause_seconds_bucket{%(sel)s, %(node)s}[10m])))
            ||| % { sel: sel, node: node },
          },
          {
            record: 'process:quota_go_stw_pause_seconds:p50_10m',
            expr: |||
              histogram_quantile(0.5, sum without (kind) (rate(quota_go_stw_pause_seconds_bucket{%(sel)s}[10m])))
            ||| % { sel: sel },
          },
          {
            record: 'process:quota_jvm_safepoint_seconds:rate5m',
            expr: 'rate(quota_jvm_safepoint_seconds_total{%(sel)s, %(node)s}[5m])' % { sel: sel, node: node },
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
          // Level 2: over the rules above.
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
            // The share of its CPU limit a cgroup uses. group_left keeps the cgroup's labels
            // (pod_uid, container_id, names), which alerts name.
            record: 'cgroup:quota_cpu_usage_over_limit:ratio_rate5m',
            expr: |||
              cgroup:quota_cpu_usage_seconds:rate5m
                / %(on)s group_left()
              cgroup:quota_cpu_limit_cores:binding
            ||| % { on: on },
          },
          {
            // The kernel's (system) share of a cgroup's CPU time.
            record: 'cgroup:quota_cpu_usage_system:ratio_rate5m',
            expr: |||
              cgroup_mode:quota_cpu_usage_seconds:rate5m{mode="system"}
                / ignoring(mode)
              cgroup:quota_cpu_usage_seconds:rate5m
            |||,
          },
          {
            record: 'cgroup:quota_memory_working_set_over_limit:ratio',
            expr: |||
              quota_memory_working_set_bytes{%(sel)s}
                /
              cgroup:quota_memory_limit_bytes:binding
            ||| % { sel: sel },
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
              quota_jvm_gc_parallel_threads{%(sel)s, %(node)s}
                / %(on)s group_left
              cgroup:quota_cpu_limit_cores:binding
            ||| % { sel: sel, node: node, on: on },
          },
          {
            record: 'process:quota_go_gomaxprocs_over_cpu_limit:ratio',
            expr: |||
              quota_go_gomaxprocs{%(sel)s, %(node)s}
                / %(on)s group_left
              cgroup:quota_cpu_limit_cores:binding
            ||| % { sel: sel, node: node, on: on },
          },
          {
            // The glibc arenas a process may have before they count as bloat: mallocArenasPerLimitCore
            // per core of its CPU limit, mallocArenasWithoutLimit without one (glibc allows 8 per
            // host CPU whatever the limit).
            record: 'process:quota_process_malloc_arenas:allowed',
            expr: |||
              quota_process_malloc_arenas{%(sel)s, %(node)s} * 0 + %(on)s group_left() (%(perCore)g * cgroup:quota_cpu_limit_cores:binding)
                or
              quota_process_malloc_arenas{%(sel)s, %(node)s} * 0 + %(noLimit)g
            ||| % { sel: sel, node: node, on: on, perCore: c.mallocArenasPerLimitCore, noLimit: c.mallocArenasWithoutLimit },
          },
          // Level 3.
          {
            record: 'cgroup:quota_cpu_warmup_throttled_periods:ratio_rate5m',
            expr: warmup,
          },
          {
            // CPU-bound at its limit (a batch job, a saturated worker): it uses cpuBoundUsageRatio
            // of its limit and is throttled in nearly every period, not frozen by bursts. The value:
            // the share of the limit used.
            record: 'cgroup:quota_cpu_at_limit:ratio_rate5m',
            expr: |||
              cgroup:quota_cpu_usage_over_limit:ratio_rate5m >= %(usage)g
                and %(on)s
              cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m >= %(throttled)g
            ||| % { on: on, usage: c.cpuBoundUsageRatio, throttled: c.cpuBoundThrottledPeriodsRatio },
          },
          {
            // Throttled enough that a runtime's parallelism is to blame: in one period in 20, or
            // frozen for seconds.
            record: 'cgroup:quota_cpu_throttled:info',
            expr: |||
              group by (%(join)s) (
                cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m > %(ratio)g
                or
                cgroup:quota_cpu_binding_frozen_windows:increase10m >= %(frozen)g
              )
            ||| % { join: join, ratio: c.throttledPeriodsRatioForCause, frozen: c.frozenSecondsForCause },
          },
          {
            // Throttling with an alert of its own, which QuotaCPUStalls and QuotaCPUAtLimit leave to
            // it (one problem, one alert): a runtime's parallelism (Go GOMAXPROCS, JVM parallel GC
            // threads) or a JVM's warm-up. It explains the throttling of every cgroup under the
            // limit it overloads: found per binding cgroup, given back to each cgroup that limit binds.
            record: 'cgroup:quota_cpu_throttling_explained:info',
            expr: |||
              group by (%(join)s) (
                cgroup:quota_cpu_binding_cgroup:info
                  * on(%(bindingOn)s) group_left()
                group by (%(bindingOn)s) (
                  (
                    quota_go_gomaxprocs{%(sel)s} > 2 and process:quota_go_gomaxprocs_over_cpu_limit:ratio > %(go)g
                    or
                    quota_jvm_gc_parallel_threads{%(sel)s} > 1 and process:quota_jvm_gc_parallel_threads_over_cpu_limit:ratio > %(gc)g
                    or
              %(warmup)s
                  )
                    * %(on)s group_left(binding_cgroup)
                  cgroup:quota_cpu_binding_cgroup:info
                )
              )
            ||| % {
              join: join,
              bindingOn: utils.labels(c.clusterLabels + ['job', 'instance', 'binding_cgroup']),
              sel: sel,
              go: c.goMaxProcsPerLimitCore,
              gc: c.gcThreadsPerLimitCore,
              on: on,
              warmup: std.join('\n', ['      ' + l for l in std.split(std.rstripChars(warmup, '\n'), '\n')]),
            },
          },
        ] + (
          if ksmMode then [{
            // Kubernetes names per cgroup from kube-state-metrics: containers by container id,
            // pod slices by pod UID, none for the others (every cgroup has one series, which the
            // alerts join). A container kube-state-metrics no longer lists (restarted: its info
            // now carries the new container id, as for the OOM-killed container whose kill counter
            // the exporter keeps) still gets its pod's namespace and name through the pod UID.
            // A static pod's cgroups carry the kubelet's hash of its manifest as pod UID, which
            // kube_pod_info (the mirror pod's own UID) never shows: its containers, which
            // kube-state-metrics lists by id from the mirror pod's status, name its pod UID.
            record: 'cgroup:quota_kube_names:info',
            expr: |||
              (
                group by (%(join)s, container_id) (quota_cpu_usage_seconds_total{%(sel)s, container_id!=""})
                  * on(%(ksmPrefix)scontainer_id) group_left(namespace, pod, container)
                max by (%(ksmPrefix)scontainer_id, namespace, pod, container) (kube_pod_container_info{%(ksm)s, container_id!=""})
              )
              or on(%(join)s)
              (
                group by (%(join)s, pod_uid) (
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
              or on(%(join)s)
              group by (%(join)s) (
                quota_cpu_usage_seconds_total{%(sel)s} or quota_memory_working_set_bytes{%(sel)s} or quota_memory_oom_kills_total{%(sel)s}
              )
            ||| % { join: join, sel: sel, ksm: ksm, ksmPrefix: ksmPrefix },
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
