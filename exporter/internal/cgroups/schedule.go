//go:build linux

package cgroups

import (
	"context"
	"time"
)

// The one rediscovery schedule. Scrapes walk when their snapshot is older than MaxAge; while
// someone subscribes (the throttle sampler, the OOM watcher), the source also looks between
// scrapes, so that no consumer walks on its own. Between scrapes it only lists directories:
// a quota or limit changed on a cgroup that stays is seen by the next scrape's walk (a full
// walk on a clock would read every cgroup.procs between scrapes).
const (
	// CheckEvery is how often, by default (Options.CheckEvery), the cgroup directories are
	// listed (getdents only, no file read) to see whether any came or went; a change is walked
	// at once unless a walk was published since the listing, and once more a check later,
	// because a runtime writes a new cgroup's limits and PIDs after its mkdir.
	CheckEvery = 5 * time.Second
	// refreshTimeout bounds one walk of the schedule (a walk of 100 000 cgroups on a loaded
	// node takes many seconds).
	refreshTimeout = 30 * time.Second
)

// startSchedule runs the schedule until stopSchedule; s.mu held.
func (s *Source) startSchedule() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopScheduleFn = cancel
	go s.schedule(ctx)
}

// stopSchedule ends the schedule (the last subscriber left); s.mu held.
func (s *Source) stopSchedule() {
	if s.stopScheduleFn != nil {
		s.stopScheduleFn()
		s.stopScheduleFn = nil
	}
}

func (s *Source) schedule(ctx context.Context) {
	t := time.NewTicker(s.checkEvery)
	defer t.Stop()
	var prev map[string]bool
	settling := false
	for {
		listed := time.Now()
		changed := s.dirsChanged(ctx, &prev)
		walk := changed || settling
		settling = changed
		switch snap := s.Latest(); {
		case snap == nil:
			walk = true
		case snap.At.After(listed): // a scrape (or another consumer) walked since the listing
			walk = false
		}
		if walk {
			s.refresh(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// dirsChanged lists the directories and tells whether they differ from *prev (always true
// for the first listing and for an incomplete one), recording the new set.
func (s *Source) dirsChanged(ctx context.Context, prev *map[string]bool) bool {
	paths, errs := Paths(ctx, s.layout, s.opts)
	if len(errs) > 0 || ctx.Err() != nil {
		*prev = nil
		return true
	}
	same := *prev != nil && len(paths) == len(*prev)
	for _, p := range paths {
		same = same && (*prev)[p]
	}
	if !same {
		*prev = make(map[string]bool, len(paths))
		for _, p := range paths {
			(*prev)[p] = true
		}
	}
	return !same
}

// refresh walks now (or joins a scrape's walk in progress) and publishes the snapshot; it
// waits for the walk until ctx ends, and the walk goes on to publish after that.
func (s *Source) refresh(ctx context.Context) {
	s.mu.Lock()
	s.expired = true
	s.mu.Unlock()
	wctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		s.Snapshot(wctx)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
