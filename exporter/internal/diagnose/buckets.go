package diagnose

import (
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
)

// bucketCount is one cumulative bucket of a histogram's increase over the span.
type bucketCount struct {
	upper float64
	count float64
}

// bucketIncrease: the cumulative buckets of b minus a's (a nil or reset: b's), with +Inf
// (the sample count) last.
func bucketIncrease(a, b *dto.Histogram) []bucketCount {
	if b == nil {
		return nil
	}
	before := map[float64]float64{}
	reset := a == nil || a.GetSampleCount() > b.GetSampleCount()
	if !reset {
		for _, bk := range a.GetBucket() {
			before[bk.GetUpperBound()] = float64(bk.GetCumulativeCount())
		}
		before[math.Inf(1)] = float64(a.GetSampleCount())
	}
	var out []bucketCount
	for _, bk := range b.GetBucket() {
		out = append(out, bucketCount{bk.GetUpperBound(), math.Max(float64(bk.GetCumulativeCount())-before[bk.GetUpperBound()], 0)})
	}
	if len(out) == 0 || !math.IsInf(out[len(out)-1].upper, 1) {
		out = append(out, bucketCount{math.Inf(1), math.Max(float64(b.GetSampleCount())-before[math.Inf(1)], 0)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].upper < out[j].upper })
	return out
}

// addBuckets sums two histograms' increases with the same bounds (a nil one is empty).
func addBuckets(a, b []bucketCount) []bucketCount {
	if a == nil {
		return b
	}
	if len(a) != len(b) {
		return a // different layouts cannot be summed; keep the first
	}
	out := make([]bucketCount, len(a))
	for i := range a {
		out[i] = bucketCount{a[i].upper, a[i].count + b[i].count}
	}
	return out
}

// highestBucket is the bounds of the highest bucket that gained an observation: where the
// longest one fell. Above the last finite bound High is 0 (unbounded).
func highestBucket(bs []bucketCount) Bucket {
	for i := len(bs) - 1; i >= 0; i-- {
		prev := 0.0
		if i > 0 {
			prev = bs[i-1].count
		}
		if bs[i].count > prev {
			low := 0.0
			if i > 0 {
				low = bs[i-1].upper
			}
			if math.IsInf(bs[i].upper, 1) {
				return Bucket{Low: low}
			}
			return Bucket{Low: low, High: bs[i].upper}
		}
	}
	return Bucket{}
}

// quantile estimates the q-quantile from cumulative buckets, interpolating linearly inside a
// bucket as Prometheus's histogram_quantile does (hand-written: client_golang has no
// estimator for client-side buckets); 0 without observations.
func quantile(q float64, bs []bucketCount) float64 {
	if len(bs) == 0 || bs[len(bs)-1].count == 0 {
		return 0
	}
	rank := q * bs[len(bs)-1].count
	for i, b := range bs {
		if b.count < rank {
			continue
		}
		low, below := 0.0, 0.0
		if i > 0 {
			low, below = bs[i-1].upper, bs[i-1].count
		}
		if math.IsInf(b.upper, 1) {
			return low // above the last bound: the last bound, as histogram_quantile
		}
		if b.count == below {
			return b.upper
		}
		return low + (b.upper-low)*(rank-below)/(b.count-below)
	}
	return bs[len(bs)-1].upper
}
