package collector

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/malloc"
)

func init() {
	register("smaps", true, "resident size of glibc malloc heaps from /proc/<pid>/smaps, read in the background at most every --process.smaps-interval", newSmapsCollector)
}

var mallocHeapResidentDesc = newProcessDesc("process_malloc_heap_resident_bytes",
	"Resident size of the glibc non-main arena heaps (from /proc/<pid>/smaps). Read by a background loop at most every --process.smaps-interval per process, never during a scrape, because smaps walks the page tables under the process's mmap lock.")

// smapsTick is how often the background loop looks for processes due a read.
const smapsTick = 10 * time.Second

type smapsEntry struct {
	bytes uint64
	at    time.Time
}

// smapsCollector reads smaps in its own goroutine; Update only reports cached values.
type smapsCollector struct {
	env      *Env
	src      *ProcessSource
	interval time.Duration
	cancel   context.CancelFunc
	done     chan struct{}
}

func newSmapsCollector(env *Env) (Collector, error) {
	src, err := processSourceFor(env)
	if err != nil {
		return nil, err
	}
	interval := env.Config.SmapsInterval
	if interval <= 0 {
		interval = 5 * time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &smapsCollector{env: env, src: src, interval: interval, cancel: cancel, done: make(chan struct{})}
	go c.loop(ctx)
	return c, nil
}

func (c *smapsCollector) Close() {
	c.cancel()
	<-c.done
}

func (c *smapsCollector) loop(ctx context.Context) {
	defer close(c.done)
	tick := min(smapsTick, c.interval)
	timer := time.NewTimer(time.Second) // first pass soon after start
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		c.refresh(ctx)
		timer.Reset(tick)
	}
}

// refresh reads smaps of every glibc process whose last read is older than the interval.
func (c *smapsCollector) refresh(ctx context.Context) {
	procs, _ := c.src.Processes(ctx)
	for _, p := range procs {
		if ctx.Err() != nil {
			return
		}
		v, _ := p.state.data.Load("smaps")
		if e, ok := v.(smapsEntry); ok && time.Since(e.at) < c.interval {
			continue
		}
		m, err := mallocState(ctx, c.env, p)
		if err != nil || m.state == nil || m.state.Allocator != malloc.Glibc {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, perProcessTimeout)
		n, err := malloc.HeapResidentBytes(rctx, c.env.Config.ProcPath, p.PID, m.state.HeapRanges)
		cancel()
		if err != nil {
			c.env.Errors.Record("smaps", fmt.Sprintf("pid %d", p.PID), err)
			p.state.data.Store("smaps", smapsEntry{at: time.Now()}) // do not retry before the interval
			continue
		}
		p.state.data.Store("smaps", smapsEntry{bytes: n, at: time.Now()})
	}
}

func (c *smapsCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	procs, _ := c.src.Processes(ctx)
	for _, p := range procs {
		v, _ := p.state.data.Load("smaps")
		if e, ok := v.(smapsEntry); ok && !e.at.IsZero() {
			ch <- prometheus.MustNewConstMetric(mallocHeapResidentDesc, prometheus.GaugeValue, float64(e.bytes), processLabelValues(p)...)
		}
	}
	return nil
}
