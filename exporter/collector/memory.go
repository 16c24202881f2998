//go:build linux

package collector

import (
	"context"
	"errors"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupid"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

func init() {
	addFlags(func(app *kingpin.Application, f *Flags) {
		app.Flag("memory.detail", "Add memory.stat by type (anon, file, kernel, sock, shmem, anon_thp), memory.events (high, max, oom, oom_group_kill; v2), the peak usage and memory.high to the memory collector: what an RSS-creep investigation needs, 7-13 more series per cgroup than the default budget.").BoolVar(&f.cfg.MemoryDetail)
	})
	register("memory", true, "cgroup memory limit, usage, working set, RSS, cache and OOM kills", newMemoryCollector,
		memLimitDesc, memUsageDesc, memWorkingSetDesc, memRSSDesc, memCacheDesc, memOOMKillsDesc,
		memPressureWaitingDesc, memPressureStalledDesc,
		memStatDesc, memEventsDesc, memPeakDesc, memHighDesc)
}

var (
	memLimitDesc = newCgroupDesc("memory_limit_bytes",
		"Memory limit (v1 memory.limit_in_bytes, v2 memory.max). Absent when unlimited.")
	memUsageDesc = newCgroupDesc("memory_usage_bytes",
		"Memory charged to the cgroup including page cache (v1 memory.usage_in_bytes, v2 memory.current).")
	memWorkingSetDesc = newCgroupDesc("memory_working_set_bytes",
		"Usage minus inactive file cache, as cAdvisor defines container_memory_working_set_bytes: what the OOM killer and kubelet eviction look at.")
	memRSSDesc = newCgroupDesc("memory_rss_bytes",
		"Anonymous memory (v1 memory.stat total_rss, v2 memory.stat anon).")
	memCacheDesc = newCgroupDesc("memory_cache_bytes",
		"Page cache (v1 memory.stat total_cache, v2 memory.stat file).")
	memOOMKillsDesc = newCgroupDesc("memory_oom_kills_total",
		"Processes killed by the OOM killer, counted once, at the cgroup exported for the killed process: v1 memory.oom_control oom_kill; "+
			"v2 memory.events.local oom_kill (Linux 5.2+; on older kernels memory.events, which repeats each kill at every ancestor, a pod's containers' at the pod), "+
			"for a container memory.events oom_kill (its own nested cgroups, such as crun's subgroup, are its own); "+
			"on v2 less one per oom_group_kill (memory.oom.group: the kernel counts a group kill's victim twice).")
	// --memory.detail only.
	memStatDesc = newCgroupDesc("memory_stat_bytes",
		"--memory.detail: memory.stat by type, including descendants: anon, file, kernel, sock, shmem, anon_thp (v2; v1: anon = total_rss, file = total_cache, shmem = total_shmem, anon_thp = total_rss_huge; no kernel or sock).",
		"type")
	memEventsDesc = newCgroupDesc("memory_events_total",
		"--memory.detail: v2 memory.events, including descendants: high (reclaim forced above memory.high), max (allocations that hit memory.max), oom, oom_group_kill (oom_kill is quota_memory_oom_kills_total).",
		"type")
	memPeakDesc = newCgroupDesc("memory_peak_bytes",
		"--memory.detail: highest usage seen by the kernel (v2 memory.peak, Linux 5.19+; v1 memory.max_usage_in_bytes).")
	memHighDesc = newCgroupDesc("memory_high_bytes",
		"--memory.detail: v2 memory.high, the usage above which the kernel throttles and reclaims. Absent when unset (max).")
	memPressureWaitingDesc = newCgroupDesc("memory_pressure_waiting_seconds_total",
		"PSI: time in which at least one task of the cgroup stalled on memory (memory.pressure some total; cgroup v2).")
	memPressureStalledDesc = newCgroupDesc("memory_pressure_stalled_seconds_total",
		"PSI: time in which all non-idle tasks of the cgroup stalled on memory (memory.pressure full total; cgroup v2).")
)

type memoryCollector struct {
	env  *Env
	gate *procread.Gate // per cgroup (collectCgroups)
}

func newMemoryCollector(env *Env) (Collector, error) {
	return &memoryCollector{env: env, gate: cgroupGate(env, "memory")}, nil
}

func (c *memoryCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	t := newTally("memory", c.env.Errors)
	l := c.env.Cgroups.Layout()
	if l.Memory == nil {
		return errNoHierarchy("memory")
	}
	cgs, walkErrs := c.env.Cgroups.Cgroups(ctx)
	for _, we := range walkErrs {
		t.note(we.Err) // counted by the cgroup source
	}
	in := make([]cgroupid.Cgroup, 0, len(cgs))
	for _, cg := range cgs {
		// The v2 root has no memory.current: its numbers are the host's (node_exporter's job).
		if cg.InMemory && l.Memory.HasControlFiles(cg.Path) {
			in = append(in, cg)
		}
	}
	detail := c.env.Config.MemoryDetail
	collectCgroups(ctx, c.gate, in, t, ch, func(cg cgroupid.Cgroup, e emitter) error { return collectMemory(l, cg, detail, e) })
	return t.err()
}

func collectMemory(l *cgroupfs.Layout, cg cgroupid.Cgroup, detail bool, e emitter) error {
	dir := l.Memory.Dir(cg.Path)
	m, err := l.Memory.ReadMemoryStats(dir)
	if err != nil {
		return err
	}
	if cg.HasMemoryLimit { // read by discovery in this scrape
		m.Limit = cg.MemoryLimit
	} else if m.Limit, err = l.Memory.ReadMemoryLimit(dir); err != nil {
		return err
	}
	if m.Limit > 0 {
		e.gauge(memLimitDesc, float64(m.Limit))
	}
	e.gauge(memUsageDesc, float64(m.Usage))
	e.gauge(memWorkingSetDesc, float64(m.WorkingSet))
	e.gauge(memRSSDesc, float64(m.RSS))
	e.gauge(memCacheDesc, float64(m.Cache))
	if m.HasOOMKills && l.Memory.Version == 2 && !cgroupid.OOMKillsWithDescendants(cg.Kind) {
		// memory.events counts the descendants' kills too: a pod's would repeat its containers'.
		kills, ok, err := cgroupfs.ReadOOMKillsLocal(dir)
		if err != nil {
			return err
		}
		if ok {
			m.OOMKills = kills
		}
	}
	if m.HasOOMKills {
		e.counter(memOOMKillsDesc, float64(m.OOMKills))
	}
	if detail {
		if err := collectMemoryDetail(l.Memory, dir, m, e); err != nil {
			return err
		}
	}
	p, err := l.Memory.ReadPSI(dir, "memory")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) { // v1, or a kernel without PSI
			return nil
		}
		return err
	}
	e.counter(memPressureWaitingDesc, p.SomeSeconds)
	if p.HasFull {
		e.counter(memPressureStalledDesc, p.FullSeconds)
	}
	return nil
}

