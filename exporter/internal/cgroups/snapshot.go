//go:build linux

package cgroups

import (
	"path/filepath"
	"slices"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
)

// Snapshot is one complete discovery walk, published by the cgroup source and never
// changed after: readers share it without locks.
type Snapshot struct {
	// Generation counts the published walks, from 1.
	Generation uint64
	At         time.Time
	Cgroups    []cgroupid.Cgroup
	// Unlinked are the containers held back until the kubelet links them (Cgroup.Unlinked):
	// not exported, but in the deltas, so the OOM watcher watches them from the first.
	Unlinked []cgroupid.Cgroup
	// ListedBy is the kernel's time since boot when the walk had listed the cgroups'
	// processes (PIDs), in clock ticks: a process with that PID that started later is not
	// the one listed (the PID was reused). 0: unknown.
	ListedBy uint64
	// Errs are the walk's unreadable directories, already counted (Counted).
	Errs []WalkError
	// Skipped counts the cgroups the walk found and does not export (below containers, conmon).
	Skipped Skipped
	// Bindings are each cgroup's binding limit (by path), from the walk's own limits: a
	// limited ancestor hidden by a path filter is not in them (the binding collector reads it).
	Bindings map[string]Binding
	own      map[string]cgroupfs.Limits
}

func newSnapshot(gen uint64, cgs []cgroupid.Cgroup, errs []WalkError) *Snapshot {
	return &Snapshot{Generation: gen, At: time.Now(), Cgroups: cgs, Errs: errs,
		Bindings: Bindings(cgs, nil), own: OwnLimits(cgs)}
}

// BindingAbove is the binding limit of path's ancestors, path's own limits left out: what
// a JVM (JDK 24+) reads besides its own cgroup's.
func (snap *Snapshot) BindingAbove(path string) Binding {
	if snap == nil || path == "/" || path == "" {
		return Binding{}
	}
	parent := filepath.Dir(path)
	return BindingOf(parent, func(p string) cgroupfs.Limits { return snap.own[p] })
}

// Latest is the last complete walk's snapshot (nil before the first), without waiting for
// a walk or taking the source's lock.
func (s *Source) Latest() *Snapshot { return s.latest.Load() }

// Delta is what came and went between two snapshots a subscriber saw.
type Delta struct {
	Prev, Next *Snapshot // Prev is nil for the subscriber's first delta
	// Added are Next's cgroups not in Prev, and those that Prev had in fewer hierarchies (a
	// v1 runtime makes a container's cpu and memory directories one after the other);
	// Removed are Prev's not in Next (by path).
	Added, Removed []cgroupid.Cgroup
}

// Subscription tells one consumer of the cgroup source that a walk was published. C has
// room for one signal: a consumer that falls behind gets one signal for many walks, and
// Next gives it the delta from the last snapshot it took to the newest, so nothing that
// came or went is lost.
type Subscription struct {
	C    <-chan struct{}
	c    chan struct{}
	src  *Source
	seen *Snapshot
}

// Subscribe starts telling the caller about every published walk. A snapshot published
// before the call is delivered too (C is signalled at once). While anyone subscribes, the
// source runs the rediscovery schedule (schedule.go): subscribers need no walk of their own.
func (s *Source) Subscribe() *Subscription {
	c := make(chan struct{}, 1)
	sub := &Subscription{C: c, c: c, src: s}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	if len(s.subs) == 1 {
		s.startSchedule()
	}
	s.mu.Unlock()
	if s.latest.Load() != nil {
		sub.notify()
	}
	return sub
}

// Close ends the subscription: C is signalled no more.
func (sub *Subscription) Close() {
	s := sub.src
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.subs {
		if x == sub {
			s.subs = slices.Delete(s.subs, i, i+1) // clears the freed slot: nothing keeps sub
			if len(s.subs) == 0 {
				s.stopSchedule()
			}
			return
		}
	}
}

func (sub *Subscription) notify() {
	select {
	case sub.c <- struct{}{}:
	default:
	}
}

// Next is the delta from the last snapshot this subscriber took to the newest; ok is false
// when there is nothing new. A subscription is used by one goroutine.
func (sub *Subscription) Next() (d Delta, ok bool) {
	next := sub.src.latest.Load()
	if next == nil || next == sub.seen {
		return Delta{}, false
	}
	d = Delta{Prev: sub.seen, Next: next}
	sub.seen = next
	d.Added, d.Removed = diff(d.Prev, next)
	return d, true
}

// diff lists the cgroups of next not in prev, and of prev not in next, by path (the
// unlinked containers included).
func diff(prev, next *Snapshot) (added, removed []cgroupid.Cgroup) {
	old := map[string]cgroupid.Cgroup{}
	for _, cg := range listed(prev) {
		old[cg.Path] = cg
	}
	nextListed := listed(next)
	now := make(map[string]bool, len(nextListed))
	for _, cg := range nextListed {
		now[cg.Path] = true
		if was, ok := old[cg.Path]; !ok || cg.InCPU && !was.InCPU || cg.InMemory && !was.InMemory {
			added = append(added, cg)
		}
	}
	for _, cg := range listed(prev) {
		if !now[cg.Path] {
			removed = append(removed, cg)
		}
	}
	return added, removed
}

// splitUnlinked separates the containers held back until the kubelet links them; the common
// walk, without any, is returned as it is.
func splitUnlinked(cgs []cgroupid.Cgroup) (exported, unlinked []cgroupid.Cgroup) {
	if !slices.ContainsFunc(cgs, func(cg cgroupid.Cgroup) bool { return cg.Unlinked }) {
		return cgs, nil
	}
	for _, cg := range cgs {
		if cg.Unlinked {
			unlinked = append(unlinked, cg)
		} else {
			exported = append(exported, cg)
		}
	}
	return exported, unlinked
}

// listed is every cgroup a snapshot lists: the exported ones and the unlinked containers.
func listed(snap *Snapshot) []cgroupid.Cgroup {
	if snap == nil {
		return nil
	}
	if len(snap.Unlinked) == 0 {
		return snap.Cgroups
	}
	return slices.Concat(snap.Cgroups, snap.Unlinked)
}
