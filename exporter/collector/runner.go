//go:build linux

package collector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// runner is the scrape runner's bookkeeping, apart from what a scrape does (Set): at most
// one outstanding Update per collector, so a collector blocked in the kernel costs one
// goroutine and not one per scrape, and one collection shared by the scrapes that arrive
// while it runs. Its zero value is ready.
type runner struct {
	mu      sync.Mutex
	running map[string]bool // collectors whose Update has not returned yet
	flight  *flight         // the collection concurrent scrapes share
}

// claim marks name running; false when its Update from an earlier scrape has not returned.
func (s *runner) claim(name string) bool {
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

// start runs c's Update in its own goroutine into the run's buffer; the collector is
// released (claim succeeds again) when Update returns, however long after the scrape.
func (s *runner) start(ctx context.Context, name string, c Collector) *collectorRun {
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

// share runs collect with a hard deadline of timeout, or joins the run already under way
// for a concurrent scrape. The run is cancelled when every scrape waiting for it has gone
// (ctx ended); a scrape whose ctx ends gets ctx's error.
// (golang.org/x/sync/singleflight has no way to cancel work when its callers leave.)
func (s *runner) share(ctx context.Context, timeout time.Duration, collect func(context.Context) ([]*dto.MetricFamily, error)) ([]*dto.MetricFamily, error) {
	s.mu.Lock()
	f := s.flight
	if f == nil {
		fctx, cancel := context.WithTimeout(context.Background(), timeout)
		f = &flight{done: make(chan struct{}), cancel: cancel}
		s.flight = f
		go func() {
			f.mfs, f.err = collect(fctx)
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

// flight is one collection shared by the scrapes that arrive while it runs (singleflight):
// 200 concurrent scrapes cost one walk of the hierarchies, not 200.
type flight struct {
	done    chan struct{}
	mfs     []*dto.MetricFamily
	err     error
	waiters int
	cancel  context.CancelFunc
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
