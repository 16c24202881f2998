//go:build linux

package oomwatch

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// Syncer runs a watcher's sync (what the cgroup source published since the last run, fed
// to Watcher.Watch) one at a time, for its loop (each published walk) and for scrapes. A
// sync reads memory.events (v2) or registers eventfds (v1) of new cgroups outside the cpu
// and memory collectors' gate: a scrape waits for it within its budget (Await), so a file
// blocked in the kernel leaves that scrape with the counts it has, and later scrapes join
// the same run instead of starting more. The syncer has no schedule of its own: the cgroup
// source's walks (a scrape's, or its rediscovery schedule's) are what it applies.
type Syncer struct {
	// Sync applies what was published since its last run. It runs with a context of its
	// own, not a scrape's: a delta it took is applied whole (what went is not listed again).
	Sync func()
	// Behind, if set, tells whether something was published that no sync has applied yet:
	// Await runs syncs until it is not (a run it joined may have begun before the scrape's
	// walk was published).
	Behind func() bool
	runs   singleflight.Group
}

// Start starts a sync, or joins the one running.
func (s *Syncer) Start() <-chan singleflight.Result {
	return s.runs.DoChan("sync", func() (any, error) {
		s.Sync()
		return nil, nil
	})
}

// Await starts or joins syncs until nothing published is left unapplied, and waits for
// them within budget, and at most half of what is left of ctx; it returns
// procread.ErrTimeout when they did not end in time.
func (s *Syncer) Await(ctx context.Context, budget time.Duration) error {
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, max(time.Until(dl)/2, 10*time.Millisecond))
	}
	t := time.NewTimer(budget)
	defer t.Stop()
	for {
		select {
		case <-s.Start():
			if s.Behind == nil || !s.Behind() {
				return nil
			}
			continue
		case <-t.C:
		case <-ctx.Done():
		}
		return fmt.Errorf("%w: the OOM watcher's sync of new cgroups is still running (a memory.events read or eventfd registration blocked in the kernel?); this scrape exports the counts it has", procread.ErrTimeout)
	}
}

// Run syncs now and at each signal on published (the cgroup source's subscription: a walk
// was published) until ctx ends, then closes done.
func (s *Syncer) Run(ctx context.Context, done chan<- struct{}, published <-chan struct{}) {
	defer close(done)
	for {
		select {
		case <-s.Start():
		case <-ctx.Done():
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-published:
		}
	}
}
