package diagnose

import (
	"math"
	"testing"
)

// Windows, in order: clear, throttled, frozen, frozen, throttled, clear, clear, frozen,
// frozen: runs of 4 throttled and 2 frozen windows, 9 windows, 6 throttled.
func TestWindows(t *testing.T) {
	r := NewWindows()
	for _, ratio := range []float64{0, 0.3, 0.95, 1, 0.5, 0, 0, 0.91, 1} {
		r.Observe("/a", ratio)
	}
	r.Observe("/other", 1)
	ws := []Workload{{Cgroup: "/a/c", BindingCgroup: "/a"}, {Cgroup: "/b"}}
	r.Apply(ws)
	if w := ws[0]; w.Windows != 9 || w.ThrottledWindows != 6 {
		t.Errorf("windows %d, throttled %d, want 9, 6", w.Windows, w.ThrottledWindows)
	}
	if p := ws[0].Pauses; p.LongestThrottledRun != 4 || p.LongestFrozenRun != 2 {
		t.Errorf("runs %+v, want 4 throttled, 2 frozen", p)
	}
	if p := ws[1].Pauses; p.LongestThrottledRun != 0 || ws[1].Windows != 0 {
		t.Errorf("unsampled cgroup has runs %+v", p)
	}
}
func TestQuantileAndHighestBucket(t *testing.T) {
	bs := []bucketCount{{0.001, 50}, {0.01, 98}, {0.1, 100}, {posInf, 100}}
	if q := quantile(0.99, bs); q < 0.01 || q > 0.1 {
		t.Errorf("p99 %g, want within (0.01, 0.1]", q)
	}
	if b := highestBucket(bs); b.Low != 0.01 || b.High != 0.1 {
		t.Errorf("highest %+v", b)
	}
	bs[3].count = 101
	if b := highestBucket(bs); b.Low != 0.1 || b.High != 0 {
		t.Errorf("above the last bound: %+v", b)
	}
	if quantile(0.99, nil) != 0 || (highestBucket(nil) != Bucket{}) {
		t.Error("empty histogram")
	}
}

var posInf = math.Inf(1)
