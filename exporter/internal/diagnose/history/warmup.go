package history

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/quota-exporter/quota_exporter/exporter/internal/diagnose"
	"github.com/quota-exporter/quota_exporter/exporter/internal/diagnose/series"
)

// maxPoints bounds a range query's resolution (Prometheus refuses more than 11 000).
const maxPoints = 5000

// warmups splits each process's CPU use, and its binding cgroup's throttling, over the
// window into the steps when the process was younger than the warm-up period (each start
// in the span: every deploy) and the steps after. The counters are read raw over a range
// and differenced step by step here, so the resolution is the step (or the scrape interval),
// not a rate() range; a step is warm-up when the process's age at its end is below the
// window.
func warmups(ctx context.Context, q v1.API, o Options, sel string, ws []diagnose.Workload) error {
	if o.WarmupPeriod <= 0 || o.Since <= 0 {
		return nil
	}
	step := max(time.Second, (o.Since / maxPoints).Round(time.Second))
	// Whole seconds: the points' timestamps (ms) are then exactly start + k·step.
	r := v1.Range{Start: o.At.Add(-o.Since).Truncate(time.Second), End: o.At.Truncate(time.Second), Step: step}
	get := func(expr string) (map[string]map[model.Time]float64, error) {
		v, _, err := q.QueryRange(ctx, expr, r)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", expr, err)
		}
		m, ok := v.(model.Matrix)
		if !ok {
			return nil, fmt.Errorf("query %s: %s result, want a matrix", expr, v.Type())
		}
		out := map[string]map[model.Time]float64{}
		for _, ss := range m {
			k := string(ss.Metric["cgroup"]) + "\xff" + string(ss.Metric["process"])
			pts := map[model.Time]float64{}
			for _, p := range ss.Values {
				pts[p.Timestamp] = float64(p.Value)
			}
			out[k] = pts
		}
		return out, nil
	}
	cpu, err := get(fmt.Sprintf("sum by (cgroup, process) (%s%s)", series.ProcessCPU.Name, sel))
	if err != nil {
		return err
	}
	starts, err := get(fmt.Sprintf("max by (cgroup, process) (%s%s)", series.ProcessStartTime.Name, sel))
	if err != nil {
		return err
	}
	cg := map[string]map[string]map[model.Time]float64{} // metric name → cgroup → points
	for _, m := range []series.Metric{series.ThrottledSeconds, series.ThrottledPeriods, series.CPUPeriods} {
		if cg[m.Name], err = get(fmt.Sprintf("max by (cgroup) (%s%s)", m.Name, sel)); err != nil {
			return err
		}
	}
	for i := range ws {
		w := &ws[i]
		at := w.Cgroup
		if w.BindingCgroup != "" {
			at = w.BindingCgroup
		}
		for j := range w.Processes {
			p := &w.Processes[j]
			k := w.Cgroup + "\xff" + p.Name
			var warm, steady phase
			var pending float64 // seconds of steps since the counters last changed
			for t := r.Start.Add(step); !t.After(r.End); t = t.Add(step) {
				t1, t0 := model.TimeFromUnixNano(t.UnixNano()), model.TimeFromUnixNano(t.Add(-step).UnixNano())
				start, ok := starts[k][t1]
				c, ok1 := delta(cpu[k], t0, t1)
				if !ok || !ok1 {
					continue
				}
				ph := &steady
				if t1.Time().Sub(time.Unix(0, int64(start*1e9))) < o.WarmupPeriod {
					ph = &warm
				}
				ph.seconds += step.Seconds()
				ph.cpu += c
				thr, _ := delta(cg[series.ThrottledSeconds.Name][at+"\xff"], t0, t1)
				tp, _ := delta(cg[series.ThrottledPeriods.Name][at+"\xff"], t0, t1)
				pp, _ := delta(cg[series.CPUPeriods.Name][at+"\xff"], t0, t1)
				ph.throttled += thr
				ph.throttledPeriods += tp
				ph.periods += pp
				// A step without a new scrape shows no change; the next one that does covers both.
				if c == 0 && pp == 0 {
					pending += step.Seconds()
					continue
				}
				if tp > 0 {
					ph.held.add(pending+step.Seconds(), c, thr)
				}
				if pp > 0 && tp >= pinnedShare*pp {
					ph.pinned.add(pending+step.Seconds(), c, thr)
				}
				pending = 0
			}
			if warm.seconds == 0 {
				continue
			}
			// The demand is measured while the limit held the process back: warm-up steps
			// after the JIT has settled (a warm-up shorter than the span) would dilute it,
			// and so would steps throttled now and then by a burst, as a JVM's requests are
			// once its compiler is done. The steps pinned at the limit say it best; then any
			// throttled step; then the whole warm-up.
			used, held := warm.cpu/warm.seconds, warm.throttled/warm.seconds
			if s := warm.pinned; s.seconds > 0 {
				used, held = s.cpu/s.seconds, s.throttled/s.seconds
			} else if s := warm.held; s.seconds > 0 {
				used, held = s.cpu/s.seconds, s.throttled/s.seconds
			}
			wu := &diagnose.WarmupFacts{AgeSeconds: warm.seconds, Cores: used, ThrottledCores: held, ThrottledShare: warm.share()}
			if steady.seconds > 0 {
				wu.Steady, wu.SteadyCores, wu.SteadyThrottledShare = true, steady.cpu/steady.seconds, steady.share()
			}
			p.Warmup = wu
		}
	}
	return nil
}

// pinnedShare: a step in which the binding cgroup was throttled in at least this share of
// its periods was held at the limit for most of it; its usage plus throttled time is the
// demand the limit cut off, not a burst's.
const pinnedShare = 0.5

// phase sums a process's steps in warm-up or after it; held sums the steps in which its
// binding cgroup was throttled, pinned those in which it was throttled in most periods.
type phase struct {
	seconds, cpu, throttled, throttledPeriods, periods float64
	held, pinned                                       steps
}

// steps sums the time, CPU and throttled time of some of a phase's steps.
type steps struct{ seconds, cpu, throttled float64 }

func (s *steps) add(seconds, cpu, throttled float64) {
	s.seconds += seconds
	s.cpu += cpu
	s.throttled += throttled
}

func (p phase) share() float64 {
	if p.periods <= 0 {
		return 0
	}
	return p.throttledPeriods / p.periods
}

// delta is a counter's increase from t0 to t1 (a reset counts from zero); false when
// either point is missing.
func delta(pts map[model.Time]float64, t0, t1 model.Time) (float64, bool) {
	a, ok0 := pts[t0]
	b, ok1 := pts[t1]
	if !ok0 || !ok1 {
		return 0, false
	}
	if b >= a {
		return b - a, true
	}
	return b, true
}
