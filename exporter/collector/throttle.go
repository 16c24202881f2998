//go:build linux

package collector

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/fdbudget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/source"
)

func init() {
	register("throttle", true, "per-window CFS throttling histograms from a background sampler of cpu.stat", newThrottleCollector,
		throttledRatioDesc, throttledSecondsDesc, samplerCgroupsDesc, samplerSecondsDesc, samplerOpenFilesDesc, samplerWindowsDesc)
}

// Bucket bounds. Ratio buckets are fixed; seconds buckets scale with the window (they are
// for a 1 s window; throttled time is summed over CPUs, so it can exceed the window).
var (
	ratioBuckets = []float64{0, 0.1, 0.25, 0.5, 0.75, 0.9, 1}
	// defaultRatioBuckets are the ones exported unless --throttle.full-histograms: the
	// thresholds the alerts use (more than half, nearly all periods throttled).
	defaultRatioBuckets = []float64{0.5, 0.9}
	secondsBuckets      = []float64{0, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

var (
	throttledRatioDesc = newCgroupDesc("cpu_throttled_window_ratio",
		"Per sampler window (--throttle.window, default 1s): the fraction of the window's CFS periods in which the cgroup was throttled, "+
			"by its own limit or, while it ran in the window, by a sampled ancestor's (a container's pod with a limit too: the larger of the levels' throttled periods, since the kernel throttles both in the same periods and a sum would count one stall twice). "+
			"Observed by a background sampler of cpu.stat for every cgroup with a CPU quota, independent of the scrape interval; "+
			"count - bucket{le=\"0.5\"} = windows with more than half the periods throttled. A window without periods observes 0. "+
			"Buckets le=\"0.5\", \"0.9\" and +Inf by default; --throttle.full-histograms adds 0, 0.1, 0.25, 0.75 and 1.")
	throttledSecondsDesc = newCgroupDesc("cpu_throttled_window_seconds",
		"Per sampler window (--throttle.window, default 1s): throttled time accrued in the window, summed over CPUs (so it can exceed the window). "+
			"Observed by a background sampler of cpu.stat for every cgroup with a CPU quota. "+
			"Only with --throttle.full-histograms: by default its sum is the increase of quota_cpu_throttled_seconds_total.")
	samplerCgroupsDesc = prometheus.NewDesc(namespace+"_exporter_throttle_sampler_cgroups",
		"quota_exporter: cgroups with a CPU quota the per-second throttling sampler is watching.", nil, nil)
	samplerSecondsDesc = prometheus.NewDesc(namespace+"_exporter_throttle_sampler_seconds_total",
		"quota_exporter: wall time the throttling sampler spent reading cpu.stat files (its cost).", nil, nil)
	samplerOpenFilesDesc = prometheus.NewDesc(namespace+"_exporter_throttle_sampler_open_files",
		"quota_exporter: cpu.stat files the throttling sampler holds open (at most a budget below RLIMIT_NOFILE; beyond it, it opens and closes them each window).", nil, nil)
	samplerWindowsDesc = prometheus.NewDesc(namespace+"_exporter_throttle_sampler_windows_total",
		"quota_exporter: sampler windows run.", nil, nil)
)

// samplerWorkers read cpu.stat files in parallel: one is plenty for thousands of cgroups,
// the second keeps the window going while a stuck file waits out its budget.
const samplerWorkers = 2

// throttleCollector owns the background sampler and exposes its histograms. The sampler
// reads without holding mu (scrapes take it), each cpu.stat within half a window: a stuck
// file is skipped (procread.Gate) and costs the sampler that cgroup only.
type throttleCollector struct {
	env    *Env
	window time.Duration
	cancel context.CancelFunc
	done   chan struct{}
	gate   *procread.Gate
	// fds is the budget of the cpu.stat files the sampler keeps open (pread each window saves
	// an open and close), shared with the OOM watcher; beyond it, it opens, reads and closes each window.
	fds *fdbudget.Budget

	// discoveries tells the loop about each walk the cgroup source published (a scrape's or
	// its schedule's); nil for a sampler whose loop is not started (tests drive it).
	discoveries *source.Subscription

	mu      sync.Mutex
	series  map[string]*throttleSeries
	list    []*throttleSeries // sample's scratch list (only the sampler's goroutine uses it)
	open    int               // descriptors held
	spent   time.Duration
	windows uint64
	// observe, when set, is told each cgroup's ratio as its window closes (NewThrottleSampler).
	observe func(cgroup string, ratio float64)
}

// throttleSeries is one cgroup's sampler state: cpu.stat (held open when within the
// descriptor budget), the last counters, and cumulative histograms. path and fd do not
// change after creation, so a read may use them without mu.
type throttleSeries struct {
	cg                 cgroupfs.Cgroup
	pairs              []*dto.LabelPair // cg's identity labels, built when cg's labels change
	path               string
	fd                 int // -1: open, read and close each window
	seen               bool
	periods, throttled uint64
	throttledSeconds   float64
	ratio, seconds     histogram
	lastSeenGeneration uint64 // of the last complete snapshot that listed it
	stuck              bool   // a read timed out and may still hold the descriptor: never close it
	// parent is the nearest sampled ancestor (a pod whose containers have limits of their
	// own), relinked whenever the set changes; win is this window's deltas, for its children.
	parent *throttleSeries
	win    windowDeltas
}

// windowDeltas are one window's CFS period counts of one cgroup (ok: read and counted).
type windowDeltas struct {
	periods, throttled uint64
	ok                 bool
}

type histogram struct {
	bounds []float64
	counts []uint64 // per bucket, not cumulative
	count  uint64
	sum    float64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds))}
}

