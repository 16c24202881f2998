package procread

import (
	"context"
	"fmt"
	"sync"
)

// ErrStuck is returned, without reading, for a key whose earlier read has not returned yet.
// It wraps ErrTimeout, so error counters classify it as a timeout.
var ErrStuck = fmt.Errorf("%w: an earlier read of the same file or process has not returned (skipped until it does)", ErrTimeout)

// Gate allows at most one outstanding read per key (a file path, a pid and start time).
// A read that outlived its caller's budget marks its key stuck; later reads of that key
// fail at once with ErrStuck, without a new goroutine or system call, until the original
// read returns. OS threads blocked in the kernel are therefore bounded by the number of
// stuck keys, not by the number of scrapes. The zero value is not usable; use NewGate.
type Gate struct {
	name string // the collector, for quota_exporter_stuck_reads{collector}

	mu   sync.Mutex
	busy map[string]outstanding
	seq  uint64 // numbers the entries, so that a leave deletes only its own
}

// outstanding is one key's read, held by value: entering allocates nothing (Map enters
// every item of every window).
type outstanding struct {
	kind  string
	stuck bool
	seq   uint64
}

// NewGate returns an empty gate; name labels its stuck counts (the collector's name).
func NewGate(name string) *Gate {
	return &Gate{name: name, busy: map[string]outstanding{}}
}

// Name is the name the gate was created with.
func (g *Gate) Name() string { return g.name }

// Enter claims key for one read of the given kind ("cpu.stat", "environ", ...). It returns
// ErrStuck if a read of key is still outstanding; otherwise the caller must call leave once
// the read has returned (also when the caller has given up on it meanwhile).
func (g *Gate) Enter(key, kind string) (leave func(), err error) {
	seq, err := g.enter(key, kind)
	if err != nil {
		return nil, err
	}
	return func() { g.leave(key, seq) }, nil
}

// enter is Enter without the closure: the caller passes the entry's number to leave.
func (g *Gate) enter(key, kind string) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.busy[key]; ok {
		return 0, ErrStuck
	}
	g.seq++
	g.busy[key] = outstanding{kind: kind, seq: g.seq} // no clock read: Map times the item, and clocks are not free everywhere
	return g.seq, nil
}

// leave ends the read enter numbered seq.
func (g *Gate) leave(key string, seq uint64) {
	g.mu.Lock()
	if o, ok := g.busy[key]; ok && o.seq == seq {
		delete(g.busy, key)
	}
	g.mu.Unlock()
}

// MarkStuck marks key's outstanding read stuck: its caller stopped waiting for it. It is
// counted by Stuck until the read returns and its leave runs.
func (g *Gate) MarkStuck(key string) {
	g.mu.Lock()
	if o, ok := g.busy[key]; ok {
		o.stuck = true
		g.busy[key] = o
	}
	g.mu.Unlock()
}

// Stuck counts the stuck reads still outstanding, by kind.
func (g *Gate) Stuck() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]int{}
	for _, o := range g.busy {
		if o.stuck {
			out[o.kind]++
		}
	}
	return out
}

// GateDo runs read for key in its own goroutine and waits until it returns or ctx ends
// (DefaultTimeout if ctx has no deadline). On timeout the read is given up and key marked
// stuck; it returns ErrTimeout now and ErrStuck to later calls until the read returns.
// A key already outstanding returns ErrStuck at once, without starting a goroutine.
func GateDo[T any](ctx context.Context, g *Gate, key, kind string, read func() (T, error)) (T, error) {
	var zero T
	leave, err := g.Enter(key, kind)
	if err != nil {
		return zero, err
	}
	return race(ctx, func() (T, error) {
		defer leave()
		return read()
	}, func() error {
		g.MarkStuck(key)
		return fmt.Errorf("%s %s: %w", kind, key, ErrTimeout)
	})
}
