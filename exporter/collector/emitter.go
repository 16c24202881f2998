//go:build linux

package collector

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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

func (e emitter) gauge(d *prometheus.Desc, v float64, extra ...string) {
	if pairs, ok := e.pairsWith(d, extra); ok {
		e.ch <- &sharedLabelsMetric{desc: d, pairs: pairs, gauge: &dto.Gauge{Value: &v}}
		return
	}
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, e.with(extra)...)
}

func (e emitter) counter(d *prometheus.Desc, v float64, extra ...string) {
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
	dl := labelsOf(d, len(e.names)+len(extra))
	if dl == nil || !slices.Equal(dl.names[:len(e.names)], e.names) {
		return nil, false
	}
	pairs := make([]*dto.LabelPair, 0, len(e.pairs)+len(dl.consts)+len(extra))
	pairs = append(append(pairs, e.pairs...), dl.consts...)
	values := make([]string, len(extra)) // one allocation for the values' addresses
	for i, v := range extra {
		if values[i] = tenantstr.Label(v); values[i] != "" {
			pairs = append(pairs, &dto.LabelPair{Name: &dl.names[len(e.names)+i], Value: &values[i]})
		}
	}
	slices.SortFunc(pairs, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	return pairs, true
}

// descLabels are a descriptor's variable label names in order, and its constant pairs.
type descLabels struct {
	names  []string
	consts []*dto.LabelPair
}

// descLabelCache maps a *prometheus.Desc to its *descLabels (nil: not learnable).
var descLabelCache sync.Map

// labelsOf learns d's variable label names once: prometheus.Desc does not expose them, so
// it writes a metric with n numbered placeholder values and reads back which name got
// which. nil when d does not take n values.
func labelsOf(d *prometheus.Desc, n int) *descLabels {
	if v, ok := descLabelCache.Load(d); ok {
		return v.(*descLabels)
	}
	var dl *descLabels
	placeholders := make([]string, n)
	for i := range placeholders {
		placeholders[i] = "\x00" + strconv.Itoa(i)
	}
	var out dto.Metric
	if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, 0, placeholders...); err == nil && m.Write(&out) == nil {
		dl = &descLabels{names: make([]string, n)}
		found := 0
		for _, lp := range out.Label {
			if i, err := strconv.Atoi(strings.TrimPrefix(lp.GetValue(), "\x00")); err == nil && strings.HasPrefix(lp.GetValue(), "\x00") && i < n {
				dl.names[i] = lp.GetName()
				found++
			} else {
				dl.consts = append(dl.consts, lp)
			}
		}
		if found != n {
			dl = nil
		}
	}
	v, _ := descLabelCache.LoadOrStore(d, dl)
	return v.(*descLabels)
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
