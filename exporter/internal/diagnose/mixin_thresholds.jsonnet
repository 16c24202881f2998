// The mixin's thresholds that diagnose shares or deliberately departs from (thresholds.go),
// rendered into mixin_thresholds.json by `make mixin` (go generate ./exporter/internal/diagnose/).
// TestMixinThresholdsRendered fails when the JSON is stale.
local c = (import '../../../quota-exporter-mixin/config.libsonnet')._config;

{
  // Shared: diagnose's rules use these values.
  warmupPeriod: c.warmupPeriod,
  warmupThrottledPeriodsRatio: c.warmupThrottledPeriodsRatio,
  systemCPUShare: c.systemCPUShare,
  systemCPUMinCores: c.systemCPUMinCores,
  systemCPUThrottledPeriodsRatio: c.systemCPUThrottledPeriodsRatio,
  mallocArenasPerLimitCore: c.mallocArenasPerLimitCore,
  // Departed from (stricter in diagnose); TestThresholdsAgainstMixin checks the direction.
  gcThreadsPerLimitCore: c.gcThreadsPerLimitCore,
  goMaxProcsPerLimitCore: c.goMaxProcsPerLimitCore,
  memoryNearLimitRatio: c.memoryNearLimitRatio,
}
