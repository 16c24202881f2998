// Everything a user may want to change. Override with:
//   (import 'mixin.libsonnet') + { _config+:: { quotaExporterSelector: 'job="kube-system/quota-exporter"' } }
{
  _config+:: {
    // Series scraped from quota_exporter.
    quotaExporterSelector: 'job="quota-exporter"',

    // Multi-cluster Prometheus (Thanos, Mimir): add the cluster label to every join,
    // aggregation and dashboard filter.
    showMultiCluster: false,
    clusterLabel: 'cluster',

    // The application's own Go runtime histogram (client_golang with runtime/metrics),
    // scraped by the user from the application, not by quota_exporter. '' hides the panel.
    goGCPausesSelector: 'job!="quota-exporter"',

    // Windows shared by rules, alerts and dashboards.
    warmupWindow: '10m',  // a process younger than this is warming up (JIT, class loading, caches)
    rssCreepLookback: '6h',  // the trend predict_linear fits for RSS creep
    rssCreepHorizon: '4h',  // alert when the trend reaches the limit within this
    safepointBaselineWindow: '1d',  // "normal" safepoint time is the average over this

    // Thresholds, named by what they mean.
    warmupThrottledPeriodsRatio: 0.5,  // share of CFS periods throttled while warming up
    stalledSecondsPer5m: 15,  // seconds (of 300) with more than half the periods throttled
    throttledPeriodsRatioForCause: 0.1,  // "the cgroup is being throttled" when blaming a cause
    gcThreadsPerLimitCore: 2,  // parallel GC threads per core of CPU limit
    goMaxProcsPerLimitCore: 2,  // GOMAXPROCS per core of CPU limit (and more than Go's minimum of 2)
    safepointInflationFactor: 3,  // safepoint time or time-to-safepoint vs. its baseline
    safepointSecondsPerSecond: 0.05,  // and at least this share of wall time in safepoints
    safepointSyncSecondsPerSecond: 0.01,  // or at least this share of wall time reaching safepoints
    safepointThrottledPeriodsRatio: 0.25,  // while throttled in at least this share of periods
    mallocArenasPerLimitCore: 4,  // glibc arenas per core of CPU limit
    mallocArenaResidentShare: 0.3,  // share of RSS resident in non-main arena heaps
    memoryNearLimitRatio: 0.9,  // working set / memory limit
    systemCPUShare: 0.5,  // system time / all CPU time of a cgroup
    systemCPUThrottledPeriodsRatio: 0.25,
    systemCPUMinCores: 0.1,  // ignore idle cgroups

    // `for` durations.
    warmupFor: '2m',
    stallsFor: '15m',
    gcThreadsFor: '10m',
    goMaxProcsFor: '15m',
    safepointFor: '10m',
    rssCreepFor: '30m',
    arenaBloatFor: '30m',
    memoryNearLimitFor: '15m',
    systemCPUFor: '15m',
    exporterDownFor: '5m',
    collectorFailedFor: '15m',
    oomKilledWindow: '10m',  // how long QuotaContainerOOMKilled stays firing after a kill

    severities: {
      warmup: 'warning',
      stalls: 'warning',
      gcThreads: 'warning',
      goMaxProcs: 'warning',
      safepoint: 'warning',
      rssCreep: 'warning',
      arenaBloat: 'info',
      memoryNearLimit: 'warning',
      oomKilled: 'warning',
      systemCPU: 'info',
      exporterDown: 'warning',
      collectorFailed: 'warning',
    },

    // runbook_url = runbookURLPattern % alertname (lowercased: GitHub's heading anchors).
    runbookURLPattern: 'https://github.com/quota-exporter/quota_exporter/blob/main/docs/runbooks.md#%s',

    // Dashboards.
    dashboardTags: ['quota-exporter'],
    dashboardNamePrefix: 'Quota / ',
    dashboardUIDs: {
      'quota-overview.json': 'quota-overview',
      'quota-cpu-throttling.json': 'quota-cpu-throttling',
      'quota-runtime-pauses.json': 'quota-runtime-pauses',
      'quota-memory.json': 'quota-memory',
    },
    dashboardTimezone: 'utc',
    dashboardRefresh: '30s',
    dashboardPeriod: 'now-6h',

    // Derived; not meant to be overridden.
    clusterLabels:: if self.showMultiCluster then [self.clusterLabel] else [],
    // Labels that identify a cgroup's series from one exporter; used in every join.
    cgroupJoinLabels:: self.clusterLabels + ['job', 'instance', 'cgroup'],
    // The identity labels of per-cgroup series (aggregations keep them).
    cgroupLabels:: self.cgroupJoinLabels + ['pod_uid', 'container_id', 'qos_class'],
    processJoinLabels:: self.cgroupJoinLabels + ['process'],
  },
}
