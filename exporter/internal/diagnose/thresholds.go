package diagnose

import (
	_ "embed"
	"encoding/json"
	"time"

	"github.com/prometheus/common/model"
)

//go:generate go tool -modfile=../../../tools/go.mod jsonnet -o mixin_thresholds.json mixin_thresholds.jsonnet

// mixinJSON holds the mixin's default thresholds (quota-exporter-mixin/config.libsonnet)
// that the rules share, rendered by go generate: one source for the alerts and diagnose.
// TestMixinThresholdsRendered fails when it is stale.
//
//go:embed mixin_thresholds.json
var mixinJSON []byte

// mixinConfig is the part of the mixin's _config that diagnose reads (same key names).
type mixinConfig struct {
	WarmupPeriod                   model.Duration `json:"warmupPeriod"`
	WarmupThrottledPeriodsRatio    float64        `json:"warmupThrottledPeriodsRatio"`
	SystemCPUShare                 float64        `json:"systemCPUShare"`
	SystemCPUMinCores              float64        `json:"systemCPUMinCores"`
	SystemCPUThrottledPeriodsRatio float64        `json:"systemCPUThrottledPeriodsRatio"`
	MallocArenasPerLimitCore       int            `json:"mallocArenasPerLimitCore"`
	// Thresholds diagnose departs from (rules.go says why); read for the test of direction.
	GCThreadsPerLimitCore  float64 `json:"gcThreadsPerLimitCore"`
	GoMaxProcsPerLimitCore float64 `json:"goMaxProcsPerLimitCore"`
	MemoryNearLimitRatio   float64 `json:"memoryNearLimitRatio"`
}

// mixin is read once; the embedded file is the repository's own, so a failure is a build
// defect (and fails every test).
var mixin = func() mixinConfig {
	var c mixinConfig
	if err := json.Unmarshal(mixinJSON, &c); err != nil {
		panic("diagnose: mixin_thresholds.json: " + err.Error())
	}
	return c
}()

// DefaultWarmupPeriod is how long after its start a process counts as warming up (JIT,
// class loading, cache fill): the mixin's warmupPeriod, and --warmup.period's default.
var DefaultWarmupPeriod = time.Duration(mixin.WarmupPeriod)
