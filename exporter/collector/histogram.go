//go:build linux

package collector

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/histogram"
)

// histogramMetric exports h with the bounds in export (nil: all of them; each must be one
// of its bounds), on the cgroup's shared label pairs (no per-series MakeLabelPairs).
func histogramMetric(h *histogram.Histogram, d *prometheus.Desc, pairs []*dto.LabelPair, export []float64) prometheus.Metric {
	n := len(h.Bounds)
	if export != nil {
		n = len(export)
	}
	buckets := make([]*dto.Bucket, 0, n)
	bs := make([]dto.Bucket, n) // one allocation for all buckets
	upper := make([]float64, n)
	cums := make([]uint64, n)
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		if export == nil || slices.Contains(export, b) {
			j := len(buckets)
			upper[j], cums[j] = b, cum
			bs[j] = dto.Bucket{UpperBound: &upper[j], CumulativeCount: &cums[j]}
			buckets = append(buckets, &bs[j])
		}
	}
	count, sum := h.Count, h.Sum
	return &sharedLabelsMetric{desc: d, pairs: pairs, histogram: &dto.Histogram{SampleCount: &count, SampleSum: &sum, Bucket: buckets}}
}

// histogramUnits is what a histogram built by metric counts against the series budget: its
// series in the exposition (its buckets, the +Inf bucket, the sum and the count), each as
// long as its label values make it (budget.SeriesUnits).
func histogramUnits(m prometheus.Metric) int {
	h, ok := m.(*sharedLabelsMetric)
	if !ok || h.histogram == nil {
		return 1
	}
	n := 0
	for _, lp := range h.pairs {
		n += len(lp.GetValue())
	}
	return (len(h.histogram.Bucket) + 3) * budget.SeriesUnits(n)
}