// collectMemoryDetail exports --memory.detail's series: memory.stat and memory.events come
// from the reads above; the peak and memory.high are one more small file each.
func collectMemoryDetail(h *cgroupfs.Hierarchy, dir string, m cgroupfs.Memory, e emitter) error {
	st := m.Stat
	for _, s := range []struct {
		typ string
		v   uint64
		has bool
	}{
		{"anon", st.Anon, st.HasAnon}, {"file", st.File, st.HasFile}, {"kernel", st.Kernel, st.HasKernel},
		{"sock", st.Sock, st.HasSock}, {"shmem", st.Shmem, st.HasShmem}, {"anon_thp", st.AnonTHP, st.HasTHP},
	} {
		if s.has {
			e.gauge(memStatDesc, float64(s.v), s.typ)
		}
	}
	if ev := m.Events; ev.Has {
		e.counter(memEventsDesc, float64(ev.High), "high")
		e.counter(memEventsDesc, float64(ev.Max), "max")
		e.counter(memEventsDesc, float64(ev.OOM), "oom")
		if ev.HasGroupKill {
			e.counter(memEventsDesc, float64(ev.OOMGroupKill), "oom_group_kill")
		}
	}
	peak, ok, err := h.ReadMemoryPeak(dir)
	if err != nil {
		return err
	}
	if ok {
		e.gauge(memPeakDesc, float64(peak))
	}
	high, err := h.ReadMemoryHigh(dir) // v1 has none
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if high > 0 {
		e.gauge(memHighDesc, float64(high))
	}
	return nil
}
