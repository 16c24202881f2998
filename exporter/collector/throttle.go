//go:build linux

package collector

import (
	"context"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/throttle"
)

func init() {
	addFlags(func(app *kingpin.Application, f *Flags) {
		app.Flag("throttle.window", "Window of the background throttling sampler that feeds quota_cpu_throttled_window_* histograms.").Default("1s").DurationVar(&f.cfg.ThrottleWindow)
		app.Flag("throttle.full-histograms", "Export every bucket of quota_cpu_throttled_window_ratio and the quota_cpu_throttled_window_seconds histogram (by default: the ratio's le=0.5 and 0.9 buckets only, the per-container series budget of docs/metrics.md).").BoolVar(&f.cfg.ThrottleFullHistograms)
	})
	register("throttle", true, "per-window CFS throttling histograms from a background sampler of cpu.stat", newThrottleCollector,
		throttledRatioDesc, throttledSecondsDesc, samplerCgroupsDesc, samplerSecondsDesc, samplerOpenFilesDesc, samplerWindowsDesc)
}

// defaultRatioBuckets are the ratio buckets exported unless --throttle.full-histograms: the
// thresholds the alerts use (more than half, nearly all periods throttled).
var defaultRatioBuckets = []float64{0.5, 0.9}

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

// throttleCollector exports the throttling sampler's histograms (package throttle owns the
// sampling and its state).
type throttleCollector struct {
	env     *Env
	sampler *throttle.Sampler
}

func newThrottleCollector(env *Env) (Collector, error) {
	c := newThrottleSampler(env, env.Config.ThrottleWindow, nil)
	c.sampler.Start()
	return c, nil
}

// newThrottleSampler makes the collector without starting its sampler's loop (tests drive it).
func newThrottleSampler(env *Env, window time.Duration, observe func(cgroup string, ratio float64)) *throttleCollector {
	cfg := throttle.Config{Window: window, Cgroups: env.Cgroups, Descriptors: env.Descriptors, Gate: cgroupGate(env, "throttle"),
		Labels: func(cg cgroupid.Cgroup) []*dto.LabelPair {
			return newEmitter(nil, cgroupLabels, cgroupLabelValues(cg)).pairs
		},
		Observe: observe}
	if env.Budgets != nil {
		cfg.Budgets = env.Budgets.Book
	}
	return &throttleCollector{env: env, sampler: throttle.New(cfg)}
}

// Close stops the sampler and closes its files.
func (c *throttleCollector) Close() { c.sampler.Close() }

func (c *throttleCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	meter := budget.MeterFrom(ctx)
	c.sampler.Read(func(st throttle.State) {
		send := func(s *throttle.Series, m prometheus.Metric) {
			if meter.For(s.Cgroup).TakeN(histogramUnits(m)) {
				ch <- m
			}
		}
		for _, s := range st.Series {
			if s.Ratio.Count == 0 {
				continue
			}
			if c.env.Config.ThrottleFullHistograms {
				send(s, histogramMetric(&s.Ratio, throttledRatioDesc, s.Labels, nil))
				send(s, histogramMetric(&s.Seconds, throttledSecondsDesc, s.Labels, nil))
				continue
			}
			// By default the ratio's alert thresholds only, and no seconds histogram: its sum
			// is the increase of quota_cpu_throttled_seconds_total, its count the ratio's.
			send(s, histogramMetric(&s.Ratio, throttledRatioDesc, s.Labels, defaultRatioBuckets))
		}
		ch <- prometheus.MustNewConstMetric(samplerCgroupsDesc, prometheus.GaugeValue, float64(len(st.Series)))
		ch <- prometheus.MustNewConstMetric(samplerOpenFilesDesc, prometheus.GaugeValue, float64(st.OpenFiles))
		ch <- prometheus.MustNewConstMetric(samplerSecondsDesc, prometheus.CounterValue, st.Spent.Seconds())
		ch <- prometheus.MustNewConstMetric(samplerWindowsDesc, prometheus.CounterValue, float64(st.Windows))
	})
	return nil
}

// NewThrottleSampler starts the per-window throttling sampler on its own, as the throttle
// collector does, and calls observe as each window closes, once per cgroup sampled in it:
// the cgroup's path and the window's throttled ratio, in window order, from the sampler's
// goroutine with its lock held (observe must not block). diagnose follows the windows this
// way instead of scraping the histograms. Close stops it.
func NewThrottleSampler(env *Env, observe func(cgroup string, ratio float64)) interface{ Close() } {
	c := newThrottleSampler(env, env.Config.ThrottleWindow, observe)
	c.sampler.Start()
	return c
}
