//go:build linux

// Package fdbudget is the one budget of descriptors that the exporter's long-lived watches
// hold together: the throttle sampler's open cpu.stat files and the v1 OOM watcher's
// eventfds. Within it they stay below RLIMIT_NOFILE and leave room for discovery, scrapes
// and HTTP connections, whichever of them grows first.
package fdbudget

import (
	"sync"
	"syscall"
)

// Budget counts the descriptors its holders may still take. A holder takes one before it
// opens a descriptor it keeps and releases it when it closes it. Hand-written rather than
// x/sync/semaphore: nobody waits for a descriptor (a holder without one falls back or
// counts the cgroup unwatched), and a release beyond what was taken must not panic. A nil
// Budget grants nothing.
type Budget struct {
	mu         sync.Mutex
	size, free int
}

// New is a budget of n descriptors.
func New(n int) *Budget {
	n = max(n, 0)
	return &Budget{size: n, free: n}
}

// FromRlimit leaves the larger of a quarter of RLIMIT_NOFILE and 512 descriptors to
// discovery, scrapes and HTTP connections; the rest is the budget.
func FromRlimit() *Budget {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return New(0)
	}
	limit := int(min(l.Cur, 1<<30))
	return New(limit - max(limit/4, 512))
}

// Take grants up to n descriptors and returns how many it granted.
func (b *Budget) Take(n int) int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(max(n, 0), b.free)
	b.free -= n
	return n
}

// Release gives back n descriptors taken before.
func (b *Budget) Release(n int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free = min(b.free+max(n, 0), b.size)
}

// Size is the budget's total.
func (b *Budget) Size() int {
	if b == nil {
		return 0
	}
	return b.size
}
