package diagnose

import dto "github.com/prometheus/client_model/go"

// Runs follows the per-second sampler's ratio histogram (quota_cpu_throttled_window_ratio,
// full buckets) through gathers more frequent than its windows and keeps, per cgroup, the
// longest run of consecutive throttled windows and of frozen ones (over 90% of the periods
// throttled). The histogram has no order: when one gather sees several new windows, not all
// throttled, the throttled ones are taken as the last (gathers every 250 ms make that rare).
type Runs struct {
	last                  map[string]ratioCounts
	cur, curFrozen        map[string]int
	longest, longestFroze map[string]int
}

type ratioCounts struct{ count, le0, le09 uint64 }

// NewRuns starts with no windows seen.
func NewRuns() *Runs {
	return &Runs{last: map[string]ratioCounts{}, cur: map[string]int{}, curFrozen: map[string]int{},
		longest: map[string]int{}, longestFroze: map[string]int{}}
}

// Observe takes one gather.
func (r *Runs) Observe(mfs []*dto.MetricFamily) {
	for _, mf := range mfs {
		if mf.GetName() != "quota_cpu_throttled_window_ratio" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			cg := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "cgroup" {
					cg = l.GetValue()
				}
			}
			c := ratioCounts{count: h.GetSampleCount()}
			for _, b := range h.GetBucket() {
				switch b.GetUpperBound() {
				case 0:
					c.le0 = b.GetCumulativeCount()
				case 0.9:
					c.le09 = b.GetCumulativeCount()
				}
			}
			prev, seen := r.last[cg]
			r.last[cg] = c
			if !seen || c.count < prev.count || c.le0 < prev.le0 || c.le09 < prev.le09 {
				continue // the first sight of it, or a new cgroup at the same path
			}
			n := int(c.count - prev.count)
			throttled := n - int(c.le0-prev.le0)
			frozen := n - int(c.le09-prev.le09)
			r.cur[cg] = extend(r.cur[cg], n, throttled)
			r.curFrozen[cg] = extend(r.curFrozen[cg], n, frozen)
			r.longest[cg] = max(r.longest[cg], r.cur[cg])
			r.longestFroze[cg] = max(r.longestFroze[cg], r.curFrozen[cg])
		}
	}
}

// extend: the run after n new windows of which hit matched.
func extend(run, n, hit int) int {
	switch {
	case n == 0:
		return run
	case hit == n:
		return run + n
	default:
		return hit // the hits taken as the last ones, after the window that broke the run
	}
}

// Apply sets each workload's longest runs from the cgroup whose limit binds it (where the
// sampler observes the throttling).
func (r *Runs) Apply(ws []Workload) {
	for i := range ws {
		k := ws[i].limitKey()
		ws[i].Pauses.LongestThrottledRun = r.longest[k]
		ws[i].Pauses.LongestFrozenRun = r.longestFroze[k]
	}
}
