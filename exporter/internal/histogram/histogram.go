// Package histogram is the cumulative histogram the exporter's background observers keep
// (the throttling sampler's windows, CFS stalls, Go pauses): bounds fixed at creation,
// counts per bucket, no locking (its owner's lock guards it). The collectors export it.
package histogram

// Histogram counts observations per bucket.
type Histogram struct {
	Bounds []float64
	Counts []uint64 // per bucket, not cumulative
	Count  uint64
	Sum    float64
}

// New returns an empty histogram with these upper bounds (ascending; +Inf implied).
func New(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds))}
}

// Observe counts v in the first bucket whose bound is at least v (none: +Inf only).
func (h *Histogram) Observe(v float64) {
	h.Count++
	h.Sum += v
	for i, b := range h.Bounds {
		if v <= b {
			h.Counts[i]++
			return
		}
	}
}
