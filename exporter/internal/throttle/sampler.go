//go:build linux

// Package throttle is the throttling sampler: every window (--throttle.window, 1 s) it
// re-reads cpu.stat of every cgroup with a CPU quota and counts each window's throttled
// share of CFS periods and throttled time in per-cgroup histograms, independent of the
// scrape interval. It takes its cgroups from the cgroup source's published walks (it has no
// walk of its own), within the sampled-cgroups budget, and keeps cpu.stat open within the
// descriptor budget it shares with the OOM watcher. The throttle collector turns its
// histograms into metrics; diagnose follows its windows as they close (Config.Observe).
package throttle

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
	"github.com/quota-exporter/quota_exporter/exporter/internal/fdbudget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/histogram"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// workers read cpu.stat files in parallel: one is plenty for thousands of cgroups, the
// second keeps the window going while a stuck file waits out its budget.
const workers = 2

// closeWait bounds how long Close waits for the sampler's loop; the loop never waits on a
// blocked read, so this only matters for a discovery walk in progress.
const closeWait = time.Second

// Config is what a sampler samples and within which budgets.
type Config struct {
	// Window is the sampling interval (1 s when unset).
	Window  time.Duration
	Cgroups *cgroups.Source
	// Budgets keeps the sampled-cgroups budget's books; nil: every cgroup with a quota.
	Budgets *budget.Book
	// Descriptors is the budget of the cpu.stat files kept open (pread each window saves an
	// open and close), shared with the OOM watcher; beyond it, open, read and close each window.
	Descriptors *fdbudget.Budget
	// Gate holds the stuck keys of the sampler's reads.
	Gate *procread.Gate
	// Labels makes a cgroup's label pairs, kept with its series and remade when its
	// identity changes, so that a scrape does not build them again.
	Labels func(cgroupid.Cgroup) []*dto.LabelPair
	// Observe, when set, is told each cgroup's ratio as its window closes, in window order,
	// from the sampler's goroutine with its lock held (it must not block).
	Observe func(cgroup string, ratio float64)
}

// Sampler owns the per-cgroup sampling state. It reads without holding mu (scrapes take
// it), each cpu.stat within half a window: a stuck file is skipped (procread.Gate) and costs
// the sampler that cgroup only.
type Sampler struct {
	cfg    Config
	cancel context.CancelFunc
	done   chan struct{}

	// discoveries tells the loop about each walk the cgroup source published (a scrape's or
	// its schedule's); nil for a sampler whose loop is not started (tests drive it).
	discoveries *cgroups.Subscription

	mu      sync.Mutex
	series  map[string]*Series
	list    []*Series                           // Sample's scratch list (only the sampler's goroutine uses it)
	results []procread.Result[cgroupfs.CPUStat] // Sample's scratch results, likewise
	open    int                                 // descriptors held
	spent   time.Duration
	windows uint64
}

// Series is one cgroup's sampler state: cpu.stat (held open when within the descriptor
// budget), the last counters, and cumulative histograms. path and fd do not change after
// creation, so a read may use them without mu.
type Series struct {
	Cgroup cgroupid.Cgroup
	Labels []*dto.LabelPair // Config.Labels of Cgroup
	// Ratio counts each window's throttled share of periods; Seconds its throttled time.
	Ratio, Seconds histogram.Histogram

	path string
	fd   int // -1: open, read and close each window
	// subPath, subFd: cpu.stat of crun's subgroup when it has a quota (Cgroup.ThrottleSubgroup),
	// read with path and merged (CPUStat.MaxThrottling); "" otherwise.
	subPath            string
	subFd              int
	seen               bool
	periods, throttled uint64
	throttledSeconds   float64
	lastSeenGeneration uint64 // of the last complete snapshot that listed it
	stuck              bool   // a read timed out and may still hold the descriptor: not closed until a later read returns
	// parent is the nearest sampled ancestor (a pod whose containers have limits of their
	// own), relinked whenever the set changes; win is this window's deltas, for its children.
	parent *Series
	win    windowDeltas
}

