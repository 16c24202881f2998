// Package procread reads kernel files (under /proc and cgroupfs) with a size cap and a time
// bound. A read of /proc/<pid>/maps or environ takes the target's mmap lock; a target stuck in
// the kernel can make it block, and a scrape must never hang on one process or file.
//
// Single reads: ReadFile, ReadAt and Do run the read in a goroutine and give up at the
// context's deadline (DefaultTimeout without one) with ErrTimeout; the goroutine ends when
// the kernel returns. Used alone they leave behind one goroutine (and OS thread) per timed-out
// call, so anything read every scrape should go through a Gate.
//
// Stuck reads: a Gate (NewGate(collector)) allows at most one outstanding read per key.
//   - Enter(key, kind) claims the key, or returns ErrStuck at once while an earlier read of
//     it has not returned; the caller calls leave() when its read returns.
//   - MarkStuck(key) marks the outstanding read stuck (its caller stopped waiting).
//   - GateDo(ctx, g, key, kind, read) = Enter + a goroutine + wait until ctx ends; on timeout
//     it gives up and returns ErrTimeout; later calls get ErrStuck without a goroutine.
//   - Stuck() counts stuck reads by kind (quota_exporter_stuck_reads{collector,kind}).
//
// Keys: one per thing that can block independently, e.g. a file path, or "pid/starttime"
// for a process whose mmap lock is held (then every read of it is skipped while one is
// stuck). Use a gate per collector, and do not let two callers read the same key at the
// same time: the second one would be refused with ErrStuck.
//
// Parallel bounded reads: Map(ctx, Budget{Workers, Item, Gate, Kind}, items, key, fn) reads
// items with Workers goroutines; an item that takes longer than Item is given up (ErrTimeout,
// key stuck) and its worker replaced, so N stuck items cost ceil(N/Workers) item budgets in
// the first pass and nothing afterwards (ErrStuck). It returns when all items are done or
// ctx ends and never waits for a blocked read. fn returns its result instead of writing
// shared memory, because a stuck fn may still run after Map returned; a panic in fn
// becomes that item's error.
//
// ErrStuck wraps ErrTimeout: error counters report both as reason "timeout".
//
// Node-wide bounds: every read its caller gave up on and not yet returned holds an OS thread
// in the kernel. Such reads count against one of two pools (Pool): CgroupFiles for the
// kernel's cgroup files, ProcessFiles for processes' files, with a budget per tenant there
// (Budget.Pool and Budget.Tenant for Map, WithPool for the others; ProcessFiles without a
// tenant by default). A tenant at its budget has its new reads refused at once with
// ErrTenantOverloaded, and a pool at its ceiling every new read with ErrOverloaded, instead
// of starting a goroutine; the other pool's reads, and the other tenants', go on.
//
// Panics: a panic in a read function (a parser bug on a tenant's file) is recovered in the
// goroutine that ran it and returned as that read's error, wrapping ErrPanic.
package procread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// DefaultTimeout bounds one per-process read when the caller's context has no deadline.
const DefaultTimeout = 2 * time.Second

// ErrTimeout is returned when a read did not finish in time; the reading goroutine is
// left behind (it ends when the kernel returns).
var ErrTimeout = errors.New("read timed out")

// MaxStuck is the ceiling of CgroupFiles: reads of kernel cgroup files that their callers
// gave up on and that have not returned (a cgroup file behind a kernel lock). Per-key gates stop
// a stuck key from costing a thread per scrape; the pools stop many stuck keys from adding up:
// 64 threads cost ~64 × 8 KiB of kernel stack plus Go's ~8 KiB each, and the pools together
// stay well below Go's 10 000-thread limit, which ends the process.
const MaxStuck = 64

// ErrOverloaded is returned, without reading, while a pool's ceiling of stuck reads is
// outstanding.
var ErrOverloaded = fmt.Errorf("%w: stuck reads have not returned (node-wide ceiling)", ErrTimeout)

// ErrPanic wraps a panic recovered in a read function.
var ErrPanic = errors.New("panic while reading")

// Stuck is the number of stuck reads, node-wide and in both pools, that have not
// returned.
func Stuck() int { return CgroupFiles.Stuck() + ProcessFiles.Stuck() }

// recovered turns a recovered panic value into an error wrapping ErrPanic; the value is cut
// short (it may quote the input).
func recovered(r any) error {
	msg := fmt.Sprint(r)
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return fmt.Errorf("%w: %s", ErrPanic, msg)
}

// readState tracks whether a read's caller gave up on it before it returned: the side that
// comes second (the read returning, or the caller giving up) settles the pool's count.
type readState struct {
	state  atomic.Int32 // 0 running, 1 returned, 2 given up (stuck)
	pool   *Pool
	tenant string
}

// returned is called by the reading goroutine when the read returns.
func (a *readState) returned() {
	if !a.state.CompareAndSwap(0, 1) {
		a.pool.returned(a.tenant) // given up earlier: it no longer holds a thread
	}
}

// giveUp is called by the caller when it stops waiting.
func (a *readState) giveUp() {
	a.pool.gaveUp(a.tenant)
	if !a.state.CompareAndSwap(0, 2) {
		a.pool.returned(a.tenant) // returned meanwhile
	}
}

// ReadFile reads at most maxBytes of path within the context's deadline (DefaultTimeout if none).
func ReadFile(ctx context.Context, path string, maxBytes int64) ([]byte, error) {
	return Do(ctx, func() ([]byte, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, maxBytes))
	})
}

// ReadAt reads len(buf) bytes at off from path (used for /proc/<pid>/mem) within the deadline.
func ReadAt(ctx context.Context, f *os.File, buf []byte, off int64) (int, error) {
	type result struct {
		n   int
		err error
	}
	pool, tenant := poolOf(ctx)
	if err := pool.admit(tenant); err != nil {
		return 0, err
	}
	ch := make(chan result, 1)
	a := readState{pool: pool, tenant: tenant}
	go func() {
		defer a.returned()
		n, err := f.ReadAt(buf, off)
		ch <- result{n, err}
	}()
	ctx, cancel := withDefault(ctx)
	defer cancel()
	select {
	case r := <-ch:
		return r.n, r.err
	case <-ctx.Done():
		a.giveUp()
		return 0, fmt.Errorf("%s at %#x: %w", f.Name(), off, ErrTimeout)
	}
}

// Do runs read in a goroutine and gives up when the context ends.
func Do[T any](ctx context.Context, read func() (T, error)) (T, error) {
	return race(ctx, read, func() error { return ErrTimeout })
}

// race runs read in a goroutine and returns its result, or timedOut's error when ctx ends
// first (DefaultTimeout if ctx has no deadline); the goroutine left behind ends when read does,
// and counts against ctx's pool (WithPool) until then. A panic in read is its error (ErrPanic).
func race[T any](ctx context.Context, read func() (T, error), timedOut func() error) (T, error) {
	type result struct {
		v   T
		err error
	}
	var zero T
	pool, tenant := poolOf(ctx)
	if err := pool.admit(tenant); err != nil {
		return zero, err
	}
	ch := make(chan result, 1)
	a := readState{pool: pool, tenant: tenant}
	go func() {
		defer a.returned()
		var r result
		defer func() {
			if p := recover(); p != nil {
				r = result{err: recovered(p)}
			}
			ch <- r
		}()
		r.v, r.err = read()
	}()
	ctx, cancel := withDefault(ctx)
	defer cancel()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		a.giveUp()
		return zero, timedOut()
	}
}

func withDefault(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}
