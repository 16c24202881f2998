// One alert per problem. Which cgroup an alert names is decided once, by the scope recording
// rule (cgroup:quota_scope:info in rules/rules.libsonnet): containers, other cgroups, a pod slice
// where the pod alone holds the limits; never a sandbox or a node-level slice. A description is
// one sentence with the alert's value; the mechanism and the fix are in docs/runbooks.md, which
// every alert links (runbook_url, added to all of them at the end of this file).
local utils = import '../lib/utils.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local sel = c.quotaExporterSelector,
    local on = 'on(%s)' % utils.labels(c.cgroupJoinLabels),
    // The cgroups alerts may name (and a sandbox never pages on its own).
    local inScope = 'and %s cgroup:quota_scope:info{scope!="sandbox"}' % on,
    // OOM kills are counted once, at the killed process's cgroup (v1, v2 memory.events.local):
    // a container's kill is its own even where its pod holds the limits (the container has no
    // scope then), and a pod slice or a node-level slice counts none of its containers'.
    local oomKills = 'cgroup:quota_memory_oom_kills:increase' + c.oomKilledWindow,
    local killedInScope = |||
      and %(on)s (cgroup:quota_scope:info{scope!="sandbox"} or %(kills)s{container_id!=""})
      unless %(on)s cgroup:quota_scope:info{scope="sandbox"}
    ||| % { on: on, kills: oomKills },
    // kube-state-metrics mode: the Kubernetes names joined from it (every cgroup has a series).
    local named(expr) =
      if c.kubeNamesSource == 'kube-state-metrics' then
        '(\n%s) * %s group_left(namespace, pod, container) cgroup:quota_kube_names:info\n' % [expr, on]
      else expr,

    local alert(name, severity, expr, forDuration, summary, description) = {
      alert: name,
      expr: expr,
      labels: { severity: severity },
      annotations: { summary: summary, description: description },
    } + (if forDuration != null then { 'for': forDuration } else {}),
    local cgroupAlert(name, severity, expr, forDuration, summary, description) =
      alert(name, severity, named(expr), forDuration, summary, description),

    // The workload and what it is: a container of a pod, a pod (the pod slice, where the pod alone
    // holds the limits), or a cgroup by its path (no Kubernetes names). A sandbox never alerts.
    local where = '{{ with $labels.container }}container {{ . }} of {{ end }}{{ with $labels.pod }}pod {{ $labels.namespace }}/{{ . }}'
                  + '{{ else }}cgroup {{ $labels.cgroup }}{{ end }} on {{ $labels.instance }}',
    // The one number a runtime alert's cause needs that its value cannot carry: the CPU limit, in
    // the only template query of the mixin (run while the alert fires).
    local limitCores =
      local m = utils.labelMatchers(c.cgroupJoinLabels);
      '{{ with printf `cgroup:quota_cpu_limit_cores:binding{%s}` %s | query }}{{ . | first | value | printf "%%.2g" }}{{ end }}'
      % [m.fmt, m.args],
    // A string the watched process chose (its executable name): the exporter has already capped it
    // and replaced control characters; here every character that chat receivers read as markup or
    // a mention (Slack's <!channel>, Markdown) becomes "?" (docs/security.md).
    local process = '{{ $labels.process | reReplaceAll "[^A-Za-z0-9 ._:/+=@()-]" "?" }}',
    local creepDeriv = 'cgroup:quota_memory_working_set_bytes:deriv' + c.memoryCreepLookback,

    groups+: [
      {
        name: 'quota-exporter-cpu',
        rules: [
          cgroupAlert(
            'QuotaCPUThrottlingDuringWarmup',
            c.severities.warmup,
            'cgroup:quota_cpu_warmup_throttled_periods:ratio_rate5m\n',
            c.warmupFor,
            'A process is throttled by its CPU limit while it warms up.',
            where + ' was throttled in {{ $value | humanizePercentage }} of its CFS periods while its main process warmed up.'
          ),
          cgroupAlert(
            'QuotaCPUStalls',
            c.severities.stalls,
            // A service that freezes in bursts: not one CPU-bound at its limit, not one whose
            // throttling another alert explains.
            |||
              cgroup:quota_cpu_frozen_windows:increase10m >= %(frozen)g
              unless %(on)s cgroup:quota_cpu_at_limit:ratio_rate5m
              unless %(on)s cgroup:quota_cpu_throttling_explained:info
              %(inScope)s
            ||| % { frozen: c.frozenSecondsPer10m, on: on, inScope: inScope },
            c.stallsFor,
            'A cgroup is frozen by CPU throttling for seconds at a time.',
            where + ' was frozen by its CPU limit in {{ $value | printf "%.0f" }} one-second windows of the last 10 minutes.'
          ),
          cgroupAlert(
            'QuotaCPUAtLimit',
            c.severities.cpuAtLimit,
            // CPU-bound by design (a batch job) or saturated: not a page by default; none for the
            // workloads batchWorkloadSelector picks.
            'cgroup:quota_cpu_at_limit:ratio_rate5m\n'
            + (if c.batchWorkloadSelector != '' then
                 'unless %s cgroup:quota_cpu_limit_cores:binding{%s}\n' % [on, c.batchWorkloadSelector]
               else '')
            + 'unless %s cgroup:quota_cpu_throttling_explained:info\n%s\n' % [on, inScope],
            c.cpuAtLimitFor,
            'A workload runs at its CPU limit.',
            where + ' used {{ $value | humanizePercentage }} of its CPU limit for ' + c.cpuAtLimitFor + ', throttled in nearly every period.'
          ),
          cgroupAlert(
            'QuotaHighSystemCPUUnderQuota',
            c.severities.systemCPU,
            |||
              cgroup:quota_cpu_usage_system:ratio_rate5m > %(share)g
              and %(on)s cgroup:quota_cpu_usage_seconds:rate2m > %(minCores)g
              and %(on)s cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m > %(throttled)g
              %(inScope)s
            ||| % {
              share: c.systemCPUShare,
              on: on,
              minCores: c.systemCPUMinCores,
              throttled: c.systemCPUThrottledPeriodsRatio,
              inScope: inScope,
            },
            c.systemCPUFor,
            'Kernel time dominates the CPU use of a throttled cgroup.',
            'System (kernel) time is {{ $value | humanizePercentage }} of the CPU time of ' + where + ', which is throttled.'
          ),
        ],
      },
      {
        name: 'quota-exporter-runtime',
        // Each runtime setting twice: a warning while its cgroup is throttled, info otherwise.
        local runtime(name, parallelism, threshold, ratio, summary, description) = [
          cgroupAlert(
            name,
            severity,
            '%s{%s} > %g\nand %s > %g\n%s %s cgroup:quota_cpu_throttled:info\n' % [
              parallelism,
              sel,
              threshold,
              ratio,
              if parallelism == 'quota_go_gomaxprocs' then c.goMaxProcsPerLimitCore else c.gcThreadsPerLimitCore,
              if severity == 'info' then 'unless' else 'and',
              on,
            ],
            if parallelism == 'quota_go_gomaxprocs' then c.goMaxProcsFor else c.gcThreadsFor,
            summary,
            description + (if severity == 'info' then ', not throttled yet.' else ', which is throttled.')
          )
          for severity in [if parallelism == 'quota_go_gomaxprocs' then c.severities.goMaxProcs else c.severities.gcThreads, 'info']
        ],
        rules: runtime(
          'QuotaJVMGCThreadsExceedCPULimit',
          'quota_jvm_gc_parallel_threads',
          1,
          'process:quota_jvm_gc_parallel_threads_over_cpu_limit:ratio',
          'A JVM runs far more parallel GC threads than its CPU limit.',
          '{{ $value | printf "%.0f" }} parallel GC threads against a ' + limitCores + '-core CPU limit in JVM '
          + process + ' of ' + where
        ) + runtime(
          'QuotaGoMaxProcsExceedsCPULimit',
          'quota_go_gomaxprocs',
          2,
          'process:quota_go_gomaxprocs_over_cpu_limit:ratio',
          'A Go program runs with GOMAXPROCS far above its CPU limit.',
          'GOMAXPROCS={{ $value | printf "%.0f" }} against a ' + limitCores + '-core CPU limit in Go program '
          + process + ' of ' + where
        ) + [
          // Measured pauses (--collector.gopause), one alert per container: the worst process.
          cgroupAlert(
            'QuotaGoSTWInflation',
            c.severities.goSTW,
            |||
              max without (process, runtime) (
                process:quota_go_stw_pause_seconds:p99_10m > %(p99)g and process:quota_go_gomaxprocs_over_cpu_limit:ratio > 1
                or
                process:quota_go_stw_pause_seconds:p99_10m > %(p99)g and %(on)s cgroup:quota_cpu_throttled:info
              )
            ||| % { p99: c.goSTWPauseP99Seconds, on: on },
            c.goSTWFor,
            'Go stop-the-world pauses are inflated by the CPU limit.',
            'The p99 Go stop-the-world pause in ' + where + ' was {{ $value | humanizeDuration }} over 10 minutes.'
          ),
          cgroupAlert(
            'QuotaJVMSafepointInflation',
            c.severities.safepoint,
            // Absolute: time in safepoints, time reaching them, or the mean time-to-safepoint,
            // while throttled. No baseline, so a JVM misconfigured since deploy fires too.
            |||
              process:quota_jvm_safepoint_seconds:rate5m
              and (
                process:quota_jvm_safepoint_seconds:rate5m > %(sp)g
                or process:quota_jvm_safepoint_sync_seconds:rate5m > %(sync)g
                or process:quota_jvm_safepoint_sync_seconds:mean5m > %(mean)g
              )
              and %(on)s cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m > %(throttled)g
            ||| % {
              sp: c.safepointSecondsPerSecond,
              sync: c.safepointSyncSecondsPerSecond,
              mean: c.safepointSyncSecondsMean,
              on: on,
              throttled: c.safepointThrottledPeriodsRatio,
            },
            c.safepointFor,
            'JVM stop-the-world pauses are inflated while the cgroup is throttled.',
            'JVM ' + process + ' of ' + where + ' spends {{ $value | humanizePercentage }} of wall time at safepoints while throttled.'
          ),
        ],
      },
      {
        name: 'quota-exporter-memory',
        rules: [
          cgroupAlert(
            'QuotaMemoryCreep',
            c.severities.memoryCreep,
            // Seconds until the whole cgroup's working set (all its processes) reaches its limit
            // at its trend; only for cgroups that existed a third of the lookback ago.
            |||
              (cgroup:quota_memory_limit_bytes:binding - quota_memory_working_set_bytes{%(sel)s})
                / (%(deriv)s > 0) < %(horizon)d
              and %(on)s quota_memory_working_set_bytes{%(sel)s} offset %(minAge)ds
              unless %(on)s cgroup:quota_memory_heap_fill_fits:info
              %(inScope)s
            ||| % {
              sel: sel,
              deriv: creepDeriv,
              horizon: utils.seconds(c.memoryCreepHorizon),
              on: on,
              minAge: utils.seconds(c.memoryCreepLookback) / 3,
              inScope: inScope,
            },
            c.memoryCreepFor,
            "A cgroup's memory is creeping towards its limit.",
            'The working set of ' + where + ' reaches its memory limit in about {{ $value | humanizeDuration }} at its '
            + c.memoryCreepLookback + ' trend.'
          ),
          cgroupAlert(
            'QuotaMallocArenaBloat',
            c.severities.arenaBloat,
            // glibc allows 8 arenas per host CPU whatever the CPU limit.
            |||
              quota_process_malloc_arenas{%(sel)s} > process:quota_process_malloc_arenas:allowed
              and quota_process_malloc_arenas{%(sel)s} > 2
              and process:quota_process_malloc_heap_resident_bytes:ratio > %(share)g
            ||| % { sel: sel, share: c.mallocArenaResidentShare },
            c.arenaBloatFor,
            "glibc malloc arenas hold a large share of a process's memory.",
            '{{ $value | printf "%.0f" }} glibc malloc arenas in ' + process + ' of ' + where + ' hold more than '
            + ('%g' % (c.mallocArenaResidentShare * 100)) + '% of its RSS.'
          ),
          cgroupAlert(
            'QuotaMemoryNearLimit',
            c.severities.memoryNearLimit,
            'cgroup:quota_memory_working_set_over_limit:ratio > %g\n%s\n' % [c.memoryNearLimitRatio, inScope],
            c.memoryNearLimitFor,
            "A cgroup's working set is close to its memory limit.",
            'The working set of ' + where + ' is {{ $value | humanizePercentage }} of its memory limit.'
          ),
          cgroupAlert(
            'QuotaContainerOOMKilled',
            c.severities.oomKilled,
            '%s\n%s' % [oomKills, killedInScope],
            null,
            'The OOM killer ended a process in a container.',
            '{{ $value | printf "%.0f" }} process(es) in ' + where + ' were killed by the OOM killer in the last '
            + c.oomKilledWindow + '.'
          ),
        ],
      },
      {
        name: 'quota-exporter-self',
        // QuotaExporterMissing looks back exporterSeenWindow: once a minute is enough.
        interval: c.slowRulesInterval,
        rules: [
          alert(
            'QuotaExporterDown',
            c.severities.exporterDown,
            'up{%(sel)s} == 0\n' % { sel: sel },
            c.exporterDownFor,
            'quota_exporter cannot be scraped.',
            'Prometheus could not scrape quota_exporter on {{ $labels.instance }} (job {{ $labels.job }}) for '
            + c.exporterDownFor + '.'
          ),
          alert(
            'QuotaExporterMissing',
            c.severities.exporterMissing,
            if c.exporterMissingUsesKubeStateMetrics then |||
              group by (%(cl)snode) (kube_node_info{%(ksm)s})
                unless on(%(cl)snode)
              group by (%(cl)snode) (label_replace(up{%(sel)s}, "node", "$1", "instance", "([^:]+).*"))
            ||| % { cl: if c.clusterLabels == [] then '' else utils.labels(c.clusterLabels) + ', ', ksm: c.kubeStateMetricsSelector, sel: sel } else
              local by = utils.labels(c.clusterLabels + ['job', 'instance']);
              local gone = |||
                group by (%(by)s) (max_over_time(up{%(sel)s}[%(seen)s]))
                  unless
                group by (%(by)s) (up{%(sel)s})
              ||| % { by: by, sel: sel, seen: c.exporterSeenWindow };
              // The node name: a label's value without a port.
              local nodeOf(expr, label) = 'label_replace(%s, "node", "$1", "%s", "([^:]+).*")' % [expr, label];
              local onNode = utils.labels(c.clusterLabels + ['node']);
              if c.exporterMissingNodePresence == [] then gone else
                'group by (%s) (\n  %s\n    and on(%s)\n  (\n%s\n  )\n)\n' % [
                  by,
                  std.strReplace(nodeOf('(\n' + gone + ')', 'instance'), '\n', '\n  '),
                  onNode,
                  std.join('\n      or\n', [
                    '    group by (%s) (%s)' % [onNode, nodeOf(p.selector, p.nodeLabel)]
                    for p in c.exporterMissingNodePresence
                  ]),
                ],
            c.exporterMissingFor,
            'A node has no quota_exporter target.',
            'No quota_exporter target for {{ with $labels.node }}node {{ . }}{{ else }}{{ $labels.instance }} (job {{ $labels.job }}){{ end }}.'
          ),
          alert(
            'QuotaExporterCollectorFailed',
            c.severities.collectorFailed,
            'quota_exporter_scrape_collector_success{%(sel)s} == 0\n' % { sel: sel },
            c.collectorFailedFor,
            'A quota_exporter collector fails on every scrape.',
            'Collector {{ $labels.collector }} of quota_exporter on {{ $labels.instance }} failed in every scrape for '
            + c.collectorFailedFor + '.'
          ),
        ],
      },
    ],
  },
} + {
  // Every alert links its runbook section (kubernetes-mixin's add-runbook-links, one mapping over
  // all groups): runbook_url = runbookURLPattern % the alert name, lowercased.
  prometheusAlerts+:: {
    groups: [
      group {
        rules: [
          rule { annotations+: { runbook_url: $._config.runbookURLPattern % std.asciiLower(rule.alert) } }
          for rule in super.rules
        ],
      }
      for group in super.groups
    ],
  },
}