func (h *histogram) observe(v float64) {
	h.count++
	h.sum += v
	for i, b := range h.bounds {
		if v <= b {
			h.counts[i]++
			return
		}
	}
}

// metric exports the histogram with the bounds in export (nil: all of them; each must be
// one of its bounds), on the cgroup's shared label pairs (no per-series MakeLabelPairs).
func (h *histogram) metric(d *prometheus.Desc, pairs []*dto.LabelPair, export []float64) prometheus.Metric {
	n := len(h.bounds)
	if export != nil {
		n = len(export)
	}
	buckets := make([]*dto.Bucket, 0, n)
	bs := make([]dto.Bucket, n) // one allocation for all buckets
	upper := make([]float64, n)
	cums := make([]uint64, n)
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		if export == nil || slices.Contains(export, b) {
			j := len(buckets)
			upper[j], cums[j] = b, cum
			bs[j] = dto.Bucket{UpperBound: &upper[j], CumulativeCount: &cums[j]}
			buckets = append(buckets, &bs[j])
		}
	}
	count, sum := h.count, h.sum
	return &sharedLabelsMetric{desc: d, pairs: pairs, histogram: &dto.Histogram{SampleCount: &count, SampleSum: &sum, Bucket: buckets}}
}

func newThrottleCollector(env *Env) (Collector, error) {
	window := env.Config.ThrottleWindow
	if window <= 0 {
		window = time.Second
	}
	c := newThrottleSampler(env, window)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	c.discoveries = env.Cgroups.Subscribe()
	go c.loop(ctx)
	return c, nil
}

// newThrottleSampler makes the collector without starting its loop (tests drive it).
func newThrottleSampler(env *Env, window time.Duration) *throttleCollector {
	done := make(chan struct{})
	close(done)
	return &throttleCollector{env: env, window: window, cancel: func() {}, done: done, gate: cgroupGate(env, "throttle"),
		fds: env.Descriptors, series: map[string]*throttleSeries{}}
}

// closeWait bounds how long Close waits for the sampler's loop; the loop never waits on a
// blocked read, so this only matters for a discovery walk in progress.
const samplerCloseWait = time.Second

