//go:build linux

// Package collector holds quota_exporter's collectors and the registry that runs them,
// modelled on node_exporter: each collector registers a factory under a name, main turns
// the names into --[no-]collector.<name> flags, and every scrape runs the enabled ones
// concurrently, reporting each one's duration and success.
package collector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// Close stops background work (the throttling sampler, smaps refresher).
func (s *Set) Close() {
	for _, c := range s.collectors {
		if cl, ok := c.(interface{ Close() }); ok {
			cl.Close()
		}
	}
}

// Bind returns a prometheus.Collector that runs the set under ctx (the scrape's deadline).
func (s *Set) Bind(ctx context.Context) prometheus.Collector { return boundSet{s, ctx} }

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

func (b boundSet) Collect(ch chan<- prometheus.Metric) {
	var wg sync.WaitGroup
	for name, c := range b.s.collectors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.s.run(b.ctx, name, c, ch)
		}()
	}
	wg.Wait()
}

func (s *Set) run(ctx context.Context, name string, c Collector, ch chan<- prometheus.Metric) {
	begin := time.Now()
	err := safeUpdate(ctx, c, ch)
	d := time.Since(begin).Seconds()
	success := 1.0
	if err != nil {
		success = 0
		s.env.Logger.Warn("collector failed", "collector", name, "duration_seconds", d, "err", err)
	} else {
		s.env.Logger.Debug("collector succeeded", "collector", name, "duration_seconds", d)
	}
	ch <- prometheus.MustNewConstMetric(scrapeDurationDesc, prometheus.GaugeValue, d, name)
	ch <- prometheus.MustNewConstMetric(scrapeSuccessDesc, prometheus.GaugeValue, success, name)
}

// safeUpdate turns a panic in one collector into a failed collector, so a bug on odd input
// costs that collector's series and not the whole scrape.
func safeUpdate(ctx context.Context, c Collector, ch chan<- prometheus.Metric) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	err = c.Update(ctx, ch)
	if err == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("scrape deadline reached before the collector finished")
	}
	return err
}

// WithTimeout returns a prometheus.Collector that runs the set with each scrape bounded by d.
func (s *Set) WithTimeout(d time.Duration) prometheus.Collector { return timedSet{s, d} }

type timedSet struct {
	s *Set
	d time.Duration
}

func (t timedSet) Describe(ch chan<- *prometheus.Desc) { boundSet{t.s, nil}.Describe(ch) }

func (t timedSet) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), t.d)
	defer cancel()
	boundSet{t.s, ctx}.Collect(ch)
}
