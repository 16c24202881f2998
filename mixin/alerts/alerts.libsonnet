// Alerts that name the cause and the fix. Descriptions look up the numbers they quote with
// template queries built from the alert's own labels.
local utils = import '../lib/utils.libsonnet';

{
  prometheusAlerts+:: {
    local c = $._config,
    local sel = c.quotaExporterSelector,
    local on = 'on(%s)' % utils.labels(c.cgroupJoinLabels),
    local warmup = utils.seconds(c.warmupWindow),

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
    // qIf(expr, text): text (which may use $v, the first value) only when expr returns something.
    local qIf(expr, text) =
      '{{ with %s }}{{ $v := . | first | value }}%s{{ end }}' % [printfQuery(expr), text],

    local alert(name, severity, expr, forDuration, summary, description) = {
      alert: name,
      expr: expr,
      labels: { severity: severity },
      annotations: {
        summary: summary,
        description: description,
        runbook_url: c.runbookURLPattern % std.asciiLower(name),
      },
    } + (if forDuration != null then { 'for': forDuration } else {}),

    local cores(expr) = q(expr, 'printf "%.2g"'),
    local limitCores = cores('quota_cpu_limit_cores{@CG}'),
    local throttledShare = q('cgroup:quota_cpu_throttled_periods:ratio_rate5m{@CG}', 'humanizePercentage'),
    local where = 'cgroup {{ $labels.cgroup }} on {{ $labels.instance }}',

    groups+: [
      {
        name: 'quota-exporter-cpu',
        rules: [
          alert(
            'QuotaCPUThrottlingDuringWarmup',
            c.severities.warmup,
            |||
              cgroup:quota_cpu_throttled_periods:ratio_rate5m > %(ratio)g
              and %(on)s
              (time() - quota_process_start_time_seconds{%(sel)s} < %(warmup)d)
            ||| % { ratio: c.warmupThrottledPeriodsRatio, on: on, sel: sel, warmup: warmup },
            c.warmupFor,
            'A process is throttled by its CPU limit while it warms up.',
            where + ' was throttled in {{ $value | humanizePercentage }} of its CFS periods over 5 minutes while '
            + ('{{ range %s }}' % printfQuery('time() - quota_process_start_time_seconds{@CG} < %d' % warmup))
            + '{{ .Labels.process }} ({{ .Labels.runtime }}, started {{ .Value | humanizeDuration }} ago) {{ end }}'
            + 'warmed up. CPU limit ' + limitCores + ' cores, used '
            + cores('cgroup:quota_cpu_usage_seconds:rate2m{@CG}') + ' cores, QoS class "{{ $labels.qos_class }}". '
            + qIf('sum(process:quota_jvm_jit_compilation_seconds:rate5m{@CG}) > 0.01',
                  'JIT compilation alone used {{ $v | printf "%.2g" }} cores. ')
            + 'Warm-up (JIT, class loading, cache fill) needs several times the steady-state CPU; at the limit '
            + 'the first requests after every deploy stall. Fix: Burstable QoS with the CPU limit above the request '
            + '(e.g. request 1, limit 3), or a higher limit.'
          ),
          alert(
            'QuotaCPUStalls',
            c.severities.stalls,
            |||
              cgroup:quota_cpu_stalled_seconds:increase5m > %(seconds)g
              unless %(on)s
              (time() - quota_process_start_time_seconds{%(sel)s} < %(warmup)d)
            ||| % { seconds: c.stalledSecondsPer5m, on: on, sel: sel, warmup: warmup },
            c.stallsFor,
            'A cgroup is frozen by CPU throttling for many seconds.',
            where + ' had {{ $value | printf "%.0f" }} of the last 300 seconds with more than half of their CFS '
            + 'periods throttled (' + q('cgroup:quota_cpu_stalled_seconds:increase1h{@CG}', 'printf "%.0f"')
            + ' s in the last hour); over 5 minutes it was throttled in ' + throttledShare + ' of periods and used '
            + cores('cgroup:quota_cpu_usage_seconds:rate2m{@CG}') + ' of its ' + limitCores
            + ' cores: bursts exhaust the quota early in each period and every thread waits for the next one, '
            + 'which a 5-minute average hides. Fix: raise the CPU limit (or drop it and rely on the request), '
            + 'cap the threads that burst together (GC, worker pools), or allow CFS burst (cpu.max.burst).'
          ),
          alert(
            'QuotaHighSystemCPUUnderQuota',
            c.severities.systemCPU,
            |||
              (
                cgroup_mode:quota_cpu_usage_seconds:rate5m{mode="system"}
                  / ignoring(mode)
                cgroup:quota_cpu_usage_seconds:rate5m
              ) > %(share)g
              and %(on)s
              cgroup:quota_cpu_usage_seconds:rate2m > %(minCores)g
              and %(on)s
              cgroup:quota_cpu_throttled_periods:ratio_rate5m > %(throttled)g
            ||| % {
              minCores: c.systemCPUMinCores,
              share: c.systemCPUShare,
              on: on,
              throttled: c.systemCPUThrottledPeriodsRatio,
            },
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
            |||
              process:quota_jvm_gc_parallel_threads_over_cpu_limit:ratio > %(factor)g
              and %(on)s
              cgroup:quota_cpu_throttled_periods:ratio_rate5m > %(throttled)g
            ||| % { factor: c.gcThreadsPerLimitCore, on: on, throttled: c.throttledPeriodsRatioForCause },
            c.gcThreadsFor,
            'A JVM runs far more parallel GC threads than its CPU limit.',
            q('quota_jvm_gc_parallel_threads{@PR}', 'printf "%.0f"') + ' GC threads against a '
            + limitCores + '-core CPU limit in ' + where + ' (JVM {{ $labels.process }} sees '
            + q('quota_jvm_cpu_count{@PR}', 'printf "%.0f"') + ' CPUs, '
            + q('quota_jvm_gc_concurrent_threads{@PR}', 'printf "%.0f"') + ' concurrent GC threads); '
            + 'the cgroup was throttled in ' + throttledShare + ' of periods. The GC threads burn the quota in '
            + 'a few milliseconds and the whole JVM is frozen for the rest of each period, so a 0.1 s GC pause '
            + 'becomes a multi-second stall. Fix: -XX:ParallelGCThreads (and -XX:ConcGCThreads) at or below the '
            + 'limit, or -XX:ActiveProcessorCount=<limit>, or a larger CPU limit.'
          ),
          alert(
            'QuotaGoMaxProcsExceedsCPULimit',
            c.severities.goMaxProcs,
            |||
              process:quota_go_gomaxprocs_over_cpu_limit:ratio > %(factor)g
              and
              quota_go_gomaxprocs{%(sel)s} > 2
            ||| % { factor: c.goMaxProcsPerLimitCore, sel: sel },
            c.goMaxProcsFor,
            'A Go program runs with GOMAXPROCS far above its CPU limit.',
            'GOMAXPROCS=' + q('quota_go_gomaxprocs{@PR}', 'printf "%.0f"') + ' against a ' + limitCores
            + '-core CPU limit for Go program {{ $labels.process }} in ' + where + ' ('
            + q('quota_process_threads{@PR}', 'printf "%.0f"') + ' OS threads). Runnable Ps burn the quota '
            + 'together and a stop-the-world phase waits for descheduled threads: GC pauses grow from '
            + 'microseconds to 100 ms. '
            + ('{{ with %s }}{{ with first . }}' % printfQuery('quota_go_info{@PR}'))
            + '{{ if eq .Labels.container_aware "true" }}The binary (version {{ .Labels.version }}) is container-aware, '
            + 'so GOMAXPROCS is overridden (GOMAXPROCS environment variable or runtime.GOMAXPROCS): remove the '
            + 'override or set it to the limit.{{ else }}The binary (version {{ .Labels.version }}, automaxprocs '
            + '{{ .Labels.automaxprocs }}) is not container-aware. {{ end }}{{ end }}{{ end }}'
            + 'Fix: build with Go >= 1.25 and a go.mod go line >= 1.25, or import go.uber.org/automaxprocs, or '
            + 'set GOMAXPROCS to the CPU limit (rounded up).'
          ),
          alert(
            'QuotaJVMSafepointInflation',
            c.severities.safepoint,
            |||
              (
                (
                  process:quota_jvm_safepoint_seconds:rate5m > %(sp)g
                  and
                  process:quota_jvm_safepoint_seconds:rate5m
                    > %(factor)g * avg_over_time(process:quota_jvm_safepoint_seconds:rate5m[%(baseline)s])
                )
                or
                (
                  process:quota_jvm_safepoint_sync_seconds:rate5m > %(sync)g
                  and
                  process:quota_jvm_safepoint_sync_seconds:rate5m
                    > %(factor)g * avg_over_time(process:quota_jvm_safepoint_sync_seconds:rate5m[%(baseline)s])
                )
              )
              and %(on)s
              cgroup:quota_cpu_throttled_periods:ratio_rate5m > %(throttled)g
            ||| % {
              sp: c.safepointSecondsPerSecond,
              sync: c.safepointSyncSecondsPerSecond,
              factor: c.safepointInflationFactor,
              baseline: c.safepointBaselineWindow,
              on: on,
              throttled: c.safepointThrottledPeriodsRatio,
            },
            c.safepointFor,
            'JVM stop-the-world pauses are inflated while the cgroup is throttled.',
            'JVM {{ $labels.process }} in ' + where + ' spends '
            + q('process:quota_jvm_safepoint_seconds:rate5m{@PR}', 'humanizePercentage')
            + ' of wall time at safepoints (normally '
            + q('avg_over_time(process:quota_jvm_safepoint_seconds:rate5m{@PR}[%s])' % c.safepointBaselineWindow,
                'humanizePercentage')
            + ') and ' + q('process:quota_jvm_safepoint_sync_seconds:rate5m{@PR}', 'humanizePercentage')
            + ' reaching them (time-to-safepoint, normally '
            + q('avg_over_time(process:quota_jvm_safepoint_sync_seconds:rate5m{@PR}[%s])' % c.safepointBaselineWindow,
                'humanizePercentage')
            + '), while the cgroup is throttled in ' + throttledShare + ' of periods with a ' + limitCores
            + '-core limit: threads descheduled by CFS throttling hold up every stop-the-world pause. '
            + 'Fix: a larger CPU limit, fewer GC/JIT threads (-XX:ParallelGCThreads, -XX:CICompilerCount), '
            + 'and check QuotaJVMGCThreadsExceedCPULimit.'
          ),
        ],
      },
      {
        name: 'quota-exporter-memory',
        rules: [
          alert(
            'QuotaProcessRSSCreep',
            c.severities.rssCreep,
            |||
              (
                predict_linear(quota_process_resident_bytes{%(sel)s}[%(lookback)s], %(horizon)d)
                  > %(on)s group_left
                quota_memory_limit_bytes{%(sel)s}
              )
              and
              deriv(quota_process_resident_bytes{%(sel)s}[1h]) > 0
              and
              time() - quota_process_start_time_seconds{%(sel)s} > %(minAge)d
            ||| % {
              sel: sel,
              lookback: c.rssCreepLookback,
              horizon: utils.seconds(c.rssCreepHorizon),
              on: on,
              minAge: utils.seconds(c.rssCreepLookback) / 3,
            },
            c.rssCreepFor,
            "A process's resident memory is creeping towards the cgroup memory limit.",
            'RSS of {{ $labels.process }} ({{ $labels.runtime }}) in ' + where + ' is '
            + q('quota_process_resident_bytes{@PR}', 'humanize1024') + 'B and grew '
            + q('deriv(quota_process_resident_bytes{@PR}[%s]) * 3600' % c.rssCreepLookback, 'humanize1024')
            + 'B per hour over the last ' + c.rssCreepLookback + '; at this rate it reaches the '
            + q('quota_memory_limit_bytes{@CG}', 'humanize1024') + 'B memory limit in about '
            + q('(quota_memory_limit_bytes{@CG} - %s group_right quota_process_resident_bytes{@PR}) / deriv(quota_process_resident_bytes{@PR}[%s])'
                % [on, c.rssCreepLookback], 'humanizeDuration')
            + ' and the OOM killer ends it. '
            + qIf('process:quota_process_malloc_heap_resident_bytes:ratio{@PR} > %g' % c.mallocArenaResidentShare,
                  'glibc malloc arenas hold {{ $v | humanizePercentage }} of RSS: arena growth explains it '
                  + '(MALLOC_ARENA_MAX or jemalloc/tcmalloc, see QuotaMallocArenaBloat). ')
            + qIf('quota_jvm_heap_committed_bytes{@PR} / quota_process_resident_bytes{@PR}',
                  'The JVM heap commits {{ $v | humanizePercentage }} of RSS: {{ if gt $v 0.7 }}the heap explains '
                  + 'it (check -Xmx / -XX:MaxRAMPercentage against the limit){{ else }}native memory outside the '
                  + 'heap grows (arenas, direct buffers, threads, metaspace: compare with NMT){{ end }}. ')
            + 'Fix: find what grows on the Memory dashboard; leave headroom or raise the limit.'
          ),
          alert(
            'QuotaMallocArenaBloat',
            c.severities.arenaBloat,
            |||
              (
                quota_process_malloc_arenas{%(sel)s}
                  / %(on)s group_left
                quota_cpu_limit_cores{%(sel)s}
              ) > %(perCore)g
              and
              process:quota_process_malloc_heap_resident_bytes:ratio > %(share)g
            ||| % { sel: sel, on: on, perCore: c.mallocArenasPerLimitCore, share: c.mallocArenaResidentShare },
            c.arenaBloatFor,
            "glibc malloc arenas hold a large share of a process's memory.",
            q('quota_process_malloc_arenas{@PR}', 'printf "%.0f"') + ' glibc malloc arenas (limit '
            + q('quota_process_malloc_arena_limit{@PR}', 'printf "%.0f"') + ', by default 8 per host CPU) '
            + 'against a ' + limitCores + '-core CPU limit in {{ $labels.process }}, ' + where + ': '
            + q('quota_process_malloc_heaps{@PR}', 'printf "%.0f"') + ' arena heaps keep '
            + q('quota_process_malloc_heap_resident_bytes{@PR}', 'humanize1024') + 'B resident, '
            + q('process:quota_process_malloc_heap_resident_bytes:ratio{@PR}', 'humanizePercentage')
            + ' of RSS. ptmalloc gives each contending thread its own arena and returns freed memory slowly, so '
            + 'RSS creeps up while the heap stays flat. Fix: MALLOC_ARENA_MAX=2 (or the CPU limit), or preload '
            + 'jemalloc or tcmalloc (LD_PRELOAD); malloc_trim dropping RSS confirms it.'
          ),
          alert(
            'QuotaMemoryNearLimit',
            c.severities.memoryNearLimit,
            |||
              quota_memory_working_set_bytes{%(sel)s}
                /
              quota_memory_limit_bytes{%(sel)s}
              > %(ratio)g
            ||| % { sel: sel, ratio: c.memoryNearLimitRatio },
            c.memoryNearLimitFor,
            "A cgroup's working set is close to its memory limit.",
            'The working set of ' + where + ' is {{ $value | humanizePercentage }} of its '
            + q('quota_memory_limit_bytes{@CG}', 'humanize1024') + 'B memory limit (RSS '
            + q('quota_memory_rss_bytes{@CG}', 'humanize1024') + 'B, page cache '
            + q('quota_memory_cache_bytes{@CG}', 'humanize1024') + 'B). The kernel reclaims cache first; '
            + 'what remains ends in the OOM killer. Fix: find the process that grows on the Memory dashboard '
            + '(heap, arenas, native), cut it or raise the limit.'
          ),
          alert(
            'QuotaContainerOOMKilled',
            c.severities.oomKilled,
            |||
              increase(quota_memory_oom_kills_total{%(sel)s}[%(window)s]) > 0
            ||| % { sel: sel, window: c.oomKilledWindow },
            null,
            'The OOM killer ended a process in a cgroup.',
            '{{ $value | printf "%.0f" }} process(es) in ' + where + ' were killed by the OOM killer in the last '
            + c.oomKilledWindow + ' (memory limit ' + q('quota_memory_limit_bytes{@CG}', 'humanize1024')
            + 'B, working set now ' + q('quota_memory_working_set_bytes{@CG}', 'humanize1024') + 'B). '
            + 'Fix: see whether RSS crept up (heap, malloc arenas, native memory) on the Memory dashboard; '
            + 'raise the limit or fix the growth.'
          ),
        ],
      },
      {
        name: 'quota-exporter-self',
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
