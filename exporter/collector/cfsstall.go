//go:build linux

package collector

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cfsstall"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/histogram"
)

func init() {
	register("cfsstall", false, "length of every CFS bandwidth stall per cgroup, from a BPF program on the kernel's throttle and unthrottle paths "+
		"(needs CAP_BPF and CAP_PERFMON and a kernel with BTF; reports why once and exports nothing where it cannot attach)",
		newCfsStallCollector, stallSecondsDesc, stallLostDesc, stallAvailableDesc)
}

// stallBuckets: from a 1 ms stall (a nearly-unthrottled period) to 2 s (a multi-period
// freeze, as in the LinkedIn report's 3 s one).
var stallBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2}

var (
	stallSecondsDesc = newCgroupDesc("cpu_throttle_stall_seconds",
		"Length of each CFS bandwidth stall of the cgroup whose quota ran out: from the first of its per-CPU run queues being throttled "+
			"to the last one being unthrottled, so a freeze on several CPUs at once counts once (unlike quota_cpu_throttled_seconds_total, "+
			"which sums the CPUs). Measured by a BPF program on throttle_cfs_rq/unthrottle_cfs_rq (--collector.cfsstall).")
	stallLostDesc = prometheus.NewDesc(namespace+"_exporter_cfsstall_lost_total",
		"quota_exporter: stalls the BPF program could not report (its ring buffer or maps were full).", nil, nil)
	stallAvailableDesc = prometheus.NewDesc(namespace+"_exporter_cfsstall_available",
		"quota_exporter: 1 if the CFS stall BPF program is attached; 0 without CAP_BPF/CAP_PERFMON, BTF or a traceable kernel "+
			"(the reason is logged once; the throttle collector's per-second sampler still covers throttling).", nil, nil)
)

// stallForget drops the histogram of a cgroup id that discovery has not shown for this
// long (the cgroup is gone), bounding memory under cgroup churn.
const stallForget = 5 * time.Minute

// stallRetry is the pause after a ring buffer read error, so a persistent one does not spin.
const stallRetry = time.Second

type stallSeries struct {
	h    histogram.Histogram
	seen time.Time // last stall or last scrape that mapped the id to a cgroup
}

// cfsStallCollector reads finished stalls from the BPF ring buffer in the background and
// exports one histogram per cgroup. The program reports cgroup ids; a scrape maps them to the
// discovered cgroups by the inode number of each quota cgroup's directory (the kernel's
// cgroup id is its kernfs node id, which is that inode number).
type cfsStallCollector struct {
	env    *Env
	tracer *cfsstall.Tracer // nil: not available here, the reason was logged at start
	done   chan struct{}

	mu   sync.Mutex
	byID map[uint64]*stallSeries
}

func newCfsStallCollector(env *Env) (Collector, error) {
	c := &cfsStallCollector{env: env, byID: map[uint64]*stallSeries{}, done: make(chan struct{})}
	t, err := cfsstall.Open()
	if err != nil {
		// Not a failed collector: the per-second throttling sampler still covers throttling.
		env.Logger.Warn("cfsstall: cannot attach the BPF program, exporting no stall lengths (the throttle collector's per-second sampler remains)",
			"reason", err.Error())
		close(c.done)
		return c, nil
	}
	env.Logger.Info("cfsstall: attached", "mode", string(t.Mode()))
	c.tracer = t
	go c.read()
	return c, nil
}

func (c *cfsStallCollector) read() {
	defer close(c.done)
	for {
		s, err := c.tracer.Read()
		if errors.Is(err, cfsstall.ErrClosed) {
			return
		}
		if err != nil {
			c.env.Errors.Record("cfsstall", "ring buffer", err)
			time.Sleep(stallRetry)
			continue
		}
		c.mu.Lock()
		ss := c.byID[s.CgroupID]
		if ss == nil {
			ss = &stallSeries{h: histogram.New(stallBuckets)}
			c.byID[s.CgroupID] = ss
		}
		ss.h.Observe(s.Duration.Seconds())
		ss.seen = time.Now()
		c.mu.Unlock()
	}
}

// Close detaches the program; the reader goroutine ends with it.
func (c *cfsStallCollector) Close() {
	if c.tracer != nil {
		_ = c.tracer.Close()
	}
	<-c.done
}

func (c *cfsStallCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	meter := budget.MeterFrom(ctx)
	if c.tracer == nil {
		ch <- prometheus.MustNewConstMetric(stallAvailableDesc, prometheus.GaugeValue, 0)
		return nil
	}
	ch <- prometheus.MustNewConstMetric(stallAvailableDesc, prometheus.GaugeValue, 1)
	byID := c.cgroupIDs(ctx)
	now := time.Now()
	c.mu.Lock()
	for id, ss := range c.byID {
		cg, ok := byID[id]
		if !ok {
			if now.Sub(ss.seen) > stallForget {
				delete(c.byID, id)
			}
			continue
		}
		ss.seen = now
		if m := histogramMetric(&ss.h, stallSecondsDesc, newEmitter(nil, cgroupLabels, cgroupLabelValues(cg)).pairs, nil); meter.For(cg).TakeN(histogramUnits(m)) {
			ch <- m
		}
	}
	c.mu.Unlock()
	if n, err := c.tracer.Lost(); err == nil {
		ch <- prometheus.MustNewConstMetric(stallLostDesc, prometheus.CounterValue, float64(n))
	}
	return nil
}

// cgroupIDs maps the kernel cgroup id of every discovered cgroup with a CPU quota (only those
// are throttled) to the cgroup. On v2 and on v1 alike the id is the inode number of the
// cgroup's directory in the hierarchy holding the cpu controller: ids are unique within one
// hierarchy only, so only that one is stat'ed.
func (c *cfsStallCollector) cgroupIDs(ctx context.Context) map[uint64]cgroupid.Cgroup {
	l := c.env.Cgroups.Layout()
	cgs, _ := c.env.Cgroups.Cgroups(ctx) // discovery counts its own errors
	out := make(map[uint64]cgroupid.Cgroup)
	if l.CPU == nil {
		return out
	}
	for _, cg := range cgs {
		if !cg.InCPU || !cg.HasCPUMax || !cg.CPUMax.Limited() {
			continue
		}
		dir := l.CPU.Dir(cg.Path)
		if cg.ThrottleSubgroup != "" {
			// crun's subgroup has a quota: the container's stalls are its run queues'. With the
			// same quota on the scope too (CRI-O) either level may run out first
			// (CPUStat.MaxThrottling); one id per cgroup keeps one histogram per label set,
			// so the scope's own stalls are not counted there.
			dir = l.CPU.Dir(cg.ThrottleSubgroup)
		}
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			c.env.Errors.Record("cfsstall", dir, err)
			continue
		}
		out[st.Ino] = cg
	}
	return out
}
