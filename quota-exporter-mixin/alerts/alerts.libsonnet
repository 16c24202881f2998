// One alert per problem, at one level: the container (its numbers are those of the limit that
// binds it, its own or its pod's), the pod slice only when none of its containers raises the same
// alert, other cgroups (systemd services, Docker, bare cgroups), never the kubelet's node-level
// slices. A description names the workload and its numbers in a sentence or two; the mechanism
// and the fix are in docs/runbooks.md, which every alert links (runbook_url).
local utils = import '../lib/utils.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local sel = c.quotaExporterSelector,
    local on = 'on(%s)' % utils.labels(c.cgroupJoinLabels),
    local node = c.nodeSliceMatcher,

    // In kube-state-metrics mode the names come from a join; otherwise the series carry them.
    local named(expr) =
      if c.kubeNamesSource == 'kube-state-metrics' then
        '(\n%s) * %s group_left(namespace, pod, container) cgroup:quota_kube_names:info\nor %s\n(\n%s)\n'
        % [expr, on, on, expr]
      else expr,

    local alert(name, severity, expr, forDuration, summary, description) = {
      alert: name,
      expr: named(expr),
      labels: { severity: severity },
      annotations: {
        summary: summary,
        description: description,
        runbook_url: c.runbookURLPattern % std.asciiLower(name),
      },
    } + (if forDuration != null then { 'for': forDuration } else {}),

    // The scope, decided once. f(m) is a per-cgroup condition whose selectors take the matchers
    // m. Every cgroup but the node-level slices, except a pod slice when one of its containers
    // meets the condition too: the container's alert says it (a container's key, with its
    // container_id emptied, is its pod slice's).
    local indent(expr) = '  ' + std.strReplace(std.rstripChars(expr, '\n'), '\n', '\n  '),
    local scoped(f) = |||
      (
      %(all)s
      )
        unless on(%(pod)s, container_id)
      label_replace(
      %(containers)s,
        "container_id", "", "container_id", ".*"
      )
    ||| % {
      all: indent(f(node)),
      pod: utils.labels(c.podJoinLabels),
      containers: indent(f('container_id!="", pod_uid!=""')),
    },

    // The one number of a description that its expression cannot carry: a template query for
    // expr, whose {%s} the alert's cgroup (or process) label matchers fill.
    local cgroupMatchers = utils.labelMatchers(c.cgroupJoinLabels),
    local processMatchers = utils.labelMatchers(c.processJoinLabels),
    local query(expr, matchers) = 'printf `%s` %s | query' % [expr % matchers.fmt, matchers.args],
    // Its first value, formatted; nothing when the query returns none.
    local lookup(expr, matchers, format) =
      '{{ with %s }}{{ . | first | value | %s }}{{ end }}' % [query(expr, matchers), format],
    local limitCores = lookup('cgroup:quota_cpu_limit_cores:binding{%s}', cgroupMatchers, 'printf "%.2g"'),
    local throttledShare = lookup('cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m{%s}', cgroupMatchers, 'humanizePercentage'),

    // A string the watched process chose (its executable name, its Go version): the exporter has
    // already capped it and replaced control characters; here every character that chat receivers
    // read as markup or a mention (Slack's <!channel>, Markdown) becomes "?" (docs/security.md).
    local tenant(v) = '{{ %s | reReplaceAll "[^A-Za-z0-9 ._:/+=@()-]" "?" }}' % v,
    // The workload: Kubernetes names when the exporter (or kube-state-metrics) resolved them,
    // the cgroup path otherwise.
    local where = '{{ with $labels.container }}container {{ . }} of {{ end }}{{ with $labels.pod }}pod {{ $labels.namespace }}/{{ . }}'
                  + '{{ else }}cgroup {{ $labels.cgroup }}{{ end }} on {{ $labels.instance }}',

    // CPU-bound at its limit (a batch job, a saturated worker): it uses its limit and is throttled
    // in nearly every period, not frozen by bursts. Value: the share of the limit used.
    local cpuBound(m) =
      'cgroup:quota_cpu_usage_over_limit:ratio_rate5m{%s} >= %g\n  and %s cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m >= %g'
      % [m, c.cpuBoundUsageRatio, on, c.cpuBoundThrottledPeriodsRatio],
    // Throttling that another alert explains: a runtime's parallelism or a JVM's warm-up.
    local unexplained = 'unless %s cgroup:quota_cpu_throttling_explained:info' % on,
    // A runtime's parallelism is to blame when its cgroup (or the one whose limit binds) is throttled.
    local throttled = |||
      (
        cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m > %(ratio)g
        or
        cgroup:quota_cpu_binding_frozen_windows:increase10m >= %(frozen)g
      )
    ||| % { ratio: c.throttledPeriodsRatioForCause, frozen: c.frozenSecondsForCause },
    local gcThreads = |||
      quota_jvm_gc_parallel_threads{%(sel)s, %(node)s} > 1
      and
      process:quota_jvm_gc_parallel_threads_over_cpu_limit:ratio > %(factor)g
    ||| % { sel: sel, node: node, factor: c.gcThreadsPerLimitCore },
    local gcThreadsDescription(state) =
      '{{ $value | printf "%.0f" }} parallel GC threads against a ' + limitCores + '-core CPU limit in JVM '
      + tenant('$labels.process') + ' of ' + where + state,
    local gomaxprocs = |||
      quota_go_gomaxprocs{%(sel)s, %(node)s} > 2
      and
      process:quota_go_gomaxprocs_over_cpu_limit:ratio > %(factor)g
    ||| % { sel: sel, node: node, factor: c.goMaxProcsPerLimitCore },
    // One query for the limit and the binary: quota_go_info's labels, the limit as its value.
    local gomaxprocsDescription(state) =
      'GOMAXPROCS={{ $value | printf "%.0f" }} in Go program ' + tenant('$labels.process') + ' of ' + where
      + ('{{ with %s }}{{ with first . }} against a {{ .Value | printf "%%.2g" }}-core CPU limit; its binary (' % query(
           'quota_go_info{%s} * on(' + utils.labels(c.cgroupJoinLabels) + ') group_left() cgroup:quota_cpu_limit_cores:binding',
           processMatchers
         ))
      + tenant('.Labels.version') + ') {{ if eq .Labels.container_aware "true" }}is container-aware, so something overrides it'
      + '{{ else }}is not container-aware{{ end }}{{ end }}{{ end }}' + state,
    local creepDeriv = 'cgroup:quota_memory_working_set_bytes:deriv' + c.memoryCreepLookback,
    local oomWindow = c.oomKilledWindow,

    groups+: [
      {
        name: 'quota-exporter-cpu',
        rules: [
          alert(
            'QuotaCPUThrottlingDuringWarmup',
            c.severities.warmup,
            scoped(function(m) 'cgroup:quota_cpu_warmup_throttled_periods:ratio_rate5m{%s}' % m),
            c.warmupFor,
            'A process is throttled by its CPU limit while it warms up.',
            where + ' was throttled in {{ $value | humanizePercentage }} of its CFS periods over 5 minutes while '
            + ('{{ with %s }}{{ with first . }}its main process ' % query('time() - cgroup:quota_process_start_time_seconds:top_cpu{%s}', cgroupMatchers))
            + tenant('.Labels.process') + ' ({{ .Labels.runtime }}, started {{ .Value | humanizeDuration }} ago){{ end }}{{ else }}it{{ end }}'
            + ' warmed up.'
          ),
          alert(
            'QuotaCPUStalls',
            c.severities.stalls,
            // A service that freezes in bursts, not a cgroup CPU-bound at its limit.
            scoped(function(m) |||
              cgroup:quota_cpu_frozen_windows:increase10m{%(m)s} >= %(frozen)g
                unless %(on)s (%(bound)s)
                %(unexplained)s
            ||| % { m: m, frozen: c.frozenSecondsPer10m, on: on, bound: std.strReplace(cpuBound(m), '\n', '\n  '), unexplained: unexplained }),
            c.stallsFor,
            'A cgroup is frozen by CPU throttling for seconds at a time.',
            where + ' was frozen by its CPU limit in {{ $value | printf "%.0f" }} one-second windows of the last 10 minutes, '
            + 'while its 5-minute average shows ' + throttledShare + ' of periods throttled.'
          ),
          alert(
            'QuotaCPUAtLimit',
            c.severities.cpuAtLimit,
            // CPU-bound by design (a batch job) or saturated: not a page by default; none for the
            // workloads batchWorkloadSelector picks.
            scoped(function(m) cpuBound(m) + '\n'
                               + (if c.batchWorkloadSelector != '' then
                                    '  unless %s cgroup:quota_cpu_limit_cores:binding{%s}\n' % [on, c.batchWorkloadSelector]
                                  else '')
                               + '  ' + unexplained + '\n'),
            c.cpuAtLimitFor,
            'A workload runs at its CPU limit.',
            where + ' used {{ $value | humanizePercentage }} of its ' + limitCores + '-core CPU limit for '
            + c.cpuAtLimitFor + ': it is CPU-bound and throttled in nearly every period.'
          ),
          alert(
            'QuotaHighSystemCPUUnderQuota',
            c.severities.systemCPU,
            scoped(function(m) |||
              (
                cgroup_mode:quota_cpu_usage_seconds:rate5m{mode="system", %(m)s}
                  / ignoring(mode)
                cgroup:quota_cpu_usage_seconds:rate5m{%(m)s}
              ) > %(share)g
              and %(on)s cgroup:quota_cpu_usage_seconds:rate2m > %(minCores)g
              and %(on)s cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m > %(throttled)g
            ||| % {
              m: m,
              minCores: c.systemCPUMinCores,
              share: c.systemCPUShare,
              on: on,
              throttled: c.systemCPUThrottledPeriodsRatio,
            }),
            c.systemCPUFor,
            'Kernel time dominates the CPU use of a throttled cgroup.',
            'System (kernel) time is {{ $value | humanizePercentage }} of the CPU time of ' + where
            + ', which is throttled in ' + throttledShare + ' of its CFS periods.'
          ),
        ],
      },
      {
        name: 'quota-exporter-runtime',
        rules: [
          alert(
            'QuotaJVMGCThreadsExceedCPULimit',
            c.severities.gcThreads,
            '%s and %s\n%s' % [gcThreads, on, throttled],
            c.gcThreadsFor,
            'A JVM runs far more parallel GC threads than its CPU limit.',
            gcThreadsDescription(', which is throttled: each collection freezes the whole JVM for the rest of the period.')
          ),
          // The same setting in a JVM that is not throttled yet (a small live set): for the record.
          alert(
            'QuotaJVMGCThreadsExceedCPULimit',
            'info',
            '%s unless %s\n%s' % [gcThreads, on, throttled],
            c.gcThreadsFor,
            'A JVM runs far more parallel GC threads than its CPU limit.',
            gcThreadsDescription(', not throttled yet: a larger live set or more load turns its collections into stalls.')
          ),
          alert(
            'QuotaGoMaxProcsExceedsCPULimit',
            c.severities.goMaxProcs,
            '%s and %s\n%s' % [gomaxprocs, on, throttled],
            c.goMaxProcsFor,
            'A Go program runs with GOMAXPROCS far above its CPU limit.',
            gomaxprocsDescription('. It is throttled, which stretches its GC pauses.')
          ),
          // The same setting in a program that is not throttled (an idle sidecar): for the record.
          alert(
            'QuotaGoMaxProcsExceedsCPULimit',
            'info',
            '%s unless %s\n%s' % [gomaxprocs, on, throttled],
            c.goMaxProcsFor,
            'A Go program runs with GOMAXPROCS far above its CPU limit.',
            gomaxprocsDescription('. It is not throttled now; the first burst will stall it.')
          ),
          // Measured pauses (--collector.gopause), one alert per container: the worst process.
          alert(
            'QuotaGoSTWInflation',
            c.severities.goSTW,
            |||
              max without (process, runtime) (
                process:quota_go_stw_pause_seconds:p99_10m{%(node)s} > %(p99)g
                  and process:quota_go_gomaxprocs_over_cpu_limit:ratio > 1
                or
                process:quota_go_stw_pause_seconds:p99_10m{%(node)s} > %(p99)g
                  and %(on)s %(throttled)s
              )
            ||| % { node: node, p99: c.goSTWPauseP99Seconds, on: on, throttled: std.strReplace(std.rstripChars(throttled, '\n'), '\n', '\n    ') },
            c.goSTWFor,
            'Go stop-the-world pauses are inflated by the CPU limit.',
            'The p99 Go stop-the-world pause in ' + where + ' was {{ $value | humanizeDuration }} over 10 minutes, with '
            + 'GOMAXPROCS at ' + lookup('max(process:quota_go_gomaxprocs_over_cpu_limit:ratio{%s})', cgroupMatchers, 'printf "%.2g"')
            + ' times its CPU limit.'
          ),
          alert(
            'QuotaJVMSafepointInflation',
            c.severities.safepoint,
            // Absolute: time in safepoints, time reaching them, or the mean time-to-safepoint,
            // while throttled. No baseline, so a JVM misconfigured since deploy fires too.
            |||
              process:quota_jvm_safepoint_seconds:rate5m{%(node)s}
              and (
                process:quota_jvm_safepoint_seconds:rate5m > %(sp)g
                or
                process:quota_jvm_safepoint_sync_seconds:rate5m > %(sync)g
                or
                process:quota_jvm_safepoint_sync_seconds:mean5m > %(mean)g
              )
              and %(on)s cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m > %(throttled)g
            ||| % {
              node: node,
              sp: c.safepointSecondsPerSecond,
              sync: c.safepointSyncSecondsPerSecond,
              mean: c.safepointSyncSecondsMean,
              on: on,
              throttled: c.safepointThrottledPeriodsRatio,
            },
            c.safepointFor,
            'JVM stop-the-world pauses are inflated while the cgroup is throttled.',
            'JVM ' + tenant('$labels.process') + ' of ' + where + ' spends {{ $value | humanizePercentage }} of wall time '
            + 'at safepoints, each taking ' + lookup('process:quota_jvm_safepoint_sync_seconds:mean5m{%s}', processMatchers, 'humanizeDuration')
            + ' on average to reach, while throttled.'
          ),
        ],
      },
      {
        name: 'quota-exporter-memory',
        rules: [
          alert(
            'QuotaMemoryCreep',
            c.severities.memoryCreep,
            // The whole cgroup's working set (all its processes), seconds until its trend
            // reaches the limit; only for cgroups that existed a third of the lookback ago.
            scoped(function(m) |||
              (
                (cgroup:quota_memory_limit_bytes:binding{%(m)s} - quota_memory_working_set_bytes{%(sel)s, %(m)s})
                  /
                (%(deriv)s{%(m)s} > 0)
              ) < %(horizon)d
              and %(on)s (quota_memory_working_set_bytes{%(sel)s, %(m)s} offset %(minAge)ds)
              unless %(on)s cgroup:quota_memory_heap_fill_fits:info
            ||| % {
              m: m,
              sel: sel,
              deriv: creepDeriv,
              horizon: utils.seconds(c.memoryCreepHorizon),
              on: on,
              minAge: utils.seconds(c.memoryCreepLookback) / 3,
            }),
            c.memoryCreepFor,
            "A cgroup's memory is creeping towards its limit.",
            'The working set of ' + where + ' grows '
            + lookup(creepDeriv + '{%s} * 3600', cgroupMatchers, 'humanize1024') + 'B per hour (' + c.memoryCreepLookback
            + ' trend) and reaches its memory limit in about {{ $value | humanizeDuration }}.'
          ),
          alert(
            'QuotaMallocArenaBloat',
            c.severities.arenaBloat,
            // glibc allows 8 arenas per host CPU whatever the CPU limit: judged against the limit
            // where there is one, against a fixed count where there is none.
            |||
              (
                quota_process_malloc_arenas{%(sel)s, %(node)s}
                  > %(on)s group_left()
                (%(perCore)g * cgroup:quota_cpu_limit_cores:binding)
                or
                (
                  quota_process_malloc_arenas{%(sel)s, %(node)s} > %(noLimit)g
                  unless %(on)s
                  cgroup:quota_cpu_limit_cores:binding
                )
              )
              and
              quota_process_malloc_arenas{%(sel)s} > 2
              and
              process:quota_process_malloc_heap_resident_bytes:ratio > %(share)g
            ||| % {
              sel: sel,
              node: node,
              on: on,
              perCore: c.mallocArenasPerLimitCore,
              noLimit: c.mallocArenasWithoutLimit,
              share: c.mallocArenaResidentShare,
            },
            c.arenaBloatFor,
            "glibc malloc arenas hold a large share of a process's memory.",
            '{{ $value | printf "%.0f" }} glibc malloc arenas in ' + tenant('$labels.process') + ' of ' + where + ' hold '
            + lookup('process:quota_process_malloc_heap_resident_bytes:ratio{%s}', processMatchers, 'humanizePercentage')
            + ' of its RSS.'
          ),
          alert(
            'QuotaMemoryNearLimit',
            c.severities.memoryNearLimit,
            scoped(function(m) |||
              quota_memory_working_set_bytes{%(sel)s, %(m)s}
                /
              cgroup:quota_memory_limit_bytes:binding{%(m)s}
              > %(ratio)g
            ||| % { sel: sel, m: m, ratio: c.memoryNearLimitRatio }),
            c.memoryNearLimitFor,
            "A cgroup's working set is close to its memory limit.",
            'The working set of ' + where + ' is {{ $value | humanizePercentage }} of its '
            + lookup('cgroup:quota_memory_limit_bytes:binding{%s}', cgroupMatchers, 'humanize1024') + 'B memory limit.'
          ),
          alert(
            'QuotaContainerOOMKilled',
            c.severities.oomKilled,
            // A restarted container's old cgroup is gone before the next scrape: the exporter keeps
            // its kill counter (issue 10), which may first be seen already above zero.
            scoped(function(m) |||
              increase(quota_memory_oom_kills_total{%(sel)s, %(m)s}[%(window)s]) > 0
              or
              (
                quota_memory_oom_kills_total{%(sel)s, %(m)s} > 0
                unless
                quota_memory_oom_kills_total{%(sel)s, %(m)s} offset %(window)s
              )
            ||| % { sel: sel, m: m, window: oomWindow }),
            null,
            'The OOM killer ended a process in a container.',
            '{{ $value | printf "%.0f" }} process(es) in ' + where + ' were killed by the OOM killer in the last '
            + oomWindow + '.'
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
            + c.exporterDownFor + ': the throttling, runtime and memory alerts of that host are blind.'
          ),
          {
            alert: 'QuotaExporterMissing',
            expr: if c.exporterMissingUsesKubeStateMetrics then |||
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
            'for': c.exporterMissingFor,
            labels: { severity: c.severities.exporterMissing },
            annotations: {
              summary: 'A node has no quota_exporter target.',
              description: 'No quota_exporter target for {{ if $labels.node }}node {{ $labels.node }}{{ else }}'
                           + '{{ $labels.instance }} (job {{ $labels.job }}), scraped within the last '
                           + c.exporterSeenWindow + '{{ end }}: that node has no throttling, runtime or memory alerts.',
              runbook_url: c.runbookURLPattern % 'quotaexportermissing',
            },
          },
          alert(
            'QuotaExporterCollectorFailed',
            c.severities.collectorFailed,
            'quota_exporter_scrape_collector_success{%(sel)s} == 0\n' % { sel: sel },
            c.collectorFailedFor,
            'A quota_exporter collector fails on every scrape.',
            'Collector "{{ $labels.collector }}" of quota_exporter on {{ $labels.instance }} failed in every scrape for '
            + c.collectorFailedFor + '; its series may be missing or incomplete.'
            + ('{{ with %s }}{{ with first . }} Most read errors: {{ .Labels.reason }} ({{ .Value | printf "%%.0f" }}).{{ end }}{{ end }}'
               % query('topk(1, sum by (reason) (increase(quota_exporter_read_errors_total{%s}[' + c.collectorFailedFor + '])))',
                       utils.labelMatchers(c.clusterLabels + ['job', 'instance', 'collector'])))
          ),
        ],
      },
    ],
  },
}