// windowDeltas are one window's CFS period counts of one cgroup (ok: read and counted).
type windowDeltas struct {
	periods, throttled uint64
	ok                 bool
}

// New makes a sampler without starting its loop: Start starts it; tests and benchmarks
// drive it with Rediscover and Sample instead.
func New(cfg Config) *Sampler {
	if cfg.Window <= 0 {
		cfg.Window = time.Second
	}
	if cfg.Gate == nil {
		cfg.Gate = procread.NewGate("throttle")
	}
	done := make(chan struct{})
	close(done)
	return &Sampler{cfg: cfg, cancel: func() {}, done: done, series: map[string]*Series{}}
}

// Window is the sampling interval.
func (c *Sampler) Window() time.Duration { return c.cfg.Window }

// Start subscribes to the cgroup source and starts the loop: a window at once, then one
// every Window. Close stops it.
func (c *Sampler) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	c.discoveries = c.cfg.Cgroups.Subscribe()
	go c.loop(ctx)
}

// Close stops the sampler and closes its files; it returns within closeWait.
func (c *Sampler) Close() {
	c.cancel()
	if c.discoveries != nil {
		c.discoveries.Close()
	}
	select {
	case <-c.done:
	case <-time.After(closeWait):
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.series {
		c.release(s)
	}
	c.series = map[string]*Series{}
}

// State is what a scrape reads of the sampler, under its lock.
type State struct {
	Series    map[string]*Series // by cgroup path
	OpenFiles int                // cpu.stat descriptors held
	Spent     time.Duration      // wall time spent reading
	Windows   uint64             // windows run
}

// Read calls f with the sampler's state, holding its lock: the state is f's until it
// returns, and the sampler's next window waits for it.
func (c *Sampler) Read(f func(State)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(State{Series: c.series, OpenFiles: c.open, Spent: c.spent, Windows: c.windows})
}

// release closes a series' descriptor unless a read of it may still be outstanding.
func (c *Sampler) release(s *Series) {
	for _, fd := range []*int{&s.fd, &s.subFd} {
		if *fd >= 0 && !s.stuck {
			syscall.Close(*fd)
			c.open--
			c.cfg.Descriptors.Release(1)
		}
		*fd = -1
	}
}

func (c *Sampler) loop(ctx context.Context) {
	defer close(c.done)
	ticker := time.NewTicker(c.cfg.Window)
	defer ticker.Stop()
	c.Rediscover(ctx)
	for {
		c.adopt()
		c.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Rediscover takes the cgroup source's snapshot, walking when it is older than a scrape's
// (at start): the sampler has no walk of its own.
func (c *Sampler) Rediscover(ctx context.Context) {
	// A walk of 100 000 cgroups on a loaded node takes many seconds; the sampler waits
	// for it (without sampling meanwhile) but not forever.
	ctx, cancel := context.WithTimeout(ctx, max(30*c.cfg.Window, 30*time.Second))
	defer cancel()
	c.apply(c.cfg.Cgroups.Snapshot(ctx))
}

// adopt applies the newest snapshot the cgroup source published since the last window (a
// scrape's walk or the source's schedule). It never waits: without one it returns at once.
func (c *Sampler) adopt() {
	if c.discoveries == nil {
		return
	}
	select {
	case <-c.discoveries.C:
	default:
		return
	}
	if d, ok := c.discoveries.Next(); ok {
		c.apply(d.Next)
	}
}

// apply adds the snapshot's cgroups that gained a quota and, when the walk read every
// directory, forgets those that lost it or vanished.
func (c *Sampler) apply(snap *cgroups.Snapshot) {
	l := c.cfg.Cgroups.Layout()
	if l.CPU == nil {
		return
	}
	complete := snap.Generation > 0 && len(snap.Errs) == 0 // an unreadable directory may hide a cgroup
	c.add(l, snap.Cgroups, snap.Generation, complete)
}

// add starts series for the cgroups with a quota that are new, within the sampled-cgroups
// budget (each tenant's top cgroups first), refreshes the known ones, and with forget,
// drops those not in cgs or no longer within the budget.
func (c *Sampler) add(l *cgroupfs.Layout, cgs []cgroupid.Cgroup, generation uint64, forget bool) {
	sampled := c.withinBudget(cgs)
	var fresh []*Series
	files := 0 // cpu.stat files of the fresh series
	c.mu.Lock()
	removed := false
	for _, i := range sampled {
		cg := &cgs[i]
		if s, ok := c.series[cg.Path]; ok && s.Cgroup.ThrottleSubgroup != cg.ThrottleSubgroup {
			// crun wrote the subgroup's quota after the scope was first seen (or a resize
			// removed it): a new series reads the other files.
			c.release(s)
			delete(c.series, cg.Path)
			removed = true
		}
		if s, ok := c.series[cg.Path]; ok {
			if forget {
				s.lastSeenGeneration = generation
			}
			if s.Cgroup.Identity != cg.Identity || s.Cgroup.Names != cg.Names || s.Cgroup.Label != cg.Label {
				s.Labels = c.labels(*cg)
			}
			s.Cgroup = *cg
			continue
		}
		s := &Series{
			Cgroup: *cg, Labels: c.labels(*cg),
			path: filepath.Join(l.CPU.Dir(cg.Path), "cpu.stat"), fd: -1, subFd: -1, lastSeenGeneration: generation,
			Ratio: histogram.New(RatioBuckets), Seconds: histogram.New(scaled(secondsBuckets, c.cfg.Window)),
		}
		if cg.ThrottleSubgroup != "" {
			s.subPath = filepath.Join(l.CPU.Dir(cg.ThrottleSubgroup), "cpu.stat")
			files++
		}
		fresh = append(fresh, s)
		files++
	}
	for p, s := range c.series {
		if forget && s.lastSeenGeneration != generation {
			c.release(s)
			delete(c.series, p)
			removed = true
		}
	}
	if removed {
		c.relink()
	}
	room := c.cfg.Descriptors.TakeSpare(files)
	c.mu.Unlock()

	// Open outside mu: an open of a FIFO planted in the tree must not stall scrapes
	// (O_NONBLOCK makes it return at once anyway).
	opened := 0
	open := func(path string, fd *int) {
		if path != "" && opened < room {
			if f, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0); err == nil {
				*fd = f
				opened++
			}
		}
	}
	for _, s := range fresh {
		open(s.path, &s.fd)
		open(s.subPath, &s.subFd)
	}
	c.mu.Lock()
	c.open += opened
	c.cfg.Descriptors.Release(room - opened)
	for _, s := range fresh {
		c.series[s.Cgroup.Path] = s
	}
	if len(fresh) > 0 { // each scrape adopts its discovery: mostly no change
		c.relink()
	}
	c.mu.Unlock()
}

func (c *Sampler) labels(cg cgroupid.Cgroup) []*dto.LabelPair {
	if c.cfg.Labels == nil {
		return nil
	}
	return c.cfg.Labels(cg)
}

// withinBudget lists (by index into cgs, which it does not copy: each scrape's walk is
// adopted) the cgroups with a quota that the sampled-cgroups budget allows, and records the
// tenants it cut.
func (c *Sampler) withinBudget(cgs []cgroupid.Cgroup) []int {
	var quota []int
	for i := range cgs {
		if cg := &cgs[i]; cg.InCPU && cg.HasCPUMax && cg.CPUMax.Limited() {
			quota = append(quota, i)
		}
	}
	if c.cfg.Budgets == nil {
		return quota
	}
	at := func(i int) *cgroupid.Cgroup { return &cgs[quota[i]] }
	keep, skips := budget.AllotCgroupsAt(len(quota), at, c.cfg.Budgets.Limits().SampledCgroups, budget.SampledCgroups)
	quota = budget.Keep(quota, keep)
	c.cfg.Budgets.Pass(budget.SampledCgroups, len(quota), skips)
	return quota
}

// relink points each series at its nearest sampled ancestor. c.mu held.
func (c *Sampler) relink() {
	for _, s := range c.series {
		s.parent = nil
		for p := s.Cgroup.Path; p != "/" && p != "."; {
			p = filepath.Dir(p)
			if a, ok := c.series[p]; ok {
				s.parent = a
				break
			}
		}
	}
}

// Sample runs one window: it reads every known cgroup's cpu.stat once and observes the
// window's deltas. The reads run without mu, each within half a window; a stuck cgroup is
// skipped until its read returns.
func (c *Sampler) Sample(ctx context.Context) {
	begin := time.Now()
	c.mu.Lock()
	list := c.list[:0] // reused: no garbage per window for the list
	for _, s := range c.series {
		list = append(list, s)
	}
	c.list = list
	c.mu.Unlock()
	b := procread.Budget{Workers: workers, Item: c.cfg.Window / 2, Gate: c.cfg.Gate, Kind: "cpu.stat", Pool: procread.CgroupFiles}
	res := procread.MapInto(ctx, b, list, func(s *Series) string { return s.path }, readCPUStat, c.results)
	c.results = res // reused: no garbage per window for the results either

	c.mu.Lock()
	defer c.mu.Unlock()
	removed := false
	for i, r := range res {
		s := list[i]
		s.win = windowDeltas{}
		if errors.Is(r.Err, procread.ErrTimeout) {
			if r.Done && !errors.Is(r.Err, procread.ErrStuck) {
				s.stuck = true // this read may still hold the descriptor
			}
			continue
		}
		// This read ran and returned: the gate let it run, so a read that outlived its bound
		// before has returned too, and the descriptor is the series' again.
		s.stuck = false
		if r.Err != nil && cgroupfs.ErrorReason(r.Err) == "vanished" {
			// ENODEV once the cgroup is removed: forget it now rather than at the next walk.
			if c.series[s.Cgroup.Path] == s {
				c.release(s)
				delete(c.series, s.Cgroup.Path)
				removed = true
			}
			continue
		}
		st := r.Value
		if r.Err != nil || !st.HasThrottling {
			continue
		}
		if s.seen && st.Periods >= s.periods && st.ThrottledPeriods >= s.throttled {
			s.win = windowDeltas{periods: st.Periods - s.periods, throttled: st.ThrottledPeriods - s.throttled, ok: true}
			s.Seconds.Observe(max(st.ThrottledSeconds-s.throttledSeconds, 0))
		}
		// A counter that went backwards is a new cgroup at the same path: restart from it.
		s.seen = true
		s.periods, s.throttled, s.throttledSeconds = st.Periods, st.ThrottledPeriods, st.ThrottledSeconds
	}
	if removed {
		c.relink()
	}
	for _, s := range list {
		if s.win.ok {
			r := s.windowRatio()
			s.Ratio.Observe(r)
			if c.cfg.Observe != nil {
				c.cfg.Observe(s.Cgroup.Path, r)
			}
		}
	}
	c.windows++
	c.spent += time.Since(begin)
}

// windowRatio is the share of the window's CFS periods in which the cgroup could not run:
// throttled at its own level or at a sampled ancestor's. Each level counts only the periods
// its own limit throttled (v1 and v2 alike), and the levels are not disjoint: a container
// whose pod has the same limit (the kubelet sets both) is throttled by both in the same
// periods (measured here: a burner 10 of 10 at each level, a 2 x 40 ms / 200 ms service
// +5/s at the container and +3-5/s at the pod), so a sum counts one stall twice. Without a
// per-period record of which level throttled, the larger level is the honest estimate: never
// more than the union of the levels' throttled periods. The ancestors count only while the
// cgroup itself was running in the window (periods of its own). In a kubelet pod whose
// containers all have limits, the pod's limit is their sum, so the pod is throttled only while
// every container is at its own limit: no idle sibling is counted as frozen.
func (s *Series) windowRatio() float64 {
	dp, dt := s.win.periods, s.win.throttled
	if dp == 0 {
		return 0
	}
	for a := s.parent; a != nil; a = a.parent {
		if a.win.ok {
			dp, dt = max(dp, a.win.periods), max(dt, a.win.throttled)
		}
	}
	return min(1, float64(dt)/float64(dp))
}
