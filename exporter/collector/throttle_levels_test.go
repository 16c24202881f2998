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
// levels in mostly the same periods, so the sampler's window ratio must be each window's worse
// level, as each level's own cpu.stat says, and never their sum (which read 0.97 for these
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
	// The kernel's own counters, read right after each of the sampler's windows: each window's
	// ratio as the worse level's (what the sampler must read) and as the levels' sum (what it
	// must not). The levels often throttle in different periods of a window (each draws its
	// 5 ms runtime slices on its own), so the worse level over the whole run is no bound on
	// the mean of each window's worse level.
	podPrev, ctrPrev := pod.ReadKeyed("cpu", "cpu.stat"), ctr.ReadKeyed("cpu", "cpu.stat")
	podStart, ctrStart := podPrev, ctrPrev
	const windows = 12
	var wantSum, sumSum float64
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range windows {
		<-tick.C
		thr.sampler.Sample(ctx)
		podNow, ctrNow := pod.ReadKeyed("cpu", "cpu.stat"), ctr.ReadKeyed("cpu", "cpu.stat")
		if ctrNow["nr_periods"] > ctrPrev["nr_periods"] {
			dp := max(ctrNow["nr_periods"]-ctrPrev["nr_periods"], podNow["nr_periods"]-podPrev["nr_periods"])
			dtCtr, dtPod := ctrNow["nr_throttled"]-ctrPrev["nr_throttled"], podNow["nr_throttled"]-podPrev["nr_throttled"]
			wantSum += min(1, float64(max(dtCtr, dtPod))/float64(dp))
			sumSum += min(1, float64(dtCtr+dtPod)/float64(dp))
		}
		podPrev, ctrPrev = podNow, ctrNow
	}
	share := func(start, end map[string]uint64) float64 {
		if end["nr_periods"] == start["nr_periods"] {
			return 0
		}
		return float64(end["nr_throttled"]-start["nr_throttled"]) / float64(end["nr_periods"]-start["nr_periods"])
	}
	ctrShare, podShare := share(ctrStart, ctrPrev), share(podStart, podPrev)
	worse := max(ctrShare, podShare)
	want, sum := wantSum/windows, sumSum/windows
	s := thr.series()[ctr.Path]
	if s == nil || s.Ratio.Count != windows {
		t.Fatalf("container windows observed: %+v, want %d", s, windows)
	}
	mean := s.Ratio.Sum / float64(s.Ratio.Count)
	t.Logf("%d windows: kernel cpu.stat throttled share container %.2f, pod %.2f; mean of each window's worse level %.2f, of their sum %.2f; sampler's mean window ratio %.2f, frozen windows (> 0.9) %d",
		windows, ctrShare, podShare, want, sum, mean, s.Ratio.Count-cumulative(s.Ratio, 0.9))

	// The workload must have been throttled for the test to say anything: on a machine whose
	// CPUs are taken by other work the bursts stretch and the quota is not reached.
	testutil.Require(t, worse >= 0.2, "the bursty workload was throttled in under 20% of periods (the machine's CPUs are busy elsewhere)")
	const tolerance = 0.1
	if mean < want-tolerance || mean > want+tolerance {
		t.Errorf("mean window ratio %.2f, want the mean of each window's worse level %.2f ± %.2f", mean, want, tolerance)
	}
	if sum-want > 0.05 && mean-want > (sum-want)/2 {
		t.Errorf("mean window ratio %.2f reads the levels' sum %.2f, not each window's worse level %.2f", mean, sum, want)
	}
	if frozen := s.Ratio.Count - cumulative(s.Ratio, 0.9); want < 0.7 && frozen > windows/4 {
		t.Errorf("%d of %d windows frozen (> 90%% throttled) for a workload the kernel throttled in %.0f%% of periods", frozen, windows, 100*want)
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
