package diagnose

import (
	"sync"

	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// frozenRatio: a window with more than this share of its CFS periods throttled is frozen
// (the mixin's frozen second: its recording rules count the windows above le="0.9").
const frozenRatio = 0.9

// Windows follows the per-window throttling sampler as it closes its windows (live mode:
// collector.NewThrottleSampler calls Observe) and keeps, per cgroup, the windows seen, the
// throttled ones (any period throttled), and the longest runs of consecutive throttled and
// of frozen windows. The sampler gives the windows in order, so the runs are exact.
type Windows struct {
	mu sync.Mutex
	by map[string]*windowCounts
}

type windowCounts struct {
	total, throttled int
	run, frozen      run
}

// run is a streak of consecutive windows that matched, and the longest one.
type run struct{ cur, longest int }

func (r *run) next(hit bool) {
	if !hit {
		r.cur = 0
		return
	}
	r.cur++
	r.longest = max(r.longest, r.cur)
}

// NewWindows starts with no windows seen.
func NewWindows() *Windows { return &Windows{by: map[string]*windowCounts{}} }

// Observe takes one closed window of one cgroup (its path) and the share of the window's
// periods throttled. The sampler's goroutine calls it while Apply may run.
func (w *Windows) Observe(cgroup string, ratio float64) {
	cgroup = tenantstr.Label(cgroup) // as its series' cgroup label, which the workloads carry
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.by[cgroup]
	if c == nil {
		c = &windowCounts{}
		w.by[cgroup] = c
	}
	c.total++
	if ratio > 0 {
		c.throttled++
	}
	c.run.next(ratio > 0)
	c.frozen.next(ratio > frozenRatio)
}

// Apply sets each workload's windows, throttled windows and longest runs from the cgroup
// whose limit binds it (where the sampler observes the throttling).
func (w *Windows) Apply(ws []Workload) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range ws {
		c := w.by[ws[i].bindingOrSelf()]
		if c == nil {
			continue
		}
		ws[i].Windows, ws[i].ThrottledWindows = c.total, c.throttled
		ws[i].Pauses.LongestThrottledRun, ws[i].Pauses.LongestFrozenRun = c.run.longest, c.frozen.longest
	}
}
