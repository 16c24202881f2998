// Alerts that name the cause and the fix, once per problem: at the container when its own
// limit binds, at the pod when only the pod's does, never at /kubepods.slice or a QoS slice.
// Descriptions look up at most 3 numbers with template queries built from the alert's labels;
// the recording rules carry what they need.
local utils = import '../lib/utils.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local sel = c.quotaExporterSelector,
    local join = utils.labels(c.cgroupJoinLabels),
    local on = 'on(%s)' % join,
    local warmup = utils.seconds(c.warmupWindow),
    local node = c.nodeSliceMatcher,

    // Matchers that select the alert's cgroup (@CG), process (@PR) or collector (@CO) inside a template query.
    local matchers = {
      CG: utils.labelMatchers(c.cgroupJoinLabels),
      PR: utils.labelMatchers(c.processJoinLabels),
      CO: utils.labelMatchers(c.clusterLabels + ['job', 'instance', 'collector']),
    },
    // A printf pipeline that rebuilds expr, with every @CG / @PR replaced by the alert's matchers.
    local printfQuery(expr) =
      local parts = std.split(expr, '@');
      local rest = parts[1:];
      local fmt = parts[0] + std.join('', [matchers[std.substr(p, 0, 2)].fmt + std.substr(p, 2, std.length(p)) for p in rest]);
      local args = std.join(' ', [matchers[std.substr(p, 0, 2)].args for p in rest]);
      'printf `%s` %s | query' % [fmt, args],
    // q(expr, fmt): the first value of expr, formatted; "?" when the query returns nothing.
    local q(expr, fmt) =
      '{{ with %s }}{{ . | first | value | %s }}{{ else }}?{{ end }}' % [printfQuery(expr), fmt],
    // qIf(expr, text, else): text (which may use $v, the first value) only when expr returns something.
    local qIf(expr, text, otherwise='') =
      '{{ with %s }}{{ $v := . | first | value }}%s{{ else }}%s{{ end }}' % [printfQuery(expr), text, otherwise],

    // A string the watched process chose (its executable name, its Go version): the exporter has
    // already capped it and replaced control characters; here every character that chat receivers
    // read as markup or a mention (Slack's <!channel>, Markdown) becomes "?" (docs/security.md).
    local tenant(v) = '{{ %s | reReplaceAll "[^A-Za-z0-9 ._:/+=@()-]" "?" }}' % v,

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

    // One alert per problem. f(m) is a cgroup-level condition whose primary selectors take the
    // extra matchers m. Containers first; a pod slice only when none of its containers matches
    // (its own limit binds); other cgroups (systemd services, Docker, bare cgroups) unless they
    // are the kubelet's node-level slices.
    local oneLevel(f) =
      local podOn = 'on(%s)' % utils.labels(c.podJoinLabels);
      |||
        (
        %(container)s)
        or
        (
        %(pod)s)
          unless %(podOn)s
        (
        %(container)s)
        or
        (
        %(other)s)
      ||| % {
        container: f('container_id!=""'),
        pod: f('container_id="", pod_uid!=""'),
        other: f('pod_uid="", ' + node),
        podOn: podOn,
      },

    local cores(expr) = q(expr, 'printf "%.2g"'),
    local limitCores = cores('cgroup:quota_cpu_limit_cores:effective{@CG}'),
    local throttledShare = q('cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m{@CG}', 'humanizePercentage'),
    // Names when the exporter (or kube-state-metrics) resolved them, the cgroup path otherwise.
    local where = '{{ if $labels.container }}container {{ $labels.container }} of pod {{ $labels.namespace }}/{{ $labels.pod }}'
                  + '{{ else if $labels.pod }}pod {{ $labels.namespace }}/{{ $labels.pod }}'
                  + '{{ else }}cgroup {{ $labels.cgroup }}{{ end }} on {{ $labels.instance }}',
    // The largest processes of the alert's cgroup (the breakdown of a cgroup-level memory alert).
    local topProcesses = ('{{ range %s }}' % printfQuery('topk(3, quota_process_resident_bytes{@CG})'))
                         + tenant('.Labels.process') + ' {{ .Value | humanize1024 }}B, {{ end }}',

    // Warm-up: heavily throttled while the process using most of the cgroup's CPU is young.
    // Only runtimes that warm up (JIT, class loading: c.warmupRuntimes); a Go or C program
    // throttled in its first minutes is throttled, not warming up.
    // Heavily throttled: in most periods over 5 minutes, or frozen in bursts (a JVM warming up
    // under a small limit freezes for seconds while its 5-minute share stays below half).
    local warmupCondition(m) = |||
      (
        cgroup:quota_cpu_throttled_periods_with_pod:ratio_rate5m{%(m)s} > %(ratio)g
        or
        cgroup:quota_cpu_frozen_windows:increase10m{%(m)s} >= %(frozen)g
      )
      and %(on)s
      (time() - cgroup:quota_process_start_time_seconds:top_cpu{%(m)s, runtime=~"%(rt)s"} < %(warmup)d)
    ||| % { m: m, ratio: c.warmupThrottledPeriodsRatio, frozen: c.frozenSecondsPer10m, on: on, warmup: warmup, rt: c.warmupRuntimes },
    // A runtime whose parallelism exceeds its limit (Go GOMAXPROCS, JVM parallel GC threads) is
    // the cause of its cgroup's throttling: its own alert says so, and no other alert of the
    // cgroup (or of its pod) repeats it.
    local runtimeCause = |||
      (
        quota_go_gomaxprocs{%(sel)s} > 2 and process:quota_go_gomaxprocs_over_cpu_limit:ratio > %(go)g
        or
        quota_jvm_gc_parallel_threads{%(sel)s} > 1 and process:quota_jvm_gc_parallel_threads_over_cpu_limit:ratio > %(gc)g
      )
    ||| % { sel: sel, go: c.goMaxProcsPerLimitCore, gc: c.gcThreadsPerLimitCore },
    local podOn = 'on(%s)' % utils.labels(c.podJoinLabels),
    // What explains a level's throttling better than a generic CPU alert: a runtime's
    // parallelism, or a warm-up; for a pod slice also those of its containers.
    local explained(m) =
      local unless(onLabels, warm) = 'unless %s\n%sunless %s\n(%s)\n' % [onLabels, runtimeCause, onLabels, warm];
      unless(on, warmupCondition(m))
      + (if std.startsWith(m, 'container_id=""') then unless(podOn, warmupCondition('container_id!=""')) else ''),
    local cpuBound(m) = 'cgroup:quota_cpu_usage_over_limit:ratio_rate5m{%s} >= %g' % [m, c.cpuBoundUsageRatio],
    // A runtime's parallelism is to blame when its cgroup (or the one whose limit binds) is throttled.
    local throttledGate = |||
      (
        cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m > %(ratio)g
        or
        cgroup:quota_cpu_binding_frozen_windows:increase10m >= %(frozen)g
      )
    ||| % { ratio: c.throttledPeriodsRatioForCause, frozen: c.frozenSecondsForCause },
    local gcThreadsCondition = |||
      quota_jvm_gc_parallel_threads{%(sel)s, %(node)s} > 1
      and
      process:quota_jvm_gc_parallel_threads_over_cpu_limit:ratio > %(factor)g
    ||| % { sel: sel, node: node, factor: c.gcThreadsPerLimitCore },
    local gcThreadsDescription(state) =
      '{{ $value | printf "%.0f" }} GC threads against a ' + limitCores + '-core CPU limit in ' + where
      + ' (JVM ' + tenant('$labels.process') + ' sees ' + q('quota_jvm_cpu_count{@PR}', 'printf "%.0f"') + ' CPUs)' + state
      + 'Fix: -XX:ParallelGCThreads (and -XX:ConcGCThreads) at or below the '
      + 'limit, or -XX:ActiveProcessorCount=<limit>, or a larger CPU limit.',
    local gomaxprocsCondition = |||
      quota_go_gomaxprocs{%(sel)s, %(node)s} > 2
      and
      process:quota_go_gomaxprocs_over_cpu_limit:ratio > %(factor)g
    ||| % { sel: sel, node: node, factor: c.goMaxProcsPerLimitCore },
    local gomaxprocsDescription(state) =
      'GOMAXPROCS={{ $value | printf "%.0f" }} against a ' + limitCores
      + '-core CPU limit for Go program ' + tenant('$labels.process') + ' in ' + where + state
      + ('{{ with %s }}{{ with first . }}' % printfQuery('quota_go_info{@PR}'))
      + '{{ if eq .Labels.container_aware "true" }}The binary (version ' + tenant('.Labels.version') + ') is container-aware, '
      + 'so GOMAXPROCS is overridden (GOMAXPROCS environment variable or runtime.GOMAXPROCS): remove the '
      + 'override or set it to the limit. {{ else }}The binary (version ' + tenant('.Labels.version') + ', automaxprocs '
      + '{{ .Labels.automaxprocs }}) is not container-aware. {{ end }}{{ end }}{{ end }}'
      + 'Fix: build with Go >= 1.25 and a go.mod go line >= 1.25, or import go.uber.org/automaxprocs, or '
      + 'set GOMAXPROCS to the CPU limit (rounded up).',
    local creepDeriv = 'cgroup:quota_memory_working_set_bytes:deriv' + c.memoryCreepLookback,
    // A cgroup whose JVM heaps may still grow to their max with the rest under 95% of the limit,
    // and whose memory outside the heaps does not creep into that room within the horizon:
    // its working set grows because a heap fills up to -Xmx (MaxRAMPercentage), by design.
    local heapFillFits = |||
      (
        cgroup:quota_jvm_heap_max_bytes:sum + %(on)s cgroup:quota_memory_working_set_bytes:minus_jvm_heap
          < %(on)s (0.95 * cgroup:quota_memory_limit_bytes:effective)
      )
      unless %(on)s
      (
        (
          cgroup:quota_memory_limit_bytes:effective
            - %(on)s cgroup:quota_jvm_heap_max_bytes:sum
            - %(on)s cgroup:quota_memory_working_set_bytes:minus_jvm_heap
        )
          / %(on)s
        (cgroup:quota_memory_working_set_bytes:minus_jvm_heap_deriv%(lb)s > 0)
        < %(horizon)d
      )
    ||| % { on: on, lb: c.memoryCreepLookback, horizon: utils.seconds(c.memoryCreepHorizon) },
    local oomWindow = c.oomKilledWindow,

    groups+: [
      {
        name: 'quota-exporter-cpu',
        rules: [
          alert(
            'QuotaCPUThrottlingDuringWarmup',
            c.severities.warmup,
            oneLevel(warmupCondition),
            c.warmupFor,
            'A process is throttled by its CPU limit while it warms up.',
            where + ' was throttled in {{ $value | humanizePercentage }} of its CFS periods over 5 minutes while '
            + ('{{ range %s }}' % printfQuery('time() - cgroup:quota_process_start_time_seconds:top_cpu{@CG}'))
            + tenant('.Labels.process') + ' ({{ .Labels.runtime }}, started {{ .Value | humanizeDuration }} ago) {{ end }}'
            + 'warmed up. CPU limit ' + limitCores + ' cores, QoS class "{{ $labels.qos_class }}". '
            + qIf('sum(process:quota_jvm_jit_compilation_seconds:rate5m{@CG}) > 0.01',
                  'JIT compilation alone used {{ $v | printf "%.2g" }} cores. ')
            + 'Warm-up (JIT, class loading, cache fill) needs several times the steady-state CPU; at the limit '
            + 'the first requests after every deploy stall. Fix: Burstable QoS with the CPU limit above the request '
            + '(e.g. request 1, limit 3), or a higher limit.'
          ),
          alert(
            'QuotaCPUStalls',
            c.severities.stalls,
            // A service that freezes in bursts: frozen windows while its average use stays below
            // the limit. A cgroup at its limit (a batch job) is QuotaCPUAtLimit's; a stall during
            // warm-up is the warm-up alert's, one caused by a runtime's parallelism that runtime's
            // alert's (one problem, one alert); a young helper, probe or recycled worker changes nothing.
            oneLevel(function(m) |||
                                   cgroup:quota_cpu_frozen_windows:increase10m{%(m)s} >= %(frozen)g
                                   unless %(on)s
                                   %(bound)s
                                 ||| % { m: m, frozen: c.frozenSecondsPer10m, on: on, bound: cpuBound(m) }
                                 + explained(m)),
            c.stallsFor,
            'A cgroup is frozen by CPU throttling for seconds at a time.',
            where + ' was frozen (more than 90% of the CFS periods throttled) in {{ $value | printf "%.0f" }} '
            + 'sampler windows (1 s each at the default --throttle.window) of the last 10 minutes; over 5 minutes it was throttled in '
            + throttledShare + ' of periods with a ' + limitCores + '-core limit, which an average hides. '
            + qIf('time() - cgroup:quota_process_start_time_seconds:top_cpu{@CG}',
                  'The process using most of its CPU, {{ with first . }}' + tenant('.Labels.process') + '{{ end }}, started '
                  + '{{ $v | humanizeDuration }} ago{{ if lt $v %d.0 }}: warm-up adds to it{{ else }}: steady state{{ end }}. '
                    % warmup)
            + 'Bursts exhaust the quota early in each period and every thread waits for the next one. '
            + 'Fix: raise the CPU limit (or drop it and rely on the request), cap the threads that burst '
            + 'together (GC, worker pools), or allow CFS burst (cpu.max.burst).'
          ),
          alert(
            'QuotaCPUAtLimit',
            c.severities.cpuAtLimit,
            // CPU-bound by design (a batch job) or saturated: throttled because it always wants
            // more than its limit. Not a freeze of an idle service, and not a page by default.
            oneLevel(function(m) cpuBound(m) + '\n'
                                 + (if c.batchWorkloadSelector != '' then
                                      'unless %s\ncgroup:quota_cpu_limit_cores:effective{%s}\n' % [on, c.batchWorkloadSelector]
                                    else '')
                                 + explained(m)),
            c.cpuAtLimitFor,
            'A workload runs at its CPU limit.',
            where + ' used {{ $value | humanizePercentage }} of its ' + limitCores + '-core CPU limit for '
            + c.cpuAtLimitFor + ': CPU-bound and throttled in nearly every period, as a batch job is by design. '
            + 'Fix: for a batch job nothing (batchWorkloadSelector); for a service a larger limit or more replicas.'
          ),
          alert(
            'QuotaHighSystemCPUUnderQuota',
            c.severities.systemCPU,
            oneLevel(function(m) |||
              (
                cgroup_mode:quota_cpu_usage_seconds:rate5m{mode="system", %(m)s}
                  / ignoring(mode)
                cgroup:quota_cpu_usage_seconds:rate5m{%(m)s}
              ) > %(share)g
              and %(on)s
              cgroup:quota_cpu_usage_seconds:rate2m > %(minCores)g
              and %(on)s
              cgroup:quota_cpu_throttled_periods_with_pod:ratio_rate5m > %(throttled)g
            ||| % {
              m: m,
              minCores: c.systemCPUMinCores,
              share: c.systemCPUShare,
              on: on,
              throttled: c.systemCPUThrottledPeriodsRatio,
            }),
            c.systemCPUFor,
            'Kernel time dominates the CPU use of a throttled cgroup.',
            'System (kernel) time is {{ $value | humanizePercentage }} of the CPU time of ' + where + ' ('
            + cores('cgroup:quota_cpu_usage_seconds:rate2m{@CG}') + ' cores used of a ' + limitCores
            + '-core limit, throttled in ' + throttledShare + ' of periods). Threads contending on a shared '
            + 'kernel resource (one file, socket or lock) spin in the kernel on every CPU the quota lets them '
            + 'use, so the quota burns on contention. Fix: pin the work to CPUs (cpuset, static CPU manager '
            + 'policy) instead of a quota, reduce the threads hitting the shared resource, and find the syscall '
            + '(perf top, strace -c).'
          ),
        ],
      },
      {
        name: 'quota-exporter-runtime',
        rules: [
          alert(
            'QuotaJVMGCThreadsExceedCPULimit',
            c.severities.gcThreads,
            // Only when fewer threads are possible (more than one), and only while the cgroup
            // (or the one whose limit binds) is throttled: by the 5m share or by frozen seconds.
            '%s and %s\n%s' % [gcThreadsCondition, on, throttledGate],
            c.gcThreadsFor,
            'A JVM runs far more parallel GC threads than its CPU limit.',
            gcThreadsDescription('; the cgroup was throttled in ' + throttledShare + ' of periods. The GC threads burn the quota in '
                                 + 'a few milliseconds and the whole JVM is frozen for the rest of each period, so a 0.1 s GC pause '
                                 + 'becomes a multi-second stall. ')
          ),
          // The same setting in a JVM that is not throttled yet (a small live set): for the record,
          // as for Go's GOMAXPROCS. A larger live set or heavier load turns its GCs into stalls.
          alert(
            'QuotaJVMGCThreadsExceedCPULimit',
            'info',
            '%s unless %s\n%s' % [gcThreadsCondition, on, throttledGate],
            c.gcThreadsFor,
            'A JVM runs far more parallel GC threads than its CPU limit.',
            gcThreadsDescription(', which is not throttled now: its collections are short enough today, and a larger live set '
                                 + 'or heavier load turns each one into a stall. ')
          ),
          alert(
            'QuotaGoMaxProcsExceedsCPULimit',
            c.severities.goMaxProcs,
            '%s and %s\n%s' % [gomaxprocsCondition, on, throttledGate],
            c.goMaxProcsFor,
            'A Go program runs with GOMAXPROCS far above its CPU limit.',
            gomaxprocsDescription(', throttled in ' + throttledShare + ' of periods. Runnable Ps burn the quota '
                                  + 'together and a stop-the-world phase waits for descheduled threads: GC pauses '
                                  + 'grow from microseconds to 100 ms. ')
          ),
          // The same setting in a program that is not throttled (an idle sidecar): for the record.
          alert(
            'QuotaGoMaxProcsExceedsCPULimit',
            'info',
            '%s unless %s\n%s' % [gomaxprocsCondition, on, throttledGate],
            c.goMaxProcsFor,
            'A Go program runs with GOMAXPROCS far above its CPU limit.',
            gomaxprocsDescription(', which is not throttled now: the setting costs nothing while the program '
                                  + 'is idle and stalls it at the first burst. ')
          ),
          // Measured pauses (--collector.gopause), one alert per container: the worst process.
          alert(
            'QuotaGoSTWInflation',
            c.severities.goSTW,
            |||
              max without (process, runtime) (
                (
                  process:quota_go_stw_pause_seconds:p99_10m{%(node)s} > %(p99)g
                  and
                  process:quota_go_gomaxprocs_over_cpu_limit:ratio > 1
                )
                or
                (
                  process:quota_go_stw_pause_seconds:p99_10m{%(node)s} > %(p99)g
                  and %(on)s
                  %(gate)s
                )
              )
            ||| % { node: node, p99: c.goSTWPauseP99Seconds, on: on, gate: throttledGate },
            c.goSTWFor,
            'Go stop-the-world pauses are inflated by the CPU limit.',
            'p99 Go stop-the-world pause {{ $value | humanizeDuration }} over 10 minutes in ' + where
            + ' (median ' + q('max(process:quota_go_stw_pause_seconds:p50_10m{@CG})', 'humanizeDuration')
            + '), with GOMAXPROCS ' + q('max(quota_go_gomaxprocs{@CG})', 'printf "%.0f"') + ' against a ' + limitCores
            + '-core CPU limit. Every pause waits until all '
            + 'GOMAXPROCS threads have stopped, and threads descheduled by CFS throttling stop only when the '
            + 'quota refills. Fix: GOMAXPROCS at or below the limit (Go >= 1.25 with a go.mod go line >= 1.25, '
            + 'go.uber.org/automaxprocs, or the GOMAXPROCS variable), or a larger CPU limit.'
          ),
          alert(
            'QuotaJVMSafepointInflation',
            c.severities.safepoint,
            // Absolute: time in safepoints, time reaching them, or the mean time-to-safepoint,
            // while throttled. No baseline, so a JVM misconfigured since deploy fires too.
            |||
              (
                process:quota_jvm_safepoint_seconds:rate5m{%(node)s} > %(sp)g
                or
                process:quota_jvm_safepoint_sync_seconds:rate5m{%(node)s} > %(sync)g
                or
                process:quota_jvm_safepoint_sync_seconds:mean5m{%(node)s} > %(mean)g
              )
              and %(on)s
              cgroup:quota_cpu_binding_throttled_periods:ratio_rate5m > %(throttled)g
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
            'JVM ' + tenant('$labels.process') + ' in ' + where + ' spends '
            + q('process:quota_jvm_safepoint_seconds:rate5m{@PR}', 'humanizePercentage')
            + ' of wall time at safepoints, and each safepoint takes '
            + q('process:quota_jvm_safepoint_sync_seconds:mean5m{@PR}', 'humanizeDuration')
            + ' on average to reach (time-to-safepoint), while the cgroup is throttled in ' + throttledShare
            + ' of periods: threads descheduled by CFS throttling hold up every stop-the-world pause. '
            + 'Fix: a larger CPU limit, fewer GC/JIT threads (-XX:ParallelGCThreads, -XX:CICompilerCount), '
            + 'and check QuotaJVMGCThreadsExceedCPULimit.'
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
            oneLevel(function(m) |||
              (
                (cgroup:quota_memory_limit_bytes:effective{%(m)s} - quota_memory_working_set_bytes{%(sel)s, %(m)s})
                  /
                (%(deriv)s{%(m)s} > 0)
              ) < %(horizon)d
              and %(on)s
              (quota_memory_working_set_bytes{%(sel)s, %(m)s} offset %(minAge)ds)
              unless %(on)s
              (%(heapFill)s)
            ||| % {
              heapFill: heapFillFits,
              m: m,
              sel: sel,
              deriv: creepDeriv,
              horizon: utils.seconds(c.memoryCreepHorizon),
              on: on,
              minAge: utils.seconds(c.memoryCreepLookback) / 3,
            }),
            c.memoryCreepFor,
            "A cgroup's memory is creeping towards its limit.",
            'The working set of ' + where + ' grew '
            + q(creepDeriv + '{@CG} * 3600', 'humanize1024') + 'B per hour over the last ' + c.memoryCreepLookback
            + '; at this rate it reaches its ' + q('cgroup:quota_memory_limit_bytes:effective{@CG}', 'humanize1024')
            + 'B memory limit in about {{ $value | humanizeDuration }} and the OOM killer ends a process. '
            + 'Largest processes: ' + topProcesses
            + 'Fix: find what grows on the Memory dashboard (JVM heap vs. native memory, malloc arenas: see '
            + 'QuotaMallocArenaBloat); leave headroom or raise the limit.'
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
                (%(perCore)g * cgroup:quota_cpu_limit_cores:effective)
                or
                (
                  quota_process_malloc_arenas{%(sel)s, %(node)s} > %(noLimit)g
                  unless %(on)s
                  cgroup:quota_cpu_limit_cores:effective
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
            '{{ $value | printf "%.0f" }} glibc malloc arenas (limit '
            + q('quota_process_malloc_arena_limit{@PR}', 'printf "%.0f"') + ', by default 8 per host CPU) '
            + qIf('cgroup:quota_cpu_limit_cores:effective{@CG}',
                  'against a {{ $v | printf "%.2g" }}-core CPU limit',
                  'without a CPU limit')
            + ' in ' + tenant('$labels.process') + ', ' + where + ': arena heaps keep '
            + q('process:quota_process_malloc_heap_resident_bytes:ratio{@PR}', 'humanizePercentage')
            + ' of RSS resident. ptmalloc gives each contending thread its own arena and returns freed memory slowly, so '
            + 'RSS creeps up while the heap stays flat. Fix: MALLOC_ARENA_MAX=2 (or the CPU limit), or preload '
            + 'jemalloc or tcmalloc (LD_PRELOAD); malloc_trim dropping RSS confirms it.'
          ),
          alert(
            'QuotaMemoryNearLimit',
            c.severities.memoryNearLimit,
            oneLevel(function(m) |||
              quota_memory_working_set_bytes{%(sel)s, %(m)s}
                /
              cgroup:quota_memory_limit_bytes:effective{%(m)s}
              > %(ratio)g
            ||| % { sel: sel, m: m, ratio: c.memoryNearLimitRatio }),
            c.memoryNearLimitFor,
            "A cgroup's working set is close to its memory limit.",
            'The working set of ' + where + ' is {{ $value | humanizePercentage }} of its '
            + q('cgroup:quota_memory_limit_bytes:effective{@CG}', 'humanize1024') + 'B memory limit (RSS '
            + q('quota_memory_rss_bytes{@CG}', 'humanize1024') + 'B; largest processes: ' + topProcesses
            + 'the rest is page cache the kernel reclaims first). What remains ends in the OOM killer. '
            + 'Fix: find the process that grows on the Memory dashboard (heap, arenas, native), cut it or raise the limit.'
          ),
          alert(
            'QuotaContainerOOMKilled',
            c.severities.oomKilled,
            // A restarted container's old cgroup is gone before the next scrape: the exporter keeps
            // its kill counter (issue 10), which may first be seen already above zero.
            oneLevel(function(m) |||
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
            + oomWindow
            + qIf('cgroup:quota_memory_limit_bytes:effective{@CG}', ' (memory limit {{ $v | humanize1024 }}B)')
            + '; a restarted container gets a new cgroup and container id. Fix: see whether memory crept up '
            + '(heap, malloc arenas, native memory) on the Memory dashboard; raise the limit or fix the growth.'
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
            + c.exporterDownFor + ': throttling, runtime and memory alerts for that host are blind. Check the '
            + 'pod or service, its logs and the scrape error on the Prometheus targets page.'
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
                           + '{{ $labels.instance }} (job {{ $labels.job }}), which was scraped within the last '
                           + c.exporterSeenWindow + '{{ end }}: that node has no throttling, runtime or memory alerts. '
                           + 'Check the DaemonSet (kubectl -n <namespace> get ds quota-exporter: desired vs. ready, '
                           + 'node selector and tolerations) and the PodMonitor or scrape config.',
              runbook_url: c.runbookURLPattern % 'quotaexportermissing',
            },
          },
          alert(
            'QuotaExporterCollectorFailed',
            c.severities.collectorFailed,
            'quota_exporter_scrape_collector_success{%(sel)s} == 0\n' % { sel: sel },
            c.collectorFailedFor,
            'A quota_exporter collector fails on every scrape.',
            'Collector "{{ $labels.collector }}" of quota_exporter on {{ $labels.instance }} failed in every '
            + 'scrape for ' + c.collectorFailedFor + '; its series may be missing or incomplete. '
            + ('{{ with %s }}' % printfQuery(
                 'topk(1, sum by (reason) (increase(quota_exporter_read_errors_total{@CO}[%s])))' % c.collectorFailedFor
               ))
            + '{{ with first . }}Most read errors: {{ .Labels.reason }} ({{ .Value | printf "%.0f" }}). {{ end }}{{ end }}'
            + 'Check the exporter log and quota_exporter_read_errors_total by reason (permission: missing '
            + 'capabilities or hostPID; timeout: slow /proc reads).'
          ),
        ],
      },
    ],
  },
}
