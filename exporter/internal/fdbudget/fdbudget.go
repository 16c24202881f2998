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
// opens a descriptor it keeps and releases it when it closes it. A holder whose descriptors
// only save work (the sampler opens, reads and closes beyond its share) takes with
// TakeSpare, which leaves a reserve to those whose descriptors are the only way to see
// something (an OOM eventfd: without it a removed cgroup's kill is lost); they take with
// Take, from the reserve too.
//
// Hand-written rather than x/sync/semaphore: nobody waits for a descriptor, a release
// beyond what was taken must not panic, and the reserve has no equivalent there. A nil
// Budget grants nothing.
type Budget struct {
	mu                  sync.Mutex
	size, reserve, free int
}

// New is a budget of size descriptors, of which TakeSpare leaves reserve.
func New(size, reserve int) *Budget {
	size = max(size, 0)
	return &Budget{size: size, reserve: min(max(reserve, 0), size), free: size}
}

// FromRlimit leaves the larger of a quarter of RLIMIT_NOFILE and 512 descriptors (R) to
// discovery, scrapes and HTTP connections, and half of it again once the reserve (R/2) is
// taken too: at a limit of 1024 the sampler keeps at most 512 files open and the OOM
// watcher at least 256 eventfds.
func FromRlimit() *Budget {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return New(0, 0)
	}
	return forLimit(int(min(l.Cur, 1<<30)))
}

func forLimit(limit int) *Budget {
	r := max(limit/4, 512)
	return New(limit-r/2, r/2)
}

// Take grants up to n descriptors, the reserve included, and returns how many.
func (b *Budget) Take(n int) int { return b.take(n, 0) }

// TakeSpare grants up to n descriptors but leaves the reserve, and returns how many.
func (b *Budget) TakeSpare(n int) int {
	if b == nil {
		return 0
	}
	return b.take(n, b.reserve)
}

func (b *Budget) take(n, leave int) int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(max(n, 0), max(b.free-leave, 0))
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
