// Package history fills diagnose's workload model from the exporter's series stored in a
// Prometheus, for a problem that is not happening now. It asks Prometheus for each series of
// diagnose's table (package series) that history can judge (counters as increase over the
// window, gauges as their maximum, info series as their last value), turns the answers into
// the metric families one gather would give, and hands them to the same adapter and rules as
// the live mode.
package history

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"

	"github.com/quota-exporter/quota_exporter/exporter/internal/diagnose"
	"github.com/quota-exporter/quota_exporter/exporter/internal/diagnose/series"
)

// Options select what to read.
type Options struct {
	URL string
	// Selector restricts every series, e.g. `instance="node1:10137"` (one node's exporter:
	// cgroup paths repeat across nodes).
	Selector string
	Since    time.Duration
	At       time.Time
	// WarmupPeriod: a process younger than this is warming up; its first minutes are
	// compared with the rest of the span (0: no warm-up judgement).
	WarmupPeriod time.Duration
	// HTTPConfigFile is a prometheus/common HTTP client configuration (TLS, auth); "" for
	// plain HTTP.
	HTTPConfigFile string
	// Timeout bounds the whole load (every query); 0 for none.
	Timeout time.Duration
	// MaxResponseBytes bounds each response; 0 for DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// Load queries Prometheus and returns the workloads of the span [At-Since, At].
func Load(ctx context.Context, o Options) ([]diagnose.Workload, error) {
	client, err := newClient(o)
	if err != nil {
		return nil, err
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	q := v1.NewAPI(client)
	rng := model.Duration(o.Since).String()
	sel := "{" + o.Selector + "}"
	var fams []*dto.MetricFamily
	for _, m := range series.Table {
		if m.Modes&series.History == 0 {
			continue
		}
		var (
			mf  *dto.MetricFamily
			err error
		)
		switch m.Kind {
		case series.Histogram:
			mf, err = windows(ctx, q, m.Name, sel, rng, o.At)
		default:
			mf, err = summary(ctx, q, m, sel, rng, o.At)
		}
		if err != nil {
			return nil, err
		}
		fams = append(fams, mf)
	}
	ws := diagnose.FromFamilies(nil, fams, diagnose.Observation{Span: o.Since, End: o.At})
	if err := warmups(ctx, q, o, sel, ws); err != nil {
		return nil, err
	}
	return ws, nil
}

// summary is one metric over the span as one gather would show it: a counter's increase,
// a gauge's maximum, an info series' last value.
func summary(ctx context.Context, q v1.API, m series.Metric, sel, rng string, at time.Time) (*dto.MetricFamily, error) {
	fn := map[series.Kind]string{series.Counter: "increase", series.Gauge: "max_over_time", series.Info: "last_over_time"}[m.Kind]
	vec, err := query(ctx, q, fmt.Sprintf("%s(%s%s[%s])", fn, m.Name, sel, rng), at)
	if err != nil {
		return nil, err
	}
	return family(m.Name, m.Kind, vec), nil
}

func query(ctx context.Context, q v1.API, expr string, at time.Time) (model.Vector, error) {
	v, _, err := q.Query(ctx, expr, at)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %s: %s result, want a vector", expr, v.Type())
	}
	return vec, nil
}

func labels(m model.Metric) []*dto.LabelPair {
	var ls []*dto.LabelPair
	for k, v := range m {
		if k == model.MetricNameLabel {
			continue
		}
		ls = append(ls, &dto.LabelPair{Name: ptr(string(k)), Value: ptr(string(v))})
	}
	return ls
}

func family(name string, k series.Kind, vec model.Vector) *dto.MetricFamily {
	mf := &dto.MetricFamily{Name: ptr(name)}
	for _, s := range vec {
		m := &dto.Metric{Label: labels(s.Metric)}
		v := float64(s.Value)
		if k == series.Counter {
			m.Counter = &dto.Counter{Value: &v}
		} else {
			m.Gauge = &dto.Gauge{Value: &v}
		}
		mf.Metric = append(mf.Metric, m)
	}
	return mf
}

// windows rebuilds the sampler's throttled-window histogram's increase per cgroup: count and
// the lowest bucket stored (le="0" with --throttle.full-histograms, else le="0.5", which
// counts windows with at most half the periods throttled as unthrottled).
func windows(ctx context.Context, q v1.API, name, sel, rng string, at time.Time) (*dto.MetricFamily, error) {
	mf := &dto.MetricFamily{Name: ptr(name)}
	counts, err := query(ctx, q, fmt.Sprintf("increase(%s_count%s[%s])", name, sel, rng), at)
	if err != nil {
		return nil, err
	}
	low := map[string]float64{}
	for _, le := range []string{"0.5", "0"} { // le="0" wins when stored
		inner := strings.TrimSuffix(strings.TrimPrefix(sel, "{"), "}")
		if inner != "" {
			inner += ","
		}
		vec, err := query(ctx, q, fmt.Sprintf(`increase(%s_bucket{%sle=%q}[%s])`, name, inner, le, rng), at)
		if err != nil {
			return nil, err
		}
		for _, s := range vec {
			delete(s.Metric, "le")
			low[s.Metric.String()] = float64(s.Value)
		}
	}
	for _, s := range counts {
		n := uint64(float64(s.Value) + 0.5)
		b := uint64(low[s.Metric.String()] + 0.5)
		m := &dto.Metric{Label: labels(s.Metric), Histogram: &dto.Histogram{SampleCount: &n,
			Bucket: []*dto.Bucket{{UpperBound: ptr(0.0), CumulativeCount: &b}}}}
		mf.Metric = append(mf.Metric, m)
	}
	return mf, nil
}

func ptr[T any](v T) *T { return &v }
