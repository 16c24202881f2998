//go:build linux

package collector

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/oomwatch"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// A sync blocked in the kernel (here: a sync that waits) costs a scrape at most half of
// what is left of it, later scrapes join the same run instead of starting more, and the
// run's end is seen by the next scrape.
func TestOOMSyncerBoundsTheScrape(t *testing.T) {
	release := make(chan struct{})
	var runs atomic.Int32
	s := &oomwatch.Syncer{Sync: func() {
		runs.Add(1)
		<-release
	}}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		begin := time.Now()
		err := s.Await(ctx, cgroupReadBudget)
		cancel()
		if !errors.Is(err, procread.ErrTimeout) {
			t.Fatalf("scrape %d: err %v, want a timeout", i, err)
		}
		if d := time.Since(begin); d > 300*time.Millisecond {
			t.Errorf("scrape %d waited %v for a blocked sync, want about half of its 400 ms", i, d)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("%d syncs started while one was blocked, want 1", n)
	}
	close(release)
	if err := s.Await(context.Background(), cgroupReadBudget); err != nil {
		t.Errorf("after the blocked sync returned: %v", err)
	}
	if n := runs.Load(); n > 2 {
		t.Errorf("%d syncs, want at most 2", n)
	}
}
