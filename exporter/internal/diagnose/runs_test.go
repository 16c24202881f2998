package diagnose

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// ratioGather is one gather of the sampler's full ratio histogram for one cgroup.
func ratioGather(cg string, count, le0, le09 uint64) []*dto.MetricFamily {
	return []*dto.MetricFamily{{Name: ptr("quota_cpu_throttled_window_ratio"), Metric: []*dto.Metric{{
		Label: []*dto.LabelPair{{Name: ptr("cgroup"), Value: ptr(cg)}},
		Histogram: &dto.Histogram{SampleCount: ptr(count), Bucket: []*dto.Bucket{
			{UpperBound: ptr(0.0), CumulativeCount: ptr(le0)}, {UpperBound: ptr(0.9), CumulativeCount: ptr(le09)}}},
	}}}}
}

// Windows, in order: clear, throttled, frozen, frozen, (no new window), throttled, clear,
// then two at once (one clear, one frozen), then a frozen one: runs 4 throttled, 2 frozen;
// the pair counts its frozen window last, so the run after it is 2, not more.
func TestRuns(t *testing.T) {
	r := NewRuns()
	seq := []struct{ count, le0, le09 uint64 }{
		{10, 10, 10}, // baseline
		{11, 11, 11}, // clear
		{12, 11, 12}, // throttled
		{13, 11, 12}, // frozen
		{14, 11, 12}, // frozen
		{14, 11, 12}, // a gather within the same window
		{15, 11, 13}, // throttled
		{16, 12, 14}, // clear
		{18, 13, 15}, // clear + frozen
		{19, 13, 15}, // frozen
		{5, 5, 5},    // reset: a new cgroup at the path
	}
	for _, s := range seq {
		r.Observe(ratioGather("/a", s.count, s.le0, s.le09))
	}
	ws := []Workload{{Cgroup: "/a/c", LimitCgroup: "/a"}, {Cgroup: "/b"}}
	r.Apply(ws)
	if p := ws[0].Pauses; p.LongestThrottledRun != 4 || p.LongestFrozenRun != 2 {
		t.Errorf("runs %+v, want 4 throttled, 2 frozen", p)
	}
	if p := ws[1].Pauses; p.LongestThrottledRun != 0 {
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
