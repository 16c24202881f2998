//go:build linux

package collector

import (
	"context"
	"fmt"
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quota-exporter/quota_exporter/exporter/internal/budget"
	"github.com/quota-exporter/quota_exporter/exporter/internal/jvm"
	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
)

func init() {
	register("jvm", true, "HotSpot JVMs from their perf data (hsperfdata, no attach): safepoints, GC pauses, JIT, heap, and GC/JIT threads against the quota", newJVMCollector,
		jvmInfoDesc, jvmPerfDataDesc, jvmSafepointsDesc, jvmSafepointSecondsDesc, jvmSafepointSyncDesc, jvmGCPausesDesc,
		jvmGCPauseSecondsDesc, jvmJITSecondsDesc, jvmHeapCommittedDesc, jvmHeapUsedDesc, jvmHeapMaxDesc, jvmMetaspaceDesc, jvmCPUCountDesc,
		jvmParallelGCDesc, jvmConcGCDesc, jvmJITThreadsDesc, jvmThreadsDesc)
}

var (
	jvmInfoDesc = newProcessDesc("jvm_info",
		"HotSpot JVM: Java version, VM name and garbage collector (from flags, else perf data collector names, else the JVM's default).", "version", "vm", "gc")
	jvmPerfDataDesc = newProcessDesc("jvm_perfdata_available",
		"1 when the JVM's perf data (/tmp/hsperfdata_<user>/<pid>) was read; 0 when disabled (-XX:-UsePerfData, -XX:+PerfDisableSharedMem), not found, or unreadable; the log says which.")
	jvmSafepointsDesc = newProcessDesc("jvm_safepoints_total",
		"Safepoints (stop-the-world operations) reached (perf data sun.rt.safepoints).")
	jvmSafepointSecondsDesc = newProcessDesc("jvm_safepoint_seconds_total",
		"Time application threads were stopped at safepoints (sun.rt.safepointTime).")
	jvmSafepointSyncDesc = newProcessDesc("jvm_safepoint_sync_seconds_total",
		"Time spent bringing threads to safepoints (sun.rt.safepointSyncTime): inflates when threads are descheduled or CFS-throttled.")
	jvmGCPausesDesc = newProcessDesc("jvm_gc_pauses_total",
		"GC pauses by normalised collector: young, full, or concurrent (the pauses of concurrent cycles: G1 remark/cleanup, ZGC and Shenandoah pauses).", "collector")
	jvmGCPauseSecondsDesc = newProcessDesc("jvm_gc_pause_seconds_total",
		"GC pause time by normalised collector (sun.gc.collector.N.time).", "collector")
	jvmJITSecondsDesc = newProcessDesc("jvm_jit_compilation_seconds_total",
		"Time spent in JIT compilation (java.ci.totalTime): the warm-up signal.")
	jvmHeapCommittedDesc = newProcessDesc("jvm_heap_committed_bytes",
		"Java heap committed: sum of the generation spaces' capacity (sun.gc.generation.*.space.*.capacity), no metaspace.")
	jvmHeapMaxDesc = newProcessDesc("jvm_heap_max_bytes",
		"Java heap maximum: MaxHeapSize (-Xmx, or MaxRAMPercentage of the memory limit the JVM saw), from the generations' sun.gc.generation.*.maxCapacity. The heap grows to it by design: the memory-creep alert counts that room as planned, not creep.")
	jvmHeapUsedDesc = newProcessDesc("jvm_heap_used_bytes",
		"Java heap used (sum of sun.gc.generation.*.space.*.used).")
	jvmMetaspaceDesc = newProcessDesc("jvm_metaspace_used_bytes",
		"Metaspace used (sun.gc.metaspace.used).")
	jvmCPUCountDesc = newProcessDesc("jvm_cpu_count",
		"Processor count the JVM sized itself for: -XX:ActiveProcessorCount, else its container rules for its version applied to the cgroup's quota (JDK 24+: the smallest quota on its path, an ancestor's too; shares before JDK 19/17.0.5/11.0.17) and the CPU affinity.")
	jvmParallelGCDesc = newProcessDesc("jvm_gc_parallel_threads",
		"Configured parallel (stop-the-world) GC worker threads: -XX:ParallelGCThreads, else the GC's formula from quota_jvm_cpu_count (G1/Parallel: n<=8 ? n : 8+(n-8)*5/8).")
	jvmConcGCDesc = newProcessDesc("jvm_gc_concurrent_threads",
		"Configured concurrent GC threads: -XX:ConcGCThreads, else the GC's formula.")
	jvmJITThreadsDesc = newProcessDesc("jvm_jit_threads",
		"Configured JIT compiler threads: -XX:CICompilerCount, else HotSpot's tiered formula from the CPU count.")
	jvmThreadsDesc = newProcessDesc("jvm_threads",
		"Live JVM threads by kind, from thread names in /proc/<pid>/task/*/comm: gc, jit, vm (VM infrastructure), app. GC and JIT workers start lazily, so gc can be below the configured count.", "kind")
)

