package collector

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/malloc"
)

func init() {
	register("malloc", true, "glibc malloc arenas and heaps (heap headers via /proc/<pid>/mem), arena limit and allocator of watched processes", newMallocCollector)
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
	mallocHeuristicDesc = document(prometheus.NewDesc(namespace+"_exporter_malloc_heuristic_processes",
		"quota_exporter: processes whose arenas were counted from /proc/<pid>/maps alone because /proc/<pid>/mem was not readable; that method undercounts full heaps.", nil, nil))
)

type mallocEntry struct {
	state  *malloc.State
	limit  int
	at     time.Time
	failed bool
}

type mallocCollector struct {
	env *Env
	src *ProcessSource
}

func newMallocCollector(env *Env) (Collector, error) {
	src, err := processSourceFor(env)
	if err != nil {
		return nil, err
	}
	return &mallocCollector{env, src}, nil
}

// mallocState returns the cached heap layout of p, re-reading it when older than mallocRefresh.
func mallocState(ctx context.Context, env *Env, p *process) (mallocEntry, error) {
	v, _ := p.state.data.Load("malloc")
	entry, _ := v.(mallocEntry)
	if !entry.at.IsZero() && time.Since(entry.at) < mallocRefresh {
		return entry, nil
	}
	st, err := malloc.Inspect(ctx, env.Config.ProcPath, p.PID)
	if err != nil {
		// Remember the failure so a process we may not read is not retried every scrape.
		p.state.data.Store("malloc", mallocEntry{at: time.Now(), failed: true})
		return mallocEntry{failed: true}, err
	}
	entry = mallocEntry{state: st, at: time.Now()}
	if st.Allocator == malloc.Glibc {
		entry.limit, _, err = malloc.ArenaLimit(ctx, env.Config.ProcPath, env.Config.SysPath, p.PID)
	}
	p.state.data.Store("malloc", entry)
	return entry, err
}

func (c *mallocCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	t := newProcessTally("malloc", c.env.Errors)
	procs, _ := c.src.Processes(ctx)
	heuristic := 0
	for _, p := range procs {
		entry, err := mallocState(ctx, c.env, p)
		t.add(fmt.Sprintf("pid %d", p.PID), err)
		if entry.failed || entry.state == nil {
			continue
		}
		e := newEmitter(ch, processLabels, processLabelValues(p))
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
