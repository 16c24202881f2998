//go:build linux

package collector

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/malloc"
)

func init() {
	register("smaps", true, "resident size of glibc malloc heaps from /proc/<pid>/smaps, read in the background at most every --process.smaps-interval", newSmapsCollector,
		mallocHeapResidentDesc)
}

var mallocHeapResidentDesc = newProcessDesc("process_malloc_heap_resident_bytes",
	"Resident size of the glibc non-main arena heaps (from /proc/<pid>/smaps). Read by a background loop at most every --process.smaps-interval per process, never during a scrape, because smaps walks the page tables under the process's mmap lock.")

// smapsTick is how often the background loop looks for processes due a read.
const smapsTick = 10 * time.Second

// smapsCollector reads smaps in its own goroutine; Update only reports cached values.
type smapsCollector struct {
	env      *Env
	interval time.Duration
	cancel   context.CancelFunc
	done     chan struct{}
}

func newSmapsCollector(env *Env) (Collector, error) {
	interval := env.Config.SmapsInterval
	if interval <= 0 {
		interval = 5 * time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &smapsCollector{env: env, interval: interval, cancel: cancel, done: make(chan struct{})}
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
	procs, _ := c.env.Processes.Processes(ctx)
	for _, p := range procs {
		if ctx.Err() != nil {
			return
		}
		p.state.mu.Lock()
		last := p.state.smaps.at
		p.state.mu.Unlock()
		if !last.IsZero() && time.Since(last) < c.interval {
			continue
		}
		m, err := heapLayoutOf(ctx, c.env.Processes, p)
		if err != nil || m.state == nil || m.state.Allocator != malloc.Glibc {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, perProcessTimeout)
		n, err := malloc.HeapResidentBytes(rctx, c.env.Config.ProcPath, p.PID, m.state.HeapRanges)
		cancel()
		if err != nil {
			c.env.Errors.Record("smaps", fmt.Sprintf("pid %d", p.PID), err)
			n = 0 // keep the time only: do not retry before the interval
		}
		p.state.mu.Lock()
		p.state.smaps = smapsReading{bytes: n, at: time.Now()}
		p.state.mu.Unlock()
	}
}

func (c *smapsCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	procs, _ := c.env.Processes.Processes(ctx)
	for _, p := range procs {
		p.state.mu.Lock()
		r := p.state.smaps
		p.state.mu.Unlock()
		if !r.at.IsZero() {
			ch <- prometheus.MustNewConstMetric(mallocHeapResidentDesc, prometheus.GaugeValue, float64(r.bytes), processLabelValues(p)...)
		}
	}
	return nil
}
