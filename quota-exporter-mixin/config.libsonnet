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

    // Where the Kubernetes names (namespace, pod, container) come from:
    //   'exporter': quota_exporter's own labels (--path.podlogs, the kubelet's /var/log/pods);
    //   'kube-state-metrics': joined from kube_pod_info (by pod uid) and kube_pod_container_info
    //   (by container id), for deployments that do not mount /var/log.
    kubeNamesSource: 'exporter',
    kubeStateMetricsSelector: 'job="kube-state-metrics"',
    // QuotaExporterMissing: an exporter target seen within exporterSeenWindow that is gone while
    // its node is still there. A node is there while one of exporterMissingNodePresence has a
    // series for it (its nodeLabel, port stripped, equal to the exporter's instance, port
    // stripped): targets that go with the node (node_exporter; the kubelet, whose Prometheus
    // Operator target has a node label) and kube-state-metrics' kube_node_info. A scale-down
    // removes them with the exporter: no alert. With [] the exporter's own history decides
    // alone, and a removed node fires for exporterSeenWindow.
    exporterMissingNodePresence: [
      { selector: 'kube_node_info{%s}' % $._config.kubeStateMetricsSelector, nodeLabel: 'node' },
      { selector: 'up{job=~"node-exporter|node"}', nodeLabel: 'instance' },
      { selector: 'up{job="kubelet"}', nodeLabel: 'node' },
    ],
    exporterSeenWindow: '1d',
    // Instead: every node of kube_node_info must have an exporter target, a new node that never
    // had one included (needs kube-state-metrics and instance = node name).
    exporterMissingUsesKubeStateMetrics: false,
    // Rule groups with long ranges ([1d], [6h]) are evaluated at this interval, not every
    // evaluation_interval.
    slowRulesInterval: '1m',

    // The application's own Go runtime histogram (client_golang with runtime/metrics),
    // scraped by the user from the application, not by quota_exporter. '' hides the panel.
    goGCPausesSelector: 'job!="quota-exporter"',
    // The application's own Go runtime gauges and counters (client_golang >= 1.20 with Go >= 1.21:
    // go_sched_gomaxprocs_threads, go_sched_pauses_total_gc_seconds). '' hides the panels.
    goRuntimeSelector: 'job!="quota-exporter"',

    // Durations shared by rules, alerts and dashboards.
    warmupPeriod: '10m',  // a process younger than this is warming up (JIT, class loading, caches)
    memoryCreepLookback: '6h',  // the trend (deriv) fitted to a cgroup's working set
    memoryCreepHorizon: '4h',  // alert when the trend reaches the limit within this

    // Thresholds, named by what they mean.
    warmupThrottledPeriodsRatio: 0.5,  // share of CFS periods throttled while warming up
    // Runtimes that warm up (JIT compilation, class loading), as the exporter's runtime label
    // names them: only their young processes get QuotaCPUThrottlingDuringWarmup.
    warmupRuntimes: 'jvm',
    // CPU-bound: a cgroup using at least this share of its CPU limit (5-minute rate) runs at its
    // limit by design (a batch job, a saturated worker): QuotaCPUAtLimit, never QuotaCPUStalls,
    // whose freezes are those of a service with low average usage.
    cpuBoundUsageRatio: 0.9,
    // ... and throttled in at least this share of its periods (the binding level's 5-minute share):
    // a service that uses 97% of its limit and freezes in some seconds (60% of periods throttled)
    // is a service that stalls, not a batch job (promtool row 3).
    cpuBoundThrottledPeriodsRatio: 0.9,
    // Workloads that are CPU-bound by design and should not be told so (QuotaCPUAtLimit), e.g.
    // 'namespace=~"batch|etl"' or 'container=~".*-job"' (labels of the exporter's cgroup series).
    // '' (default): none; every cgroup at its limit gets QuotaCPUAtLimit (info).
    batchWorkloadSelector: '',
    // A frozen window: one window of the exporter's throttling sampler (--throttle.window, 1 s
    // by default) in which more than 90% of the CFS periods were throttled. The thresholds count
    // windows, i.e. seconds at the default window (scale them with a longer one). One 3 s freeze
    // per minute is 30 frozen windows per 10 minutes; steady 20% throttling has none.
    frozenSecondsPer10m: 10,
    // "The cgroup is being throttled" when blaming a runtime's parallelism: one period in 20.
    // A JVM with 18 GC threads and a 250 MB live set at 0.5 cores is throttled in 5-7% of its
    // periods, every one of them in a GC burst (issue 25); with the levels no longer summed a
    // tenth would miss it.
    throttledPeriodsRatioForCause: 0.05,
    frozenSecondsForCause: 3,  // or: this many frozen windows in 10 minutes
    gcThreadsPerLimitCore: 2,  // parallel GC threads per core of CPU limit
    goMaxProcsPerLimitCore: 2,  // GOMAXPROCS per core of CPU limit (and more than Go's minimum of 2)
    goSTWPauseP99Seconds: 0.01,  // p99 Go stop-the-world pause over 10m (--collector.gopause)
    safepointSecondsPerSecond: 0.05,  // share of wall time in safepoints
    safepointSyncSecondsPerSecond: 0.01,  // or share of wall time reaching safepoints (time-to-safepoint)
    safepointSyncSecondsMean: 0.02,  // or mean time-to-safepoint per safepoint, seconds
    safepointThrottledPeriodsRatio: 0.25,  // while throttled in at least this share of periods
    mallocArenasPerLimitCore: 4,  // glibc arenas per core of CPU limit
    mallocArenasWithoutLimit: 16,  // arenas of a process without a CPU limit (glibc allows 8 per host CPU)
    mallocArenaResidentShare: 0.3,  // share of RSS resident in non-main arena heaps
    memoryNearLimitRatio: 0.9,  // working set / memory limit
    systemCPUShare: 0.5,  // system time / all CPU time of a cgroup
    systemCPUThrottledPeriodsRatio: 0.25,
    systemCPUMinCores: 0.1,  // ignore idle cgroups

    // `for` durations.
    warmupFor: '2m',
    stallsFor: '5m',
    cpuAtLimitFor: '15m',
    gcThreadsFor: '10m',
    goMaxProcsFor: '15m',
    goSTWFor: '5m',
    safepointFor: '10m',
    memoryCreepFor: '30m',
    arenaBloatFor: '30m',
    memoryNearLimitFor: '15m',
    systemCPUFor: '15m',
    exporterDownFor: '5m',
    exporterMissingFor: '15m',
    collectorFailedFor: '15m',
    oomKilledWindow: '10m',  // how long QuotaContainerOOMKilled stays firing after a kill

    severities: {
      warmup: 'warning',
      stalls: 'warning',
      // A workload at its CPU limit for long: a batch job by design, or a service that needs a
      // larger limit. Not a page by default; 'warning' for fleets where no workload should be.
      cpuAtLimit: 'info',
      gcThreads: 'warning',
      goMaxProcs: 'warning',
      goSTW: 'warning',
      safepoint: 'warning',
      memoryCreep: 'warning',
      arenaBloat: 'info',
      memoryNearLimit: 'warning',
      oomKilled: 'warning',
      systemCPU: 'info',
      exporterDown: 'warning',
      exporterMissing: 'warning',
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
    // Same exporter (node) and pod: a pod slice and its containers.
    podJoinLabels:: self.clusterLabels + ['job', 'instance', 'pod_uid'],
    // Node-level cgroups of the kubelet (/kubepods.slice, QoS slices, k3s' nested roots, and
    // under a cgroupRoot with the systemd driver, kind's /kubelet.slice/kubelet-kubepods.slice):
    // never alerted on; their pods and containers are.
    nodeSliceMatcher:: @'cgroup!~"(.*/)?([^/]*-)?kubepods(\\.slice)?(/[^/]*(burstable|besteffort)[^/]*)?"',
  },
}