// jvmKept is each JVM's last good reading, for scrapes whose read misses its time bound.
var jvmKept = newKeptSlot[*jvm.Info]()

// jvmNoteSlot is true once a process's "perf data unavailable" was logged.
var jvmNoteSlot = processes.NewSlot[bool]()

type jvmCollector struct{ env *Env }

func newJVMCollector(env *Env) (Collector, error) { return &jvmCollector{env}, nil }

func (c *jvmCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	meter := budget.MeterFrom(ctx)
	t := newProcessTally("jvm", c.env.Errors)
	t.tolerated["perf_data_mismatch"] = true // counted and logged; a state of one JVM, not a failed collector
	src := c.env.Processes
	all, _ := src.Processes(ctx)
	procs := processes.WithRuntime(all, processes.RuntimeJVM)
	// Perf data and thread names, in parallel and skipped per process while stuck; detection's
	// reading of this scrape is reused.
	res := processes.Each(ctx, src, procs, "perf data", func(ctx context.Context, p *processes.Process) (*jvm.Info, error) {
		if p.DetectedJVM() != nil {
			return p.DetectedJVM(), nil
		}
		return src.JVM.InspectProcess(ctx, p.JVMProcess(ctx, c.env.Config.ProcPath), c.env.Cgroups.JVMCgroup(p.Cgroup))
	})
	for i, r := range res {
		p := procs[i]
		t.add(fmt.Sprintf("pid %d", p.PID), processes.CountOnce(r.Err))
		info, ok := orKept(jvmKept, p, r)
		if !ok || info == nil {
			continue
		}
		e := newEmitter(ch, processLabels, processLabelValues(p)).metered(meter, p.Cgroup)
		version := ""
		if info.Version.Known() {
			version = info.Version.String()
		}
		e.gauge(jvmInfoDesc, 1, version, info.VMName, string(info.GC))
		e.gauge(jvmCPUCountDesc, float64(info.CPUCount))
		e.gauge(jvmParallelGCDesc, float64(info.Configured.ParallelGC))
		e.gauge(jvmConcGCDesc, float64(info.Configured.ConcurrentGC))
		e.gauge(jvmJITThreadsDesc, float64(info.Configured.JIT))
		for _, k := range []jvm.ThreadKind{jvm.ThreadGC, jvm.ThreadJIT, jvm.ThreadVM, jvm.ThreadApp} {
			e.gauge(jvmThreadsDesc, float64(info.Threads[k]), string(k))
		}
		if !info.PerfDataAvailable() || info.Counters == nil {
			if u := info.Unavailable; u != nil && u.Mismatch() {
				t.add(fmt.Sprintf("pid %d", p.PID), u) // perf_data_mismatch: another process's file, or nobody's
			}
			e.gauge(jvmPerfDataDesc, 0)
			c.logUnavailable(p, info)
			continue
		}
		e.gauge(jvmPerfDataDesc, 1)
		ctr := info.Counters
		e.counter(jvmSafepointsDesc, float64(ctr.Safepoints))
		e.counter(jvmSafepointSecondsDesc, ctr.SafepointSeconds)
		e.counter(jvmSafepointSyncDesc, ctr.SafepointSyncSeconds)
		collectors := make([]string, 0, len(ctr.GC))
		for k := range ctr.GC {
			collectors = append(collectors, string(k))
		}
		sort.Strings(collectors)
		for _, k := range collectors {
			s := ctr.GC[jvm.Collector(k)]
			e.counter(jvmGCPausesDesc, float64(s.Pauses), k)
			e.counter(jvmGCPauseSecondsDesc, s.Seconds, k)
		}
		e.counter(jvmJITSecondsDesc, ctr.JITSeconds)
		e.gauge(jvmHeapCommittedDesc, float64(ctr.HeapCommittedBytes))
		e.gauge(jvmHeapUsedDesc, float64(ctr.HeapUsedBytes))
		if ctr.HeapMaxBytes > 0 {
			e.gauge(jvmHeapMaxDesc, float64(ctr.HeapMaxBytes))
		}
		e.gauge(jvmMetaspaceDesc, float64(ctr.MetaspaceUsedBytes))
	}
	return t.err()
}

// logUnavailable says once per process why its perf data is missing; it is a state of the
// JVM, not an exporter error.
func (c *jvmCollector) logUnavailable(p *processes.Process, info *jvm.Info) {
	if jvmNoteSlot.Swap(p, true) {
		return
	}
	reason := "unknown"
	if info.Unavailable != nil {
		reason = info.Unavailable.Error()
	}
	c.env.Logger.Info("JVM perf data unavailable; exporting thread counts and configured sizes only",
		"pid", p.PID, "process", p.Name, "cgroup", p.Cgroup.Path, "reason", reason)
}
