//go:build linux

package collector

import (
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// emitter sends the metrics of one cgroup or process. The label pairs of its identity are
// built once and shared by all its series without extra labels: building them per series
// (MustNewConstMetric) was the largest share of a scrape's allocations.
type emitter struct {
	ch     chan<- prometheus.Metric
	names  []string
	labels []string
	pairs  []*dto.LabelPair // labels sorted by name, as client_golang writes them
	// quota is the series budget of the cgroup's or process's tenant in this scrape: a series
	// beyond it is not sent (nil: no bound). labelBytes are its shared label values' bytes.
	quota      *budget.Quota
	labelBytes int
}

func newEmitter(ch chan<- prometheus.Metric, names, values []string) emitter {
	pairs := make([]*dto.LabelPair, 0, len(names))
	for i := range names {
		if values[i] != "" { // Prometheus treats an empty label as absent: do not send it
			pairs = append(pairs, &dto.LabelPair{Name: &names[i], Value: &values[i]})
		}
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].GetName() < pairs[j].GetName() })
	return emitter{ch: ch, names: names, labels: values, pairs: pairs}
}

// metered returns e sending within the series budget of the scrape (ctx's meter) for cg's
// tenant.
func (e emitter) metered(meter *budget.Meter, cg cgroupid.Cgroup) emitter {
	e.quota = meter.For(cg)
	for _, v := range e.labels {
		e.labelBytes += len(v)
	}
	return e
}

// take takes one series with extra label values from the quota.
func (e emitter) take(extra []string) bool {
	if e.quota == nil {
		return true
	}
	n := e.labelBytes
	for _, v := range extra {
		n += len(v)
	}
	return e.quota.Take(n)
}

func (e emitter) gauge(d *prometheus.Desc, v float64, extra ...string) {
	if !e.take(extra) {
		return
	}
	if pairs, ok := e.pairsWith(d, extra); ok {
		e.ch <- &sharedLabelsMetric{desc: d, pairs: pairs, gauge: &dto.Gauge{Value: &v}}
		return
	}
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, e.with(extra)...)
}

func (e emitter) counter(d *prometheus.Desc, v float64, extra ...string) {
	if !e.take(extra) {
		return
	}
	if pairs, ok := e.pairsWith(d, extra); ok {
		e.ch <- &sharedLabelsMetric{desc: d, pairs: pairs, counter: &dto.Counter{Value: &v}}
		return
	}
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, e.with(extra)...)
}

// pairsWith returns the shared pairs plus the extra labels' (a mode, a binding cgroup),
// sorted, without client_golang's MakeLabelPairs, which rebuilds every pair of every
// series (a fifth of a scrape's allocated bytes). ok is false when d's variable labels are
// not the emitter's followed by the extras: the caller then takes the checked path.
func (e emitter) pairsWith(d *prometheus.Desc, extra []string) ([]*dto.LabelPair, bool) {
	if len(extra) == 0 {
		return e.pairs, true
	}
	names := descLabels[d]
	if len(names) != len(e.names)+len(extra) || !slices.Equal(names[:len(e.names)], e.names) {
		return nil, false
	}
	pairs := make([]*dto.LabelPair, 0, len(e.pairs)+len(extra))
	pairs = append(pairs, e.pairs...)
	values := make([]string, len(extra)) // one allocation for the values' addresses
	for i, v := range extra {
		if values[i] = tenantstr.Label(v); values[i] != "" {
			pairs = append(pairs, &dto.LabelPair{Name: &names[len(e.names)+i], Value: &values[i]})
		}
	}
	slices.SortFunc(pairs, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return pairs, true
}

// with appends extra label values, made valid UTF-8 (a JVM's version string comes from its
// perf data, which may be torn).
func (e emitter) with(extra []string) []string {
	out := append(append(make([]string, 0, len(e.labels)+len(extra)), e.labels...), extra...)
	for i := len(e.labels); i < len(out); i++ {
		out[i] = tenantstr.Label(out[i])
	}
	return out
}

// sharedLabelsMetric is a const gauge, counter or histogram whose label pairs are shared, read-only,
// with the other series of the same cgroup or process.
type sharedLabelsMetric struct {
	desc      *prometheus.Desc
	pairs     []*dto.LabelPair
	gauge     *dto.Gauge
	counter   *dto.Counter
	histogram *dto.Histogram
}

func (m *sharedLabelsMetric) Desc() *prometheus.Desc { return m.desc }

func (m *sharedLabelsMetric) Write(out *dto.Metric) error {
	out.Label, out.Gauge, out.Counter, out.Histogram = m.pairs, m.gauge, m.counter, m.histogram
	return nil
}

// withoutEmptyLabels drops empty-valued label pairs from a metric built by client_golang
// (which writes every variable label): Prometheus treats them as absent, and on every series
// they only made the response bigger. The emitter's shared pairs never hold empty values.
func withoutEmptyLabels(m prometheus.Metric) prometheus.Metric {
	if _, ok := m.(*sharedLabelsMetric); ok {
		return m
	}
	return noEmptyLabels{m}
}

type noEmptyLabels struct{ prometheus.Metric }

func (m noEmptyLabels) Write(out *dto.Metric) error {
	if err := m.Metric.Write(out); err != nil {
		return err
	}
	for i, lp := range out.Label {
		if lp.GetValue() == "" {
			// Copy: the pairs may be shared with other metrics.
			kept := append(make([]*dto.LabelPair, 0, len(out.Label)-1), out.Label[:i]...)
			for _, lp := range out.Label[i+1:] {
				if lp.GetValue() != "" {
					kept = append(kept, lp)
				}
			}
			out.Label = kept
			break
		}
	}
	return nil
}
