//go:build linux

package collector

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/histogram"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// TestRealPodThrottlingCountedOnce is issue 25's measurement as a test: the kubelet's layout
// for a single-container pod (pod and container with the same 0.5-core quota) and a bursty
// service in the container, 2 threads x 40 ms of CPU every 200 ms (80 ms wanted at once
// against 50 ms per period: about half the periods throttled). The kernel throttles both
// levels in the same periods, so the sampler's window ratio must be the worse level's share of
// periods, as each level's own cpu.stat says, and never their sum (which read 0.97 for these
// 50% windows and made every second look frozen).
func TestRealPodThrottlingCountedOnce(t *testing.T) {
	bin := testutil.BuildC(t, filepath.Join("..", "..", "examples", "workloads", "bursty", "bursty.c"), "-O1", "-pthread")
	half := testutil.CgroupOptions{QuotaUS: 50000, PeriodUS: 100000}
	// At the top with 8 times a host process's weight, as a Guaranteed pod has its request's
	// worth of CPU on a node: the quota, not the machine's other work, must limit the bursts.
	pod := testutil.NewTopCgroup(t, "precision-pod", testutil.CgroupOptions{QuotaUS: 50000, PeriodUS: 100000, Shares: 8192})
	ctr := pod.Child("ctr", half)
	env, err := NewEnv(Config{ProcPath: "/proc", SysPath: "/sys", ThrottleWindow: time.Second,
		CgroupInclude: regexp.MustCompile("^" + regexp.QuoteMeta(pod.Path) + "(/.*)?$")}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	// The test drives the sampler window by window, and reads both levels' cpu.stat right
	// after each window's reads: the same periods on both sides.
	thr := newThrottleSampler(env, time.Second, nil)
	defer thr.Close()
	ctx := context.Background()
	thr.sampler.Rediscover(ctx)
	if len(thr.series()) != 2 {
		t.Fatalf("the sampler watches %d cgroups, want the pod and its container", len(thr.series()))
	}

	burst := ctr.Command(bin, "2", "40", "200")
	if err := burst.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, pid := range ctr.PIDs() {
			_ = syscallKill(pid)
		}
		_ = burst.Wait()
	}()
	time.Sleep(1500 * time.Millisecond) // past the start
	thr.sampler.Sample(ctx)             // the first read: counters only, no window yet
	podStart, ctrStart := pod.ReadKeyed("cpu", "cpu.stat"), ctr.ReadKeyed("cpu", "cpu.stat")
	const windows = 12
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range windows {
		<-tick.C
		thr.sampler.Sample(ctx)
	}
	podEnd, ctrEnd := pod.ReadKeyed("cpu", "cpu.stat"), ctr.ReadKeyed("cpu", "cpu.stat")

	share := func(start, end map[string]uint64) float64 {
		if end["nr_periods"] == start["nr_periods"] {
			return 0
		}
		return float64(end["nr_throttled"]-start["nr_throttled"]) / float64(end["nr_periods"]-start["nr_periods"])
	}
	ctrShare, podShare := share(ctrStart, ctrEnd), share(podStart, podEnd)
	worse := max(ctrShare, podShare)
	s := thr.series()[ctr.Path]
	if s == nil || s.Ratio.Count != windows {
		t.Fatalf("container windows observed: %+v, want %d", s, windows)
	}
	mean := s.Ratio.Sum / float64(s.Ratio.Count)
	t.Logf("%d windows: kernel cpu.stat throttled share container %.2f, pod %.2f (sum %.2f); sampler's mean window ratio %.2f, frozen windows (> 0.9) %d",
		windows, ctrShare, podShare, ctrShare+podShare, mean, s.Ratio.Count-cumulative(s.Ratio, 0.9))

	// The workload must have been throttled for the test to say anything: on a machine whose
	// CPUs are taken by other work the bursts stretch and the quota is not reached.
	testutil.Require(t, worse >= 0.2, "the bursty workload was throttled in under 20% of periods (the machine's CPUs are busy elsewhere)")
	const tolerance = 0.1
	if mean < worse-tolerance || mean > worse+tolerance {
		t.Errorf("mean window ratio %.2f, want the worse level's %.2f ± %.2f", mean, worse, tolerance)
	}
	if both := min(1, ctrShare+podShare); both-worse > 0.05 && mean-worse > (both-worse)/2 {
		t.Errorf("mean window ratio %.2f reads the levels' sum %.2f, not the worse level's %.2f", mean, both, worse)
	}
	if frozen := s.Ratio.Count - cumulative(s.Ratio, 0.9); worse < 0.7 && frozen > windows/4 {
		t.Errorf("%d of %d windows frozen (> 90%% throttled) for a workload the kernel throttled in %.0f%% of periods", frozen, windows, 100*worse)
	}
}

// cumulative is the histogram's count of observations at or below bound (one of its bounds).
func cumulative(h histogram.Histogram, bound float64) uint64 {
	var n uint64
	for i, b := range h.Bounds {
		n += h.Counts[i]
		if b == bound {
			return n
		}
	}
	return h.Count
}
