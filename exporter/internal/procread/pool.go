package procread

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Budget bounds a Map: how many items are read at once, and how long one item may take
// before its worker is given up and replaced.
type Budget struct {
	// Workers is the number of items read at once (at least 1).
	Workers int
	// Item is the time one item may take; 0 means no per-item bound (only ctx).
	Item time.Duration
	// Gate, if set, skips items by Key: an item whose key is stuck is skipped with
	// ErrStuck, and an item that exceeds Item marks its key stuck.
	Gate *Gate
	// Kind labels the items' reads in the gate's stuck counts.
	Kind string
	// Pool is what the items' stuck reads count against: CgroupFiles or ProcessFiles
	// (nil: ProcessFiles).
	Pool *Pool
	// Tenant, if set, is item i's tenant: its stuck reads count against that tenant's budget
	// in Pool, and its items are refused while it is at the budget.
	Tenant func(i int) string
}

// Result is one item's outcome. Done is false for items Map never started (ctx ended);
// their Err is ErrTimeout.
type Result[R any] struct {
	Value R
	Err   error
	Done  bool
}

// Map reads items in parallel with b.Workers workers and returns their results in order.
// It returns when every item is done, given up or refused, or when ctx ends, whichever
// comes first, and never waits for a blocked read: a worker that exceeds b.Item is
// given up (its item fails with ErrTimeout, its key is marked stuck) and replaced by a
// new worker, so N stuck items cost one budget, not N. A worker given up on exits when its
// read returns; its result is discarded. fn must not write to memory the caller reads
// after Map returns (return the value instead): a stuck fn may still be running.
// Goroutines alive at any time: at most b.Workers plus the number of stuck items.
func Map[T, R any](ctx context.Context, b Budget, items []T, key func(T) string, fn func(T) (R, error)) []Result[R] {
	return MapInto(ctx, b, items, key, fn, nil)
}

// MapInto is Map writing its results into res's array when it is large enough (a caller that
// maps every window reuses one; nothing writes to it once MapInto has returned, stuck reads
// included).
func MapInto[T, R any](ctx context.Context, b Budget, items []T, key func(T) string, fn func(T) (R, error), res []Result[R]) []Result[R] {
	if cap(res) >= len(items) {
		res = res[:len(items)]
		clear(res)
	} else {
		res = make([]Result[R], len(items))
	}
	if len(items) == 0 {
		return res
	}
	workers := max(1, min(b.Workers, len(items)))
	pool := b.Pool
	if pool == nil {
		pool = ProcessFiles
	}
	tenantOf := func(i int) string {
		if b.Tenant == nil {
			return ""
		}
		return b.Tenant(i)
	}
	type worker struct {
		item   int // -1 between items
		tenant string
		start  time.Time
		gaveUp bool
	}
	var (
		mu     sync.Mutex
		sealed bool
		next   int
		active = map[*worker]bool{}
		exited = make(chan struct{}, 1)
	)
	signal := func() {
		select {
		case exited <- struct{}{}:
		default:
		}
	}
	var spawn func()
	run := func(w *worker) {
		defer signal()
		for {
			mu.Lock()
			if sealed || w.gaveUp || next >= len(items) || ctx.Err() != nil {
				delete(active, w)
				mu.Unlock()
				return
			}
			i := next
			next++
			mu.Unlock()

			// A read with a tenant takes one of the tenant's slots first, waiting (outside
			// the item's time) while they are all held by reads still running.
			tenant := tenantOf(i)
			release, err := pool.take(ctx, tenant)
			mu.Lock()
			if sealed {
				delete(active, w)
				mu.Unlock()
				if release != nil {
					release()
				}
				return
			}
			w.item, w.tenant, w.start = i, tenant, time.Now()
			mu.Unlock()

			var v R
			var entry uint64
			if err == nil && b.Gate != nil {
				entry, err = b.Gate.enter(key(items[i]), b.Kind)
			}
			if err == nil {
				v, err = guarded(fn, items[i])
				if b.Gate != nil {
					b.Gate.leave(key(items[i]), entry)
				}
			}
			if release != nil {
				release()
			}
			mu.Lock()
			if w.gaveUp {
				pool.returned(w.tenant) // counted by giveUp; it no longer holds a thread
			}
			if !sealed && !w.gaveUp {
				res[i] = Result[R]{Value: v, Err: err, Done: true}
			}
			w.item = -1
			mu.Unlock()
		}
	}
	spawn = func() {
		w := &worker{item: -1}
		active[w] = true
		go run(w)
	}
	mu.Lock()
	for range workers {
		spawn()
	}
	mu.Unlock()

	tick := time.Duration(0)
	if b.Item > 0 {
		tick = max(b.Item/4, 5*time.Millisecond)
	}
	var tc <-chan time.Time
	if tick > 0 {
		t := time.NewTicker(tick)
		defer t.Stop()
		tc = t.C
	}
	giveUp := func(w *worker, why string, isStuck bool) {
		w.gaveUp = true
		pool.gaveUp(w.tenant) // until the worker's read returns (run, under mu)
		delete(active, w)
		res[w.item] = Result[R]{Err: fmt.Errorf("%s: %w", why, ErrTimeout), Done: true}
		if b.Gate != nil && isStuck {
			b.Gate.MarkStuck(key(items[w.item]))
		}
	}
	for {
		mu.Lock()
		if len(active) == 0 {
			sealed = true
			mu.Unlock()
			break
		}
		if b.Item > 0 {
			now := time.Now()
			for w := range active {
				if w.item >= 0 && !w.gaveUp && now.Sub(w.start) > b.Item {
					giveUp(w, fmt.Sprintf("read took longer than %v", b.Item), true)
					if next < len(items) {
						spawn()
					}
				}
			}
		}
		mu.Unlock()
		select {
		case <-exited:
		case <-tc:
		case <-ctx.Done():
			mu.Lock()
			for w := range active {
				if w.item >= 0 {
					// Still outstanding, so refused by the gate until it returns; counted
					// as stuck once it has used a whole item budget.
					giveUp(w, "deadline reached", b.Item == 0 || time.Since(w.start) > b.Item)
				}
			}
			sealed = true
			for i := range res {
				if !res[i].Done {
					res[i].Err = fmt.Errorf("not read before the deadline: %w", ErrTimeout)
				}
			}
			mu.Unlock()
			return res
		}
	}
	for i := range res {
		if !res[i].Done {
			res[i].Err = fmt.Errorf("not read before the deadline: %w", ErrTimeout)
		}
	}
	return res
}

// guarded runs fn, turning a panic (a parser bug on odd input) into that item's error: a
// worker goroutine's panic would otherwise end the exporter.
func guarded[T, R any](fn func(T) (R, error), item T) (v R, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = recovered(r)
		}
	}()
	return fn(item)
}
