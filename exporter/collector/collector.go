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
	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
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

	mu      sync.Mutex
	running map[string]bool // collectors whose Update has not returned yet
	flight  *flight         // the collection concurrent scrapes share
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
	var runs []*collectorRun
	for name, c := range b.s.collectors {
		if !b.s.claim(name) {
			b.s.env.Logger.Debug("collector skipped: its Update from an earlier scrape is still running", "collector", name)
			ch <- prometheus.MustNewConstMetric(scrapeDurationDesc, prometheus.GaugeValue, 0, name)
			ch <- prometheus.MustNewConstMetric(scrapeSuccessDesc, prometheus.GaugeValue, 0, name)
			continue
		}
		runs = append(runs, b.s.start(ctx, name, c))
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
}

// collectorRun is one collector's Update in one scrape. Its metrics go to a buffer, never
// straight to the registry's channel: an Update that outlives the scrape must not send
// into a channel the registry has closed.
type collectorRun struct {
	name  string
	begin time.Time
	done  chan struct{} // closed when Update has returned and its metrics are buffered

	mu      sync.Mutex
	metrics []prometheus.Metric
	err     error
	end     time.Time // when Update returned
}

func (s *Set) claim(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		s.running = map[string]bool{}
	}
	if s.running[name] {
		return false
	}
	s.running[name] = true
	return true
}

func (s *Set) start(ctx context.Context, name string, c Collector) *collectorRun {
	r := &collectorRun{name: name, begin: time.Now(), done: make(chan struct{})}
	mch := make(chan prometheus.Metric, 64)
	go func() {
		for m := range mch {
			r.mu.Lock()
			r.metrics = append(r.metrics, m)
			r.mu.Unlock()
		}
		close(r.done)
	}()
	go func() {
		err := safeUpdate(ctx, c, mch)
		r.mu.Lock()
		r.err, r.end = err, time.Now()
		r.mu.Unlock()
		// Free the collector before r.done: the next scrape may start as soon as this
		// one has reported.
		s.mu.Lock()
		delete(s.running, name)
		s.mu.Unlock()
		close(mch)
	}()
	return r
}

// report sends what the run produced and its duration and success.
func (r *collectorRun) report(env *Env, ch chan<- prometheus.Metric) {
	finished := false
	select {
	case <-r.done:
		finished = true
	default:
	}
	r.mu.Lock()
	end := r.end
	if !finished {
		end = time.Now()
	}
	d := end.Sub(r.begin).Seconds()
	metrics, err := r.metrics, r.err
	r.metrics = nil // an unfinished Update appends to a fresh slice
	r.mu.Unlock()
	if !finished {
		err = fmt.Errorf("scrape ended before the collector finished (%.3gs): %w", d, procread.ErrTimeout)
		env.Errors.Record(r.name, "scrape", err)
	}
	for _, m := range metrics {
		ch <- withoutEmptyLabels(m)
	}
	success := 1.0
	if err != nil {
		success = 0
		env.Logger.Warn("collector failed", "collector", r.name, "duration_seconds", d, "err", err)
	} else {
		env.Logger.Debug("collector succeeded", "collector", r.name, "duration_seconds", d)
	}
	ch <- prometheus.MustNewConstMetric(scrapeDurationDesc, prometheus.GaugeValue, d, r.name)
	ch <- prometheus.MustNewConstMetric(scrapeSuccessDesc, prometheus.GaugeValue, success, r.name)
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

// flight is one collection shared by the scrapes that arrive while it runs (singleflight):
// 200 concurrent scrapes cost one walk of the hierarchies, not 200.
type flight struct {
	done    chan struct{}
	mfs     []*dto.MetricFamily
	err     error
	waiters int
	cancel  context.CancelFunc
}

// Gather runs the collectors for one scrape with a hard deadline of timeout, sharing the
// collection with concurrent scrapes. The collection is cancelled when every scrape
// waiting for it has gone (ctx ended); a scrape whose ctx ends gets ctx's error.
// (golang.org/x/sync/singleflight has no way to cancel work when its callers leave.)
func (s *Set) Gather(ctx context.Context, timeout time.Duration) ([]*dto.MetricFamily, error) {
	s.mu.Lock()
	f := s.flight
	if f == nil {
		fctx, cancel := context.WithTimeout(context.Background(), timeout)
		f = &flight{done: make(chan struct{}), cancel: cancel}
		s.flight = f
		go func() {
			reg := prometheus.NewRegistry()
			reg.MustRegister(boundSet{s, fctx})
			f.mfs, f.err = reg.Gather()
			cancel()
			s.mu.Lock()
			if s.flight == f {
				s.flight = nil
			}
			s.mu.Unlock()
			close(f.done)
		}()
	}
	f.waiters++
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.mfs, f.err
	case <-ctx.Done():
		s.mu.Lock()
		f.waiters--
		if f.waiters == 0 {
			f.cancel()
			if s.flight == f {
				s.flight = nil // a new scrape must not join a cancelled collection
			}
		}
		s.mu.Unlock()
		return nil, ctx.Err()
	}
}

// Gatherer is a prometheus.Gatherer for one scrape request: Gather under the request's
// context (client gone, server shutting down) and the scrape timeout.
func (s *Set) Gatherer(ctx context.Context, timeout time.Duration) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return s.Gather(ctx, timeout) })
}
