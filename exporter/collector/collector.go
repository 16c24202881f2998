//go:build linux

// Package collector holds quota_exporter's collectors and the registry that runs them,
// modelled on node_exporter: each collector registers a factory under a name, main turns
// the names into --[no-]collector.<name> flags, and every scrape runs the enabled ones
// concurrently, reporting each one's duration and success.
package collector

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
)

const namespace = "quota"

// Collector is one source of metrics. Update sends what it can and returns an error when
// part of its input was bad; that marks it failed in quota_exporter_scrape_collector_success
// without hiding what it did send.
type Collector interface {
	Update(ctx context.Context, ch chan<- prometheus.Metric) error
}

var (
	scrapeDurationDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_scrape_collector_duration_seconds",
		"quota_exporter: how long a collector took in this scrape.", []string{"collector"}, nil))
	scrapeSuccessDesc = selfMetric(prometheus.NewDesc(namespace+"_exporter_scrape_collector_success",
		"quota_exporter: 1 if the collector read all its input in this scrape, 0 if some input was bad, unreadable or timed out (see quota_exporter_read_errors_total and the log).",
		[]string{"collector"}, nil))
)

// Set is the enabled collectors; it runs them for every scrape.
type Set struct {
	env        *Env
	collectors map[string]Collector

	runs runner
}

// NewSet builds the named collectors.
func NewSet(env *Env, names []string) (*Set, error) {
	s := &Set{env: env, collectors: map[string]Collector{}}
	for _, n := range names {
		reg, ok := registry[n]
		if !ok {
			return nil, fmt.Errorf("unknown collector %q", n)
		}
		c, err := reg.factory(env)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("collector %s: %w", n, err)
		}
		s.collectors[n] = c
	}
	return s, nil
}

// closeWait bounds Close: SIGTERM must end the exporter within 5 s whatever is blocked.
const closeWait = 2 * time.Second

// Close stops background work (the throttling sampler, smaps refresher). It returns after
// closeWait at the latest, leaving behind a Close that is blocked in the kernel.
func (s *Set) Close() {
	var wg sync.WaitGroup
	for _, c := range s.collectors {
		if cl, ok := c.(interface{ Close() }); ok {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl.Close()
			}()
		}
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
		s.env.Logger.Warn("collectors did not stop in time; exiting anyway", "waited", closeWait)
	}
}

type boundSet struct {
	s   *Set
	ctx context.Context
}

// Describe sends only the self-metrics' descriptors: the per-cgroup and per-process series
// vary, so the set is an unchecked collector like node_exporter's.
func (b boundSet) Describe(ch chan<- *prometheus.Desc) {
	ch <- scrapeDurationDesc
	ch <- scrapeSuccessDesc
}

// Collect runs every collector and returns when all have finished or ctx has ended,
// whichever comes first: the scrape's deadline is hard. A collector still running then is
// reported failed (success 0, a timeout read error) with what it had sent so far, and is
// not started again by later scrapes until its Update returns (it reports success 0
// meanwhile), so a collector blocked in the kernel costs one goroutine, not one per scrape.
func (b boundSet) Collect(ch chan<- prometheus.Metric) {
	ctx := b.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	// One meter per scrape: the series budget counts what this scrape's collectors send.
	var meter *budget.Meter
	if b.s.env.Budgets != nil {
		meter = b.s.env.Budgets.NewMeter()
		ctx = budget.WithMeter(ctx, meter)
	}
	defer meter.Done()
	ctx = cgroups.PinWalk(ctx) // one walk for all of the scrape's collectors
	var runs []*collectorRun
	for name, c := range b.s.collectors {
		if !b.s.runs.claim(name) {
			b.s.env.Logger.Debug("collector skipped: its Update from an earlier scrape is still running", "collector", name)
			ch <- prometheus.MustNewConstMetric(scrapeDurationDesc, prometheus.GaugeValue, 0, name)
			ch <- prometheus.MustNewConstMetric(scrapeSuccessDesc, prometheus.GaugeValue, 0, name)
			continue
		}
		runs = append(runs, b.s.runs.start(ctx, name, c))
	}
	for _, r := range runs {
		select {
		case <-r.done:
		case <-ctx.Done():
		}
	}
	for _, r := range runs {
		r.report(b.s.env, ch)
	}
	// What the sources skipped in this scrape is counted with it.
	if b.s.env.Errors != nil {
		b.s.env.Errors.sync()
	}
}

// Gather runs the collectors for one scrape with a hard deadline of timeout, sharing the
// collection with concurrent scrapes (runner.share). A scrape whose ctx ends gets ctx's error.
func (s *Set) Gather(ctx context.Context, timeout time.Duration) ([]*dto.MetricFamily, error) {
	return s.runs.share(ctx, timeout, func(fctx context.Context) ([]*dto.MetricFamily, error) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(boundSet{s, fctx})
		return reg.Gather()
	})
}

// Gatherer is a prometheus.Gatherer for one scrape request: Gather under the request's
// context (client gone, server shutting down) and the scrape timeout.
func (s *Set) Gatherer(ctx context.Context, timeout time.Duration) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return s.Gather(ctx, timeout) })
}
