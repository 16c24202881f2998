package precision

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Series is one promtool input series: a selector and its values, one per step ("_" where
// the recording has no sample).
type Series struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// ToSeries turns a recording into promtool input series at the recording's scrape interval:
// each scrape's samples go to the step nearest its timestamp (kept in the recording), with
// job="quota-exporter" and the recorded instance, as Prometheus would have stored them, plus
// up=1 for every recorded scrape. It returns the series and the number of steps.
func ToSeries(scrapes []Scrape, m Manifest) ([]Series, int, error) {
	if len(scrapes) == 0 {
		return nil, 0, fmt.Errorf("empty recording")
	}
	interval, err := time.ParseDuration(m.Interval)
	if err != nil {
		return nil, 0, err
	}
	t0 := scrapes[0].At
	steps := int(math.Round(float64(scrapes[len(scrapes)-1].At.Sub(t0))/float64(interval))) + 1
	values := map[string][]string{}
	set := func(key string, step int, v float64) {
		vs, ok := values[key]
		if !ok {
			vs = make([]string, steps)
			values[key] = vs
		}
		vs[step] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	target := map[string]string{"job": "quota-exporter", "instance": m.Instance}
	scraped := make([]bool, steps)
	for _, s := range scrapes {
		step := int(math.Round(float64(s.At.Sub(t0)) / float64(interval)))
		scraped[step] = true
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(bytes.NewReader(s.Body))
		if err != nil {
			return nil, 0, fmt.Errorf("scrape at %s: %w", s.At, err)
		}
		set(selector("up", target, nil), step, 1)
		for name, mf := range mfs {
			for _, mt := range mf.GetMetric() {
				labels := map[string]string{}
				for _, lp := range mt.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				for k, v := range target {
					labels[k] = v
				}
				flatten(name, mf.GetType(), mt, labels, func(n string, extra map[string]string, v float64) {
					set(selector(n, labels, extra), step, v)
				})
			}
		}
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Series, 0, len(keys))
	for _, k := range keys {
		vs := values[k]
		present := false
		for i, v := range vs {
			switch {
			case v != "":
				present = true
			case present && scraped[i]:
				// Gone from a scrape: Prometheus writes a staleness marker, so the old
				// series (a pod's before its names were known, a restarted container's)
				// does not linger for the 5-minute lookback beside the new one.
				vs[i], present = "stale", false
			default:
				vs[i] = "_"
			}
		}
		out = append(out, Series{Series: k, Values: strings.Join(vs, " ")})
	}
	return out, steps, nil
}

// flatten emits a metric's samples as the classic text format names them.
func flatten(name string, t dto.MetricType, m *dto.Metric, labels map[string]string, emit func(string, map[string]string, float64)) {
	switch t {
	case dto.MetricType_COUNTER:
		emit(name, nil, m.GetCounter().GetValue())
	case dto.MetricType_GAUGE:
		emit(name, nil, m.GetGauge().GetValue())
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		for _, b := range h.GetBucket() {
			emit(name+"_bucket", map[string]string{"le": formatLe(b.GetUpperBound())}, float64(b.GetCumulativeCount()))
		}
		emit(name+"_bucket", map[string]string{"le": "+Inf"}, float64(h.GetSampleCount()))
		emit(name+"_sum", nil, h.GetSampleSum())
		emit(name+"_count", nil, float64(h.GetSampleCount()))
	case dto.MetricType_SUMMARY:
		s := m.GetSummary()
		for _, q := range s.GetQuantile() {
			emit(name, map[string]string{"quantile": formatLe(q.GetQuantile())}, q.GetValue())
		}
		emit(name+"_sum", nil, s.GetSampleSum())
		emit(name+"_count", nil, float64(s.GetSampleCount()))
	default:
		emit(name, nil, m.GetUntyped().GetValue())
	}
}

func formatLe(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// selector is name{labels, extra} with sorted, quoted label values.
func selector(name string, labels, extra map[string]string) string {
	all := make([]string, 0, len(labels)+len(extra))
	for k, v := range labels {
		if _, over := extra[k]; !over {
			all = append(all, k+"="+strconv.Quote(v))
		}
	}
	for k, v := range extra {
		all = append(all, k+"="+strconv.Quote(v))
	}
	sort.Strings(all)
	return name + "{" + strings.Join(all, ",") + "}"
}
