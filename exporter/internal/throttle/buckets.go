//go:build linux

package throttle

import "time"

// Bucket bounds. Ratio buckets are fixed; seconds buckets scale with the window (they are
// for a 1 s window; throttled time is summed over CPUs, so it can exceed the window).
var (
	RatioBuckets   = []float64{0, 0.1, 0.25, 0.5, 0.75, 0.9, 1}
	secondsBuckets = []float64{0, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

func scaled(bounds []float64, window time.Duration) []float64 {
	out := make([]float64, len(bounds))
	for i, b := range bounds {
		out[i] = b * window.Seconds()
	}
	return out
}
