//go:build linux

package collector

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
)

func init() {
	register("throttle", true, "per-window CFS throttling histograms from a background sampler of cpu.stat", newThrottleCollector,
		throttledRatioDesc, throttledSecondsDesc, samplerCgroupsDesc, samplerSecondsDesc, samplerWindowsDesc)
}

// Bucket bounds. Ratio buckets are fixed; seconds buckets scale with the window (they are
// for a 1 s window; throttled time is summed over CPUs, so it can exceed the window).
var (
	ratioBuckets   = []float64{0, 0.1, 0.25, 0.5, 0.75, 0.9, 1}
	secondsBuckets = []float64{0, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

var (
	throttledRatioDesc = newCgroupDesc("cpu_throttled_window_ratio",
		"Per sampler window (--throttle.window, default 1s): the fraction of the window's CFS periods in which the cgroup was throttled. "+
			"Observed by a background sampler of cpu.stat for every cgroup with a CPU quota, independent of the scrape interval; "+
			"count - bucket{le=\"0.5\"} = windows with more than half the periods throttled. A window without periods observes 0.")
	throttledSecondsDesc = newCgroupDesc("cpu_throttled_window_seconds",
		"Per sampler window (--throttle.window, default 1s): throttled time accrued in the window, summed over CPUs (so it can exceed the window). "+
			"Observed by a background sampler of cpu.stat for every cgroup with a CPU quota.")
	samplerCgroupsDesc = prometheus.NewDesc(namespace+"_exporter_throttle_sampler_cgroups",
		"quota_exporter: cgroups with a CPU quota the per-second throttling sampler is watching.", nil, nil)
	samplerSecondsDesc = prometheus.NewDesc(namespace+"_exporter_throttle_sampler_seconds_total",
		"quota_exporter: wall time the throttling sampler spent reading cpu.stat files (its cost).", nil, nil)
	samplerWindowsDesc = prometheus.NewDesc(namespace+"_exporter_throttle_sampler_windows_total",
		"quota_exporter: sampler windows run.", nil, nil)
)

// rediscoverEvery windows the sampler walks the hierarchies again for new cgroups with a
// quota; between walks it only reads cpu.stat of the ones it knows.
const rediscoverEvery = 10

// throttleCollector owns the background sampler and exposes its histograms.
type throttleCollector struct {
	env    *Env
	window time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	series  map[string]*throttleSeries
	spent   time.Duration
	windows uint64
}

// throttleSeries is one cgroup's sampler state: an open cpu.stat (re-read with pread, which
// saves an open and close per window), the last counters, and cumulative histograms.
type throttleSeries struct {
	cg                 cgroupfs.Cgroup
	file               *os.File
	seen               bool
	periods, throttled uint64
	throttledSeconds   float64
	ratio, seconds     histogram
	lastSeenGeneration uint64
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

func (h *histogram) metric(d *prometheus.Desc, labels []string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.bounds))
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		buckets[b] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.count, h.sum, buckets, labels...)
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
	go c.loop(ctx)
	return c, nil
}

// newThrottleSampler makes the collector without starting its loop (tests drive it).
func newThrottleSampler(env *Env, window time.Duration) *throttleCollector {
	done := make(chan struct{})
	close(done)
	return &throttleCollector{env: env, window: window, cancel: func() {}, done: done, series: map[string]*throttleSeries{}}
}

// Close stops the sampler and closes its files.
func (c *throttleCollector) Close() {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.series {
		s.file.Close()
	}
	c.series = map[string]*throttleSeries{}
}

func (c *throttleCollector) loop(ctx context.Context) {
	defer close(c.done)
	ticker := time.NewTicker(c.window)
	defer ticker.Stop()
	var generation uint64
	buf := make([]byte, 4096)
	for n := uint64(0); ; n++ {
		if n%rediscoverEvery == 0 {
			generation++
			c.rediscover(ctx, generation)
		}
		c.sample(buf)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// rediscover adds cgroups that gained a quota and forgets those that lost it or vanished.
func (c *throttleCollector) rediscover(ctx context.Context, generation uint64) {
	l := c.env.Cgroups.Layout()
	if l.CPU == nil {
		return
	}
	cgs, _ := c.env.Cgroups.Cgroups(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cg := range cgs {
		if !cg.InCPU || !cg.HasCPUMax || !cg.CPUMax.Limited() {
			continue
		}
		if s, ok := c.series[cg.Path]; ok {
			s.lastSeenGeneration = generation
			s.cg = cg
			continue
		}
		f, err := os.Open(filepath.Join(l.CPU.Dir(cg.Path), "cpu.stat"))
		if err != nil {
			continue // gone already
		}
		c.series[cg.Path] = &throttleSeries{
			cg: cg, file: f, lastSeenGeneration: generation,
			ratio: newHistogram(ratioBuckets), seconds: newHistogram(scaled(secondsBuckets, c.window)),
		}
	}
	for p, s := range c.series {
		if s.lastSeenGeneration != generation {
			s.file.Close()
			delete(c.series, p)
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

// sample reads every known cgroup's cpu.stat once and observes the window's deltas.
func (c *throttleCollector) sample(buf []byte) {
	begin := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, s := range c.series {
		n, err := s.file.ReadAt(buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			// ENODEV once the cgroup is removed: forget it now rather than at the next walk.
			s.file.Close()
			delete(c.series, p)
			continue
		}
		var st cgroupfs.CPUStat
		if err := cgroupfs.ParseCPUStat(buf[:n], &st); err != nil || !st.HasThrottling {
			continue
		}
		if s.seen && st.Periods >= s.periods && st.ThrottledPeriods >= s.throttled {
			dp, dt := st.Periods-s.periods, st.ThrottledPeriods-s.throttled
			ratio := 0.0
			if dp > 0 {
				ratio = float64(dt) / float64(dp)
			}
			s.ratio.observe(ratio)
			s.seconds.observe(max(st.ThrottledSeconds-s.throttledSeconds, 0))
		}
		// A counter that went backwards is a new cgroup at the same path: restart from it.
		s.seen = true
		s.periods, s.throttled, s.throttledSeconds = st.Periods, st.ThrottledPeriods, st.ThrottledSeconds
	}
	c.windows++
	c.spent += time.Since(begin)
}

func (c *throttleCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.series {
		if s.ratio.count == 0 {
			continue
		}
		labels := cgroupLabelValues(s.cg)
		ch <- s.ratio.metric(throttledRatioDesc, labels)
		ch <- s.seconds.metric(throttledSecondsDesc, labels)
	}
	ch <- prometheus.MustNewConstMetric(samplerCgroupsDesc, prometheus.GaugeValue, float64(len(c.series)))
	ch <- prometheus.MustNewConstMetric(samplerSecondsDesc, prometheus.CounterValue, c.spent.Seconds())
	ch <- prometheus.MustNewConstMetric(samplerWindowsDesc, prometheus.CounterValue, float64(c.windows))
	return nil
}
