//go:build linux

package oomwatch

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// Rediscover is how often Syncer.Run looks for new cgroups between scrapes.
const Rediscover = 5 * time.Second

// Syncer runs a watcher's sync (a discovery fed to Watcher.Sync) one at a time, for its
// rediscovery loop and for scrapes. A sync reads memory.events (v2) or registers eventfds
// (v1) of new cgroups outside the cpu and memory collectors' gate: a scrape waits for it
// within its budget (Await), so a file blocked in the kernel leaves that scrape with the
// counts it has, and later scrapes join the same run instead of starting more.
type Syncer struct {
	Sync func(context.Context)
	// Unchanged, if set, tells the rediscovery loop that no watched cgroup came or went.
	Unchanged func(context.Context) bool
	runs      singleflight.Group
}

// Start starts a sync, or joins the one running.
func (s *Syncer) Start(ctx context.Context) <-chan singleflight.Result {
	return s.runs.DoChan("sync", func() (any, error) {
		s.Sync(ctx)
		return nil, nil
	})
}

// Await starts or joins a sync and waits for it within budget, and at most half of what
// is left of ctx; it returns procread.ErrTimeout when the sync did not end in time.
func (s *Syncer) Await(ctx context.Context, budget time.Duration) error {
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, max(time.Until(dl)/2, 10*time.Millisecond))
	}
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case <-s.Start(ctx):
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	return fmt.Errorf("%w: the OOM watcher's sync of new cgroups is still running (a memory.events read or eventfd registration blocked in the kernel?); this scrape exports the counts it has", procread.ErrTimeout)
}

// Run syncs now and every Rediscover until ctx ends, then closes done. Between syncs it
// first asks Unchanged (a directory walk, no file read) and skips the sync, whose full
// discovery reads every cgroup.procs, while no memory cgroup came or went.
func (s *Syncer) Run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(Rediscover)
	defer t.Stop()
	for {
		if s.Unchanged == nil || !s.Unchanged(ctx) { // its first call always asks for a sync
			select {
			case <-s.Start(ctx):
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// DirsUnchanged returns the rediscovery loop's check over paths, a directory walk of the
// memory hierarchy (ok false when incomplete): whether its directories are the same as at
// the previous call. A call that finds a change (or the first one) records the new set
// before the sync that follows it runs, so a cgroup created during that sync shows as a
// change at the next call; and the call after a change asks for one more sync, because a
// runtime writes a new cgroup's limits and PIDs after its mkdir, and discovery lists only
// cgroups with either. Only the loop's goroutine calls it.
func DirsUnchanged(paths func(context.Context) ([]string, bool)) func(context.Context) bool {
	var prev map[string]bool
	settling := false
	return func(ctx context.Context) bool {
		ps, ok := paths(ctx)
		if !ok {
			prev = nil
			return false
		}
		same := prev != nil && len(ps) == len(prev)
		for _, p := range ps {
			same = same && prev[p]
		}
		if !same {
			prev = make(map[string]bool, len(ps))
			for _, p := range ps {
				prev[p] = true
			}
			settling = true
			return false
		}
		if settling {
			settling = false
			return false
		}
		return true
	}
}
