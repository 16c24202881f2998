//go:build linux

package collector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/malloc"
	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
)

func init() {
	register("malloc", true, "glibc malloc arenas and heaps (heap headers via /proc/<pid>/mem), arena limit and allocator of watched processes", newMallocCollector,
		mallocArenasDesc, mallocHeapsDesc, mallocLimitDesc, allocatorInfoDesc, mallocHeuristicDesc)
}

// mallocRefresh: the heap layout is re-read at most this often per process (it walks maps
// and reads a few words of /proc/<pid>/mem per 64 MiB-aligned address).
const mallocRefresh = 30 * time.Second

var (
	mallocArenasDesc = newProcessDesc("process_malloc_arenas",
		"glibc malloc arenas besides the main one, counted from validated heap headers in /proc/<pid>/mem (see quota_exporter_malloc_heuristic_processes for processes counted from maps only).")
	mallocHeapsDesc = newProcessDesc("process_malloc_heaps",
		"glibc malloc heaps (64 MiB reservations) of the non-main arenas; a full arena chains another heap, so heaps >= arenas.")
	mallocLimitDesc = newProcessDesc("process_malloc_arena_limit",
		"Effective glibc arena limit including the main arena: GLIBC_TUNABLES glibc.malloc.arena_max (wins), else MALLOC_ARENA_MAX, else max(8 x online host CPUs, MALLOC_ARENA_TEST+1). Compare with quota_process_malloc_arenas + 1.")
	allocatorInfoDesc = newProcessDesc("process_allocator_info",
		"Memory allocator in use: glibc, jemalloc, tcmalloc or mimalloc (mapped library, LD_PRELOAD, exported symbols), other when no glibc is mapped (static Go, musl).",
		"allocator")
	mallocHeuristicDesc = prometheus.NewDesc(namespace+"_exporter_malloc_heuristic_processes",
		"quota_exporter: processes whose arenas were counted from /proc/<pid>/maps alone because /proc/<pid>/mem was not readable; that method undercounts full heaps.", nil, nil)
)

// heapLayout is a glibc process's malloc state and arena limit, re-read at most every
// mallocRefresh by whoever needs it first (malloc collector or smaps refresher).
type heapLayout struct {
	state  *malloc.State // nil when unknown
	limit  int
	at     time.Time // the last read, good or not: the next is due mallocRefresh later
	readAt time.Time // when state was read
	failed bool      // the last read failed and no recent state stands in
}

// standsIn tells whether h's state may stand in for a read that missed its time bound.
func (h heapLayout) standsIn() bool {
	return h.state != nil && time.Since(h.readAt) <= staleReading
}

// heapSlot is the one owner of each process's heap layout; smaps reads it too.
var heapSlot = processes.NewSlot[heapLayout]()

type mallocCollector struct{ env *Env }

func newMallocCollector(env *Env) (Collector, error) { return &mallocCollector{env}, nil }

// heapLayoutOf returns the heap layout of p kept on its state, re-reading it (maps, a few
// words of mem, environ once) when older than mallocRefresh. The malloc collector and the
// smaps refresher both read it from here. A re-read that misses its time bound keeps the
// last state for up to staleReading (see there).
func heapLayoutOf(ctx context.Context, env *Env, p *processes.Process) (heapLayout, error) {
	h := heapSlot.Load(p)
	if !h.at.IsZero() && time.Since(h.at) < mallocRefresh {
		return h, nil
	}
	environ, envErr := env.Processes.Environ(ctx, p)
	st, limit, err := malloc.InspectWithLimit(ctx, env.Config.ProcPath, env.Config.SysPath, p.PID,
		malloc.Known{Env: environ, EnvErr: envErr, ThreadNames: p.ThreadNames(ctx, env.Config.ProcPath), Allocators: env.Processes.Allocators})
	if errors.Is(err, malloc.ErrLoading) {
		return heapLayout{failed: true}, nil
	}
	now := time.Now()
	switch {
	case st != nil:
		h = heapLayout{state: st, limit: limit, at: now, readAt: now}
	case missedBound(err) && h.standsIn():
		h.at, h.failed = now, false
	default:
		h = heapLayout{at: now, failed: true}
	}
	heapSlot.Store(p, h)
	return h, err
}

func (c *mallocCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	meter := budget.MeterFrom(ctx)
	t := newProcessTally("malloc", c.env.Errors)
	procs, _ := c.env.Processes.Processes(ctx)
	heuristic := 0
	// maps, mem and environ, in parallel and skipped per process while stuck.
	res := processes.Each(ctx, c.env.Processes, procs, "maps", func(ctx context.Context, p *processes.Process) (heapLayout, error) {
		return heapLayoutOf(ctx, c.env, p)
	})
	for i, r := range res {
		p, entry := procs[i], r.Value
		t.add(fmt.Sprintf("pid %d", p.PID), processes.CountOnce(r.Err))
		if h := heapSlot.Load(p); missedBound(r.Err) && entry.state == nil && h.standsIn() {
			entry = h // the read is stuck: the last layout stands in (see staleReading)
		}
		if entry.failed || entry.state == nil {
			continue
		}
		e := newEmitter(ch, processLabels, processLabelValues(p)).metered(meter, p.Cgroup)
		e.gauge(allocatorInfoDesc, 1, entry.state.Allocator)
		if entry.state.Allocator != malloc.Glibc {
			continue
		}
		e.gauge(mallocArenasDesc, float64(entry.state.Arenas))
		e.gauge(mallocHeapsDesc, float64(entry.state.Heaps))
		if entry.limit > 0 {
			e.gauge(mallocLimitDesc, float64(entry.limit))
		}
		if entry.state.Method == malloc.MethodMaps {
			heuristic++
		}
	}
	ch <- prometheus.MustNewConstMetric(mallocHeuristicDesc, prometheus.GaugeValue, float64(heuristic))
	return t.err()
}
