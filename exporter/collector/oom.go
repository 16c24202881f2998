//go:build linux

package collector

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
	"github.com/quota-exporter/quota_exporter/exporter/internal/oomwatch"
)

func init() {
	addFlags(func(app *kingpin.Application, f *Flags) {
		app.Flag("oom.retention", "How long quota_memory_oom_kills_total of a removed cgroup is still exported (oom collector): a few scrape intervals plus the windows of increase() in the alerts.").Default("15m").DurationVar(&f.cfg.OOMRetention)
	})
	register("oom", true, "OOM kills of cgroups that are already gone: cgroup v2 memory.events watched with inotify, "+
		"v1 memory.oom_control notifications through cgroup.event_control and an eventfd; kept under the dead container's identity for "+
		oomwatch.DefaultRetention.String()+" (--oom.retention)", newOOMCollector, oomWatchedDesc, oomUnwatchedDesc)
}

var (
	oomWatchedDesc = prometheus.NewDesc(namespace+"_exporter_oom_watched_cgroups",
		"quota_exporter: cgroups whose OOM kills the oom collector watches (v2 inotify watches, v1 eventfds).", nil, nil)
	oomUnwatchedDesc = prometheus.NewDesc(namespace+"_exporter_oom_unwatched_cgroups",
		"quota_exporter: watched memory cgroups the oom collector could not watch (v1: beyond its descriptor budget, or cgroup.event_control not writable; v2: no inotify watch left). Their kills are lost if they are removed before a scrape.", nil, nil)
)

// oomCollector exports what the OOM watcher (internal/oomwatch) keeps: the kills of cgroups
// that are gone, and how many cgroups it watches. Live cgroups' counts are the memory
// collector's.
type oomCollector struct {
	env    *Env
	w      *oomwatch.Watcher
	syncs  *oomwatch.Syncer
	walks  *cgroups.Subscription // the cgroup source's walks, applied by syncs
	cancel context.CancelFunc
	done   chan struct{}
}

// newOOMCollector starts the watcher and feeds it what came and went in the cgroup source's
// walks: each scrape's, and between scrapes its rediscovery schedule's (the watcher has no
// schedule of its own).
func newOOMCollector(env *Env) (Collector, error) {
	cfg := oomwatch.Config{Layout: env.Cgroups.Layout(), Retention: env.Config.OOMRetention,
		Descriptors: env.Descriptors, Logger: env.Logger}
	if env.PodNames != nil {
		cfg.Name = func(cg *cgroupid.Cgroup) { env.PodNames.NameCgroup(cg) }
	}
	w, err := oomwatch.New(cfg)
	if errors.Is(err, oomwatch.ErrUnsupported) {
		return noOOM{}, nil
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &oomCollector{env: env, w: w, cancel: cancel, done: make(chan struct{}), walks: env.Cgroups.Subscribe()}
	var applied atomic.Uint64 // the generation of the last walk applied
	c.syncs = &oomwatch.Syncer{
		Sync: func() {
			if d, ok := c.walks.Next(); ok {
				w.WatchChanges(ctx, d.Added, d.Removed)
				applied.Store(d.Next.Generation)
			}
		},
		Behind: func() bool {
			latest := env.Cgroups.Latest()
			return latest != nil && latest.Generation > applied.Load() && ctx.Err() == nil
		},
	}
	go c.syncs.Run(ctx, c.done, c.walks.C)
	return c, nil
}

// Close stops the loop that applies the source's walks, and the watcher, within
// oomwatch.CloseWait (a discovery walk in progress holds no descriptor of the watcher's; it
// is not waited for longer).
func (c *oomCollector) Close() {
	deadline := time.Now().Add(oomwatch.CloseWait)
	c.cancel()
	c.walks.Close()
	c.w.Close()
	select {
	case <-c.done:
	case <-time.After(time.Until(deadline)):
	}
}

// Update exports the OOM kills of removed cgroups still within the retention.
func (c *oomCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	// The scrape's walk (shared with the cpu and memory collectors) is published before
	// Snapshot returns; Await applies it, so a new cgroup is watched before this scrape reports.
	c.env.Cgroups.Snapshot(ctx)
	if err := c.syncs.Await(ctx, cgroupReadBudget); err != nil {
		newTally("oom", c.env.Errors).add("oom watcher sync", err)
	}
	watched, unwatched := c.w.Counts()
	ch <- prometheus.MustNewConstMetric(oomWatchedDesc, prometheus.GaugeValue, float64(watched))
	ch <- prometheus.MustNewConstMetric(oomUnwatchedDesc, prometheus.GaugeValue, float64(unwatched))
	exportGone(ctx, c.env, ch, c.w.Retained())
	return nil
}

// exportGone exports the retained kills, except where discovery sees the path again (the
// memory collector exports that one), so no cgroup has two series.
func exportGone(ctx context.Context, env *Env, ch chan<- prometheus.Metric, r *oomwatch.Retained) {
	cgs, _ := env.Cgroups.Cgroups(ctx)
	live := make(map[string]bool, len(cgs))
	for _, cg := range cgs {
		live[cg.Path] = true
	}
	meter := budget.MeterFrom(ctx)
	for _, g := range r.Gone(func(p string) bool { return live[p] }) {
		newEmitter(ch, cgroupLabels, cgroupLabelValues(g.Cgroup)).metered(meter, g.Cgroup).counter(memOOMKillsDesc, float64(g.Kills))
	}
}

// noOOM is the collector without a memory hierarchy to watch.
type noOOM struct{}

func (noOOM) Update(context.Context, chan<- prometheus.Metric) error { return nil }
