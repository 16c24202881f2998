//go:build linux

package collector

import (
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// emitter sends the metrics of one cgroup or process. The label pairs of its identity are
// built once and shared by all its series without extra labels: building them per series
// (MustNewConstMetric) was the largest share of a scrape's allocations.
type emitter struct {
	ch     chan<- prometheus.Metric
	labels []string
	pairs  []*dto.LabelPair // labels sorted by name, as client_golang writes them
}

func newEmitter(ch chan<- prometheus.Metric, names, values []string) emitter {
	pairs := make([]*dto.LabelPair, 0, len(names))
	for i := range names {
		if values[i] != "" { // Prometheus treats an empty label as absent: do not send it
			pairs = append(pairs, &dto.LabelPair{Name: &names[i], Value: &values[i]})
		}
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].GetName() < pairs[j].GetName() })
	return emitter{ch: ch, labels: values, pairs: pairs}
}

func (e emitter) gauge(d *prometheus.Desc, v float64, extra ...string) {
	if len(extra) == 0 {
		e.ch <- &sharedLabelsMetric{desc: d, pairs: e.pairs, gauge: &dto.Gauge{Value: &v}}
		return
	}
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, e.with(extra)...)
}

func (e emitter) counter(d *prometheus.Desc, v float64, extra ...string) {
	if len(extra) == 0 {
		e.ch <- &sharedLabelsMetric{desc: d, pairs: e.pairs, counter: &dto.Counter{Value: &v}}
		return
	}
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, e.with(extra)...)
}

// with appends extra label values, made valid UTF-8 (a JVM's version string comes from its
// perf data, which may be torn).
func (e emitter) with(extra []string) []string {
	out := append(append(make([]string, 0, len(e.labels)+len(extra)), e.labels...), extra...)
	for i := len(e.labels); i < len(out); i++ {
		out[i] = strings.ToValidUTF8(out[i], "\uFFFD")
	}
	return out
}

// sharedLabelsMetric is a const gauge or counter whose label pairs are shared, read-only,
// with the other series of the same cgroup or process.
type sharedLabelsMetric struct {
	desc    *prometheus.Desc
	pairs   []*dto.LabelPair
	gauge   *dto.Gauge
	counter *dto.Counter
}

func (m *sharedLabelsMetric) Desc() *prometheus.Desc { return m.desc }

func (m *sharedLabelsMetric) Write(out *dto.Metric) error {
	out.Label, out.Gauge, out.Counter = m.pairs, m.gauge, m.counter
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
