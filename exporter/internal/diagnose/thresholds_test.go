package diagnose

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestMixinThresholdsRendered: mixin_thresholds.json is what the pinned jsonnet renders from
// the mixin's config now (go generate ./exporter/internal/diagnose/ rewrites it).
func TestMixinThresholdsRendered(t *testing.T) {
	cmd := exec.Command("go", "tool", "-modfile="+filepath.Join("..", "..", "..", "tools", "go.mod"), "jsonnet", "mixin_thresholds.jsonnet")
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("jsonnet: %v", err)
	}
	got, err := os.ReadFile("mixin_thresholds.json")
	if err != nil || !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		t.Errorf("mixin_thresholds.json is stale (go generate ./exporter/internal/diagnose/): have\n%s\nwant\n%s", got, want)
	}
	if DefaultWarmupPeriod <= 0 || warmupCriticalShare <= 0 || systemShare <= 0 || arenasPerLimitCPU <= 0 {
		t.Errorf("thresholds not read: %+v", mixin)
	}
}

// TestThresholdsAgainstMixin: where diagnose departs from the mixin, it is stricter: a JVM
// or Go program the mixin's alert fires for gets diagnose's finding at every limit, and
// diagnose's warnings start at or below the alerts' thresholds.
func TestThresholdsAgainstMixin(t *testing.T) {
	for _, limit := range []float64{0.1, 0.3, 0.5, 0.9, 1, 1.2, 1.5, 2, 2.5, 3.7, 4, 8} {
		// QuotaJVMGCThreadsExceedCPULimit: parallel GC threads > 1 and > gcThreadsPerLimitCore × limit.
		gc := max(2, int(math.Floor(mixin.GCThreadsPerLimitCore*limit))+1)
		if _, ok := jvmThreads(ptr(workload(limit, 0)), jvmProc(gc, gc, 1, 1, "G1")); !ok {
			t.Errorf("limit %g: the mixin alerts on %d GC threads, diagnose has no finding", limit, gc)
		}
		// QuotaGoMaxProcsExceedsCPULimit: GOMAXPROCS > 2 and > goMaxProcsPerLimitCore × limit.
		procs := max(3, int(math.Floor(mixin.GoMaxProcsPerLimitCore*limit))+1)
		if _, ok := goMaxProcs(ptr(workload(limit, 0)), goProc(procs, false)); !ok {
			t.Errorf("limit %g: the mixin alerts on GOMAXPROCS=%d, diagnose has no finding", limit, procs)
		}
	}
	if memoryCriticalShare > mixin.MemoryNearLimitRatio {
		t.Errorf("arena finding critical from %g of the memory limit, after the mixin's memoryNearLimitRatio %g", memoryCriticalShare, mixin.MemoryNearLimitRatio)
	}
	if warmupThrottledShare > warmupCriticalShare {
		t.Errorf("warm-up warning from %g, above the mixin's warmupThrottledPeriodsRatio %g", warmupThrottledShare, warmupCriticalShare)
	}
}
