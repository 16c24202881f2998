//go:build linux

package collector

import (
	"context"
	"errors"
	"fmt"
	"github.com/alecthomas/kingpin/v2"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/malloc"
	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

func init() {
	addFlags(func(app *kingpin.Application, f *Flags) {
		app.Flag("process.smaps-interval", "Minimum interval between smaps reads of one process (they walk its page tables).").Default("5m").DurationVar(&f.cfg.SmapsInterval)
	})
	register("smaps", true, "resident size of glibc malloc heaps from /proc/<pid>/smaps, read in the background at most every --process.smaps-interval", newSmapsCollector,
		mallocHeapResidentDesc)
}

var mallocHeapResidentDesc = newProcessDesc("process_malloc_heap_resident_bytes",
	"Resident size of the glibc non-main arena heaps (from /proc/<pid>/smaps). Read by a background loop at most every --process.smaps-interval per process, never during a scrape, because smaps walks the page tables under the process's mmap lock.")

// smapsTick is how often the background loop looks for processes due a read.
const smapsTick = 10 * time.Second

// smapsCollector reads smaps in its own goroutine; Update only reports cached values.
// smapsReading is the background smaps refresher's last reading of a process.
type smapsReading struct {
	bytes uint64
	at    time.Time // also set after a failed read (bytes 0): not retried before the interval
}

// smapsSlot keeps each process's last smaps reading.
var smapsSlot = processes.NewSlot[smapsReading]()

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
// It works from the scrapes' last listing (Processes.Last): it never lists processes or
// takes the source's lock, so it cannot stall a scrape. Its reads run in parallel with their
// own budgets through the source's gate, so a process stuck in the kernel costs one read.
func (c *smapsCollector) refresh(ctx context.Context) {
	src := c.env.Processes
	var due []*processes.Process
	for _, p := range src.Last() {
		last := smapsSlot.Load(p).at
		if last.IsZero() || time.Since(last) >= c.interval {
			due = append(due, p)
		}
	}
	res := processes.Each(ctx, src, due, "smaps", func(ctx context.Context, p *processes.Process) (uint64, error) {
		m, err := heapLayoutOf(ctx, c.env, p)
		if err != nil || m.state == nil || m.state.Allocator != malloc.Glibc {
			return 0, errNotGlibc
		}
		return malloc.HeapResidentBytes(ctx, c.env.Config.ProcPath, p.PID, m.state.HeapRanges)
	})
	for i, r := range res {
		p := due[i]
		if errors.Is(r.Err, errNotGlibc) || errors.Is(r.Err, procread.ErrStuck) || !r.Done {
			continue // not due a reading, or stuck (counted once, when it got stuck)
		}
		if errors.Is(r.Err, os.ErrNotExist) {
			continue // exited since the listing: nothing to read, not an error
		}
		n := r.Value
		if r.Err != nil {
			c.env.Errors.Record("smaps", fmt.Sprintf("pid %d", p.PID), r.Err)
			n = 0 // keep the time only: do not retry before the interval
		}
		smapsSlot.Store(p, smapsReading{bytes: n, at: time.Now()})
	}
}

// errNotGlibc: the process has no glibc heap layout (yet); no smaps reading is due.
var errNotGlibc = errors.New("no glibc heap layout")

func (c *smapsCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	meter := budget.MeterFrom(ctx)
	procs, _ := c.env.Processes.Processes(ctx)
	for _, p := range procs {
		r := smapsSlot.Load(p)
		if !r.at.IsZero() {
			newEmitter(ch, processLabels, processLabelValues(p)).metered(meter, p.Cgroup).gauge(mallocHeapResidentDesc, float64(r.bytes))
		}
	}
	return nil
}