// Close stops the sampler and closes its files; it returns within samplerCloseWait.
func (c *throttleCollector) Close() {
	c.cancel()
	if c.discoveries != nil {
		c.discoveries.Close()
	}
	select {
	case <-c.done:
	case <-time.After(samplerCloseWait):
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.series {
		c.release(s)
	}
	c.series = map[string]*throttleSeries{}
}

// release closes a series' descriptor unless a read of it may still be outstanding.
func (c *throttleCollector) release(s *throttleSeries) {
	if s.fd >= 0 && !s.stuck {
		syscall.Close(s.fd)
		c.open--
		c.fds.Release(1)
	}
	s.fd = -1
}

func (c *throttleCollector) loop(ctx context.Context) {
	defer close(c.done)
	ticker := time.NewTicker(c.window)
	defer ticker.Stop()
	c.rediscover(ctx)
	for {
		c.adopt()
		c.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// rediscover takes the cgroup source's snapshot, walking when it is older than a scrape's
// (at start): the sampler has no walk of its own.
func (c *throttleCollector) rediscover(ctx context.Context) {
	// A walk of 100 000 cgroups on a loaded node takes many seconds; the sampler waits
	// for it (without sampling meanwhile) but not forever.
	ctx, cancel := context.WithTimeout(ctx, max(30*c.window, 30*time.Second))
	defer cancel()
	c.apply(c.env.Cgroups.Snapshot(ctx))
}

// adopt applies the newest snapshot the cgroup source published since the last window (a
// scrape's walk or the source's schedule). It never waits: without one it returns at once.
func (c *throttleCollector) adopt() {
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
func (c *throttleCollector) apply(snap *source.Snapshot) {
	l := c.env.Cgroups.Layout()
	if l.CPU == nil {
		return
	}
	complete := snap.Generation > 0 && len(snap.Errs) == 0 // an unreadable directory may hide a cgroup
	c.add(l, snap.Cgroups, snap.Generation, complete)
}

// add starts series for the cgroups with a quota that are new, refreshes the known ones,
// and with forget, drops those not in cgs.
func (c *throttleCollector) add(l *cgroupfs.Layout, cgs []cgroupfs.Cgroup, generation uint64, forget bool) {
	var fresh []*throttleSeries
	c.mu.Lock()
	for _, cg := range cgs {
		if !cg.InCPU || !cg.HasCPUMax || !cg.CPUMax.Limited() {
			continue
		}
		if s, ok := c.series[cg.Path]; ok {
			if forget {
				s.lastSeenGeneration = generation
			}
			if s.cg.Identity != cg.Identity || s.cg.Names != cg.Names {
				s.pairs = newEmitter(nil, cgroupLabels, cgroupLabelValues(cg)).pairs
			}
			s.cg = cg
			continue
		}
		fresh = append(fresh, &throttleSeries{
			cg: cg, pairs: newEmitter(nil, cgroupLabels, cgroupLabelValues(cg)).pairs,
			path: filepath.Join(l.CPU.Dir(cg.Path), "cpu.stat"), fd: -1, lastSeenGeneration: generation,
			ratio: newHistogram(ratioBuckets), seconds: newHistogram(scaled(secondsBuckets, c.window)),
		})
	}
	removed := false
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
	room := c.fds.TakeSpare(len(fresh))
	c.mu.Unlock()

	// Open outside mu: an open of a FIFO planted in the tree must not stall scrapes
	// (O_NONBLOCK makes it return at once anyway).
	opened := 0
	for _, s := range fresh {
		if opened < room {
			if fd, err := syscall.Open(s.path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0); err == nil {
				s.fd = fd
				opened++
			}
		}
	}
	c.mu.Lock()
	c.open += opened
	c.fds.Release(room - opened)
	for _, s := range fresh {
		c.series[s.cg.Path] = s
	}
	if len(fresh) > 0 { // each scrape adopts its discovery: mostly no change
		c.relink()
	}
	c.mu.Unlock()
}

// relink points each series at its nearest sampled ancestor. c.mu held.
func (c *throttleCollector) relink() {
	for _, s := range c.series {
		s.parent = nil
		for p := s.cg.Path; p != "/" && p != "."; {
			p = filepath.Dir(p)
			if a, ok := c.series[p]; ok {
				s.parent = a
				break
			}
		}
	}
}

func scaled(bounds []float64, window time.Duration) []float64 {
	out := make([]float64, len(bounds))
	for i, b := range bounds {
		out[i] = b * window.Seconds()
	}
	return out
}

var statBufPool = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// readCPUStat reads one series' cpu.stat: pread on its descriptor, or open/read/close.
func readCPUStat(s *throttleSeries) (cgroupfs.CPUStat, error) {
	var st cgroupfs.CPUStat
	bp := statBufPool.Get().(*[]byte)
	defer statBufPool.Put(bp)
	buf := *bp
	fd := s.fd
	if fd < 0 {
		var err error
		if fd, err = syscall.Open(s.path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0); err != nil {
			return st, &os.PathError{Op: "open", Path: s.path, Err: err}
		}
		defer syscall.Close(fd)
	}
	n, err := syscall.Pread(fd, buf, 0)
	if err != nil {
		return st, &os.PathError{Op: "read", Path: s.path, Err: err}
	}
	return st, cgroupfs.ParseCPUStat(buf[:n], &st)
}

// sample reads every known cgroup's cpu.stat once and observes the window's deltas. The
// reads run without mu, each within half a window; a stuck cgroup is skipped until its
// read returns.
func (c *throttleCollector) sample(ctx context.Context) {
	begin := time.Now()
	c.mu.Lock()
	list := c.list[:0] // reused: no garbage per window for the list
	for _, s := range c.series {
		list = append(list, s)
	}
	c.list = list
	c.mu.Unlock()
	b := procread.Budget{Workers: samplerWorkers, Item: c.window / 2, Gate: c.gate, Kind: "cpu.stat"}
	res := procread.Map(ctx, b, list, func(s *throttleSeries) string { return s.path }, readCPUStat)

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
		if r.Err != nil && cgroupfs.ErrorReason(r.Err) == "vanished" {
			// ENODEV once the cgroup is removed: forget it now rather than at the next walk.
			if c.series[s.cg.Path] == s {
				c.release(s)
				delete(c.series, s.cg.Path)
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
			s.seconds.observe(max(st.ThrottledSeconds-s.throttledSeconds, 0))
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
			s.ratio.observe(r)
			if c.observe != nil {
				c.observe(s.cg.Path, r)
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
func (s *throttleSeries) windowRatio() float64 {
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

func (c *throttleCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.series {
		if s.ratio.count == 0 {
			continue
		}
		if c.env.Config.ThrottleFullHistograms {
			ch <- s.ratio.metric(throttledRatioDesc, s.pairs, nil)
			ch <- s.seconds.metric(throttledSecondsDesc, s.pairs, nil)
			continue
		}
		// By default the ratio's alert thresholds only, and no seconds histogram: its sum
		// is the increase of quota_cpu_throttled_seconds_total, its count the ratio's.
		ch <- s.ratio.metric(throttledRatioDesc, s.pairs, defaultRatioBuckets)
	}
	ch <- prometheus.MustNewConstMetric(samplerCgroupsDesc, prometheus.GaugeValue, float64(len(c.series)))
	ch <- prometheus.MustNewConstMetric(samplerOpenFilesDesc, prometheus.GaugeValue, float64(c.open))
	ch <- prometheus.MustNewConstMetric(samplerSecondsDesc, prometheus.CounterValue, c.spent.Seconds())
	ch <- prometheus.MustNewConstMetric(samplerWindowsDesc, prometheus.CounterValue, float64(c.windows))
	return nil
}

// NewThrottleSampler starts the per-window throttling sampler on its own, as the throttle
// collector does, and calls observe as each window closes, once per cgroup sampled in it:
// the cgroup's path and the window's throttled ratio, in window order, from the sampler's
// goroutine with its lock held (observe must not block). diagnose follows the windows this
// way instead of scraping the histograms. Close stops it.
func NewThrottleSampler(env *Env, observe func(cgroup string, ratio float64)) interface{ Close() } {
	col, _ := newThrottleCollector(env) // never fails
	c := col.(*throttleCollector)
	c.mu.Lock() // the loop reads observe under mu: set before its first window closes or between two
	c.observe = observe
	c.mu.Unlock()
	return c
}
