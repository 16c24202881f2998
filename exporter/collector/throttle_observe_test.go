//go:build linux

package collector

import (
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
	"github.com/quota-exporter/quota_exporter/exporter/internal/throttle"
)

// TestThrottleSamplerObserve: NewThrottleSampler hands every window it closes to observe,
// with the cgroup's path, in the histogram's place: as many windows as the histogram
// counts, throttled ones among them for a busy loop in a 0.1-core quota.
func TestThrottleSamplerObserve(t *testing.T) {
	cg := testutil.NewTopCgroup(t, "observe", testutil.CgroupOptions{QuotaUS: 10000, PeriodUS: 100000})
	env, err := NewEnv(Config{ProcPath: "/proc", SysPath: "/sys", ThrottleWindow: 200 * time.Millisecond,
		CgroupInclude: regexp.MustCompile("^" + regexp.QuoteMeta(cg.Path) + "$")}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	burn := cg.Command("sh", "-c", "while :; do :; done")
	if err := burn.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = burn.Process.Kill(); _ = burn.Wait() }()

	var (
		mu        sync.Mutex
		windows   int
		throttled int
		paths     = map[string]bool{}
	)
	s := NewThrottleSampler(env, func(cgroup string, ratio float64) {
		mu.Lock()
		defer mu.Unlock()
		paths[cgroup] = true
		windows++
		if ratio > 0 {
			throttled++
		}
	})
	defer s.Close()
	time.Sleep(2 * time.Second)
	// observe runs under the sampler's lock: holding it, both counts are of the same windows.
	c := s.(*throttleCollector)
	var count uint64
	c.sampler.Read(func(st throttle.State) {
		for _, ser := range st.Series {
			count += ser.Ratio.Count
		}
		mu.Lock()
	})
	defer mu.Unlock()
	if windows == 0 || uint64(windows) != count || len(paths) != 1 || !paths[cg.Path] {
		t.Errorf("observed %d windows of %v, the histograms count %d, want them all for %s", windows, paths, count, cg.Path)
	}
	if throttled == 0 {
		t.Errorf("no throttled window of %d for a busy loop in a 0.1-core quota", windows)
	}
}
