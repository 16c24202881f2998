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

// smapsReadBound is how long one process's smaps read may take before it is given up (and
// counted stuck until it returns). No scrape waits for it, and smaps of a large process takes
// seconds (a page-table walk of every mapping; several times longer on a busy node), which the
// scrapes' 2 s would give up every time: its series would never come.
const smapsReadBound = 15 * time.Second

// smapsCollector reads smaps in its own goroutine; Update only reports cached values.
// smapsReading is the background smaps refresher's last reading of a process.
type smapsReading struct {
	bytes  uint64
	readAt time.Time // when bytes were read; zero until a read succeeds
	at     time.Time // the last read, good or failed
	misses int       // failed reads since the last good one
}

// due tells whether the process is due another read: an interval after a good one, sooner
// after a failed one (smapsTick doubled per miss, up to the interval), so that one read
// missing its time bound on a busy node costs seconds of this series, not an interval.
func (r smapsReading) due(interval time.Duration) bool {
	if r.at.IsZero() {
		return true
	}
	wait := interval
	if r.misses > 0 {
		wait = min(interval, smapsTick<<min(r.misses, 16))
	}
	return time.Since(r.at) >= wait
}

// current tells whether the reading is exported: a failed read never exports 0, the last
// good reading stands in for an interval more, then the series goes.
func (r smapsReading) current(interval time.Duration) bool {
	return !r.readAt.IsZero() && time.Since(r.readAt) <= 2*interval
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
		if smapsSlot.Load(p).due(c.interval) {
			due = append(due, p)
		}
	}
	res := processes.EachWithin(ctx, src, due, "smaps", smapsReadBound, func(ctx context.Context, p *processes.Process) (uint64, error) {
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
		last, now := smapsSlot.Load(p), time.Now()
		if r.Err != nil {
			c.env.Errors.Record("smaps", fmt.Sprintf("pid %d", p.PID), r.Err)
			last.at, last.misses = now, last.misses+1 // the last good bytes stay
			smapsSlot.Store(p, last)
			continue
		}
		smapsSlot.Store(p, smapsReading{bytes: r.Value, readAt: now, at: now})
	}
}

// errNotGlibc: the process has no glibc heap layout (yet); no smaps reading is due.
var errNotGlibc = errors.New("no glibc heap layout")

func (c *smapsCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	meter := budget.MeterFrom(ctx)
	procs, _ := c.env.Processes.Processes(ctx)
	for _, p := range procs {
		if r := smapsSlot.Load(p); r.current(c.interval) {
			newEmitter(ch, processLabels, processLabelValues(p)).metered(meter, p.Cgroup).gauge(mallocHeapResidentDesc, float64(r.bytes))
		}
	}
	return nil
}
