package diagnose

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/quota-exporter/quota_exporter/exporter/internal/jvm"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// Thresholds of the rules, named so the docs and tests can cite them. Those the mixin's
// alerts have too are read from the mixin's config (thresholds.go); diagnose's own are here,
// and where the mixin has a counterpart, why diagnose departs from it (docs/diagnose.md).
const (
	// criticalThrottledShare: throttled in at least this share of the sampler's windows
	// makes a runtime finding critical (the application stalls every few seconds). The
	// mixin gates its runtime alerts' severity on throttledPeriodsRatioForCause and
	// frozenSecondsForCause over 10 minutes instead: diagnose sees seconds, not minutes, and
	// reports an oversized runtime whether or not it is throttled now (the fix is free).
	criticalThrottledShare = 0.25
	// throttlingShare: the share of throttled windows from which throttling with no runtime
	// cause is a finding of its own; throttlingCriticalShare makes it critical. The mixin
	// alerts on frozen windows over 10 minutes (frozenSecondsPer10m), a rate a 15 s
	// observation cannot measure.
	throttlingShare         = 0.2
	throttlingCriticalShare = 0.5
	// throttlingPeriodsShare: below a tenth of the periods throttled, a workload at its limit
	// is not worth a finding however many windows saw one throttled period (seen: a JVM using
	// 0.97 of its 1-core limit, 6 of 100 periods and 5 ms throttled in 10 s, in 4 windows).
	throttlingPeriodsShare = 0.1
	// memoryCriticalShare: a process whose anonymous memory is this share of the memory
	// limit, with too many arenas, is near an OOM kill. Below the mixin's
	// memoryNearLimitRatio (the whole cgroup's working set): arenas keep growing, so the
	// finding is critical before the cgroup alert fires.
	memoryCriticalShare = 0.8
	// arenaHeapFloor: arenas whose heaps hold less than this each on average cost too little
	// to be worth a change (a JVM's dozen near-empty arenas: 2 MiB for 16). The mixin's
	// mallocArenaResidentShare is a share of RSS over 30 minutes; one read cannot trend.
	arenaHeapFloor = 1 << 20
	// warmupDemandFactor: the warm-up's demand (usage + throttled time) must exceed the limit
	// by this factor; below it the throttling is bursts within a fitting average (the
	// throttling rule's burst advice).
	warmupDemandFactor = 1.1
	// warmupThrottledShare: a process in its first minutes whose cgroup had at least this
	// share of its CFS periods throttled is throttled while warming up (the steady state, when
	// seen, must stay below it): a warning, below the mixin's warmupThrottledPeriodsRatio,
	// from which the finding is critical (warmupCriticalShare). The alert pages; diagnose is
	// asked, and a warm-up throttled in a tenth of its periods already starts slower.
	warmupThrottledShare = 0.1
	// systemThrottledWindowsShare: kernel contention also counts when throttled in this share
	// of the sampler's windows (the throttling rule's); the mixin, without windows over 5
	// minutes, looks at periods only.
	systemThrottledWindowsShare = throttlingShare
)

// Thresholds shared with the mixin's alerts (quota-exporter-mixin/config.libsonnet).
var (
	// warmupCriticalShare: the mixin's warmupThrottledPeriodsRatio (QuotaCPUThrottlingDuringWarmup).
	warmupCriticalShare = mixin.WarmupThrottledPeriodsRatio
	// systemShare: kernel time from this share of a throttled cgroup's CPU use is kernel
	// contention; systemMinCores ignores idle cgroups; systemThrottledShare is the share of
	// its periods throttled (QuotaHighSystemCPUUnderQuota's systemCPUShare,
	// systemCPUMinCores and systemCPUThrottledPeriodsRatio).
	systemShare          = mixin.SystemCPUShare
	systemMinCores       = mixin.SystemCPUMinCores
	systemThrottledShare = mixin.SystemCPUThrottledPeriodsRatio
	// arenasPerLimitCPU: more glibc arenas than this per CPU of the limit (⌈limit⌉) is a
	// finding (the mixin's mallocArenasPerLimitCore).
	arenasPerLimitCPU = mixin.MallocArenasPerLimitCore
)

// Diagnose runs every rule over the workloads and returns the findings, worst first.
func Diagnose(ws []Workload) []Finding {
	var out []Finding
	// explained: limits whose throttling a runtime finding of a workload under them explains
	// (the runtime's fix is the cause's fix, and its finding carries the throttling).
	explained := map[string]bool{}
	for i := range ws {
		w := &ws[i]
		for _, p := range w.Processes {
			cpuCause := false
			for _, rule := range []func(*Workload, Process) (Finding, bool){jvmThreads, goMaxProcs, mallocArenas, warmup} {
				f, ok := rule(w, p)
				// A young process whose runtime oversubscribes the limit is throttled by that,
				// not by its warm-up: one cause, one fix.
				if !ok || (f.Rule == RuleWarmup && cpuCause) {
					continue
				}
				out = append(out, f)
				if f.Rule != RuleMallocArenas {
					cpuCause = true
					explained[w.bindingOrSelf()] = true
				}
			}
		}
	}
	// Throttling (and kernel contention, judged with it) is counted once per limit: a pod and
	// its containers share the pod's. It is reported on the cgroup that sets the limit, or on
	// the first workload under it when that cgroup is not watched.
	reported := map[string]bool{}
	for _, owner := range []bool{true, false} {
		for i := range ws {
			w := &ws[i]
			k := w.bindingOrSelf()
			if reported[k] || (owner && k != w.Cgroup) {
				continue
			}
			reported[k] = true
			// Kernel contention is a cause of its own, whatever the runtime findings.
			if f, ok := kernelContention(w); ok {
				out = append(out, f)
			} else if f, ok := throttling(w); ok && !explained[k] {
				out = append(out, f)
			}
		}
	}
	Sort(out)
	return out
}

// bindingOrSelf is the cgroup whose limit binds the workload: its binding cgroup, itself when it has none.
func (w *Workload) bindingOrSelf() string {
	if w.BindingCgroup != "" {
		return w.BindingCgroup
	}
	return w.Cgroup
}

// Sort orders findings worst first: severity, then the workload's throttled share, then name.
func Sort(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Severity.rank() != b.Severity.rank() {
			return a.Severity.rank() > b.Severity.rank()
		}
		if a.Workload != b.Workload {
			return a.Workload < b.Workload
		}
		return a.Rule < b.Rule
	})
}

// Worst is the highest severity among the findings, "" when there are none.
func Worst(fs []Finding) Severity {
	var s Severity
	for _, f := range fs {
		if f.Severity.rank() > s.rank() {
			s = f.Severity
		}
	}
	return s
}

// Rule names (stable: they are part of the JSON schema).
const (
	RuleJVMThreads   = "jvm_threads_above_limit"
	RuleGoMaxProcs   = "go_gomaxprocs_above_limit"
	RuleMallocArenas = "malloc_arenas_above_limit"
	RuleThrottling   = "cpu_throttling"
	RuleWarmup       = "cpu_warmup_throttling"
	RuleKernel       = "kernel_contention_under_quota"
)

// throttledShare is the share of sampler windows with throttling, 0 without windows.
func (w *Workload) throttledShare() float64 {
	if w.Windows <= 0 {
		return 0
	}
	return float64(w.ThrottledWindows) / float64(w.Windows)
}

// cpuSeverity: critical when the workload was throttled often enough to stall it.
func (w *Workload) cpuSeverity() Severity {
	if w.throttledShare() >= criticalThrottledShare {
		return Critical
	}
	return Warning
}

// limitCPUs is the whole number of CPUs a runtime should size itself for: ceil(limit), so
// that a 2.5-core limit still uses its third CPU's share; at least 1.
func limitCPUs(limit float64) int {
	return max(1, int(math.Ceil(limit-1e-9)))
}

func (w *Workload) limitFacts() []Fact {
	fs := []Fact{{Name: "cpu_limit_cores", Value: w.LimitCores, Text: "CPU limit " + cores(w.LimitCores) + limitWhere(w)}}
	if w.Windows > 0 {
		fs = append(fs, Fact{Name: "throttled_windows", Value: float64(w.ThrottledWindows),
			Text: fmt.Sprintf("throttled in %d of the last %d s", w.ThrottledWindows, w.Windows)})
	}
	if w.ThrottledSeconds > 0 {
		fs = append(fs, Fact{Name: "throttled_seconds", Value: w.ThrottledSeconds,
			Text: fmt.Sprintf("%.2f s throttled (summed over CPUs)", w.ThrottledSeconds)})
	}
	return append(fs, w.pauseFacts()...)
}

// pauseFacts: how long the workload stood still at a time, from each source that saw it.
func (w *Workload) pauseFacts() []Fact {
	var fs []Fact
	p := w.Pauses
	if p.LongestThrottledRun > 0 {
		fs = append(fs, Fact{Name: "longest_throttled_run_seconds", Value: float64(p.LongestThrottledRun),
			Text: fmt.Sprintf("throttled %d s in a row at most", p.LongestThrottledRun)})
	}
	if p.LongestFrozenRun > 0 {
		fs = append(fs, Fact{Name: "longest_frozen_run_seconds", Value: float64(p.LongestFrozenRun),
			Text: fmt.Sprintf("longest freeze %d s (over 90%% of the periods throttled)", p.LongestFrozenRun)})
	}
	switch b := p.LongestStall; {
	case b.High > 0:
		fs = append(fs, Fact{Name: "longest_stall_seconds", Value: b.High,
			Text: fmt.Sprintf("longest CFS stall %s–%s", duration(b.Low), duration(b.High))})
	case b.Low > 0:
		fs = append(fs, Fact{Name: "longest_stall_seconds", Value: b.Low, Text: "longest CFS stall over " + duration(b.Low)})
	}
	return fs
}

// duration is seconds as "250 ms" below a second, "2.5 s" above.
func duration(s float64) string {
	if s < 1 {
		return strconv.FormatFloat(s*1e3, 'g', 3, 64) + " ms"
	}
	return strconv.FormatFloat(s, 'g', 3, 64) + " s"
}

func limitWhere(w *Workload) string {
	if w.BindingCgroup != "" && w.BindingCgroup != w.Cgroup {
		return " (set on ancestor " + w.BindingCgroup + ")"
	}
	return ""
}

func onAncestor(w *Workload) bool { return w.BindingCgroup != "" && w.BindingCgroup != w.Cgroup }

func cores(c float64) string {
	s := strconv.FormatFloat(c, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "1" {
		return "1 core"
	}
	return s + " cores"
}

// coreAdj is a limit as an adjective: "0.5-core".
func coreAdj(c float64) string {
	return strings.TrimSuffix(strings.TrimSuffix(cores(c), "s"), " core") + "-core"
}

func newFinding(rule string, sev Severity, w *Workload, p *Process, title string) Finding {
	f := Finding{Rule: rule, Severity: sev, Title: title, Cgroup: w.Cgroup, Workload: w.Name()}
	if p != nil {
		f.Process, f.PID, f.Runtime = p.Name, p.PID, p.Runtime
	}
	return f
}

// jvmThreads: a JVM that sized its GC and JIT pools for more CPUs than its limit wakes all
// of them at each collection, and they spend the period's quota in a few milliseconds.
//
// The runtime thread rules (jvmThreads, goMaxProcs) report a JVM's CPU count or parallel GC
// threads above ⌈limit⌉ and GOMAXPROCS above max(⌈limit⌉, 2) (Go 1.25's own default), where
// the mixin alerts from gcThreadsPerLimitCore and goMaxProcsPerLimitCore (2) per core:
// diagnose computes the exact setting, so any excess is worth its fix, while an alert across
// a fleet waits for a gross one. Every JVM or Go program the alerts fire for gets the finding
// (TestThresholdsAgainstMixin).
func jvmThreads(w *Workload, p Process) (Finding, bool) {
	j := p.JVM
	if j == nil || w.LimitCores <= 0 {
		return Finding{}, false
	}
	n := limitCPUs(w.LimitCores)
	if j.CPUCount <= n && j.ParallelGC <= n {
		return Finding{}, false
	}
	v, _ := jvm.ParseVersion(j.Version)
	gc := jvm.GC(j.GC)
	// The fix's sizes come from HotSpot's own ergonomics (package jvm), for the same GC.
	want := jvm.ConfiguredThreads(v, gc, n, jvm.NoFlags(), int64(j.HeapMax))
	// Pools larger than the CPU count's defaults were set by flags, which
	// ActiveProcessorCount does not override: those flags must change too.
	def := jvm.ConfiguredThreads(v, gc, j.CPUCount, jvm.NoFlags(), int64(j.HeapMax))
	explicit := j.ParallelGC != def.ParallelGC

	f := newFinding(RuleJVMThreads, w.cpuSeverity(), w, &p, "JVM GC/JIT threads sized for more CPUs than the limit")
	f.Evidence = append([]Fact{
		{Name: "jvm_cpu_count", Value: float64(j.CPUCount), Text: fmt.Sprintf("JVM sized for %d CPUs", j.CPUCount)},
		{Name: "gc_parallel_threads", Value: float64(j.ParallelGC), Text: fmt.Sprintf("%d parallel GC threads (%s GC)", j.ParallelGC, gcName(j.GC))},
		{Name: "gc_concurrent_threads", Value: float64(j.ConcurrentGC), Text: fmt.Sprintf("%d concurrent GC threads", j.ConcurrentGC)},
		{Name: "jit_threads", Value: float64(j.JIT), Text: fmt.Sprintf("%d JIT compiler threads", j.JIT)},
	}, w.limitFacts()...)
	f.Mechanism = fmt.Sprintf("Each collection wakes %d GC threads at once; running together they can use the %s quota of a period within a few milliseconds, "+
		"and the kernel then stops every thread of the cgroup, application included, until the next period.", j.ParallelGC, coreAdj(w.LimitCores))
	if onAncestor(w) {
		f.Mechanism += " The limit is set on an ancestor cgroup, which JVMs before JDK 24 do not read."
	}
	threads := fmt.Sprintf("ParallelGCThreads=%d, ConcGCThreads=%d, CICompilerCount=%d", want.ParallelGC, want.ConcurrentGC, want.JIT)
	f.Fix.Settings = map[string]string{"-XX:ActiveProcessorCount": strconv.Itoa(n)}
	f.Fix.Text = fmt.Sprintf("Start the JVM with -XX:ActiveProcessorCount=%d (the limit rounded up); by its own rules it then sizes %s.", n, threads)
	explicitFlags := fmt.Sprintf("-XX:ParallelGCThreads=%d -XX:CICompilerCount=%d", want.ParallelGC, want.JIT)
	if gc != jvm.GCParallel && gc != jvm.GCSerial && gc != jvm.GCEpsilon {
		explicitFlags = fmt.Sprintf("-XX:ParallelGCThreads=%d -XX:ConcGCThreads=%d -XX:CICompilerCount=%d", want.ParallelGC, want.ConcurrentGC, want.JIT)
	}
	if explicit {
		f.Fix.Settings["-XX:ParallelGCThreads"] = strconv.Itoa(want.ParallelGC)
		f.Fix.Text += fmt.Sprintf(" %d parallel GC threads is not the default for %d CPUs: an explicit -XX:ParallelGCThreads must change to %d as well.", j.ParallelGC, j.CPUCount, want.ParallelGC)
	} else {
		f.Fix.Alternatives = append(f.Fix.Alternatives, "keep the CPU count and set the pools alone: "+explicitFlags)
	}
	if w.HostCPUs == 0 || j.CPUCount <= w.HostCPUs {
		f.Fix.Alternatives = append(f.Fix.Alternatives, fmt.Sprintf("or raise the CPU limit to %d cores, the count the JVM sized itself for", j.CPUCount))
	}
	return f, true
}

func gcName(gc string) string {
	if gc == "" {
		return "unknown"
	}
	return gc
}

// goMaxProcs: a Go program with more Ps than its limit runs that many threads at once
// (GC workers take a quarter of them) and exhausts the quota early in each period.
func goMaxProcs(w *Workload, p Process) (Finding, bool) {
	g := p.Go
	if g == nil || w.LimitCores <= 0 {
		return Finding{}, false
	}
	// Go 1.25's own container default is max(ceil(limit), 2): a program at or below it is
	// as the runtime's authors intend and gets no finding.
	if g.GOMAXPROCS <= max(limitCPUs(w.LimitCores), 2) {
		return Finding{}, false
	}
	n := max(1, int(math.Floor(w.LimitCores+1e-9)))
	f := newFinding(RuleGoMaxProcs, w.cpuSeverity(), w, &p, "Go GOMAXPROCS above the CPU limit")
	version := g.Version
	if version == "" {
		version = "unknown Go"
	}
	f.Evidence = append([]Fact{
		{Name: "gomaxprocs", Value: float64(g.GOMAXPROCS), Text: fmt.Sprintf("GOMAXPROCS %d (%s, container-aware: %t)", g.GOMAXPROCS, version, g.ContainerAware)},
	}, w.limitFacts()...)
	if p.GoPauseP99Seconds > 0 {
		f.Evidence = append(f.Evidence, Fact{Name: "go_pause_p99_seconds", Value: p.GoPauseP99Seconds,
			Text: "stop-the-world pauses p99 " + duration(p.GoPauseP99Seconds)})
	}
	f.Mechanism = fmt.Sprintf("Up to %d threads run Go code at once and the GC's workers take a quarter of them; they use the %s quota early in each period "+
		"and every goroutine, the stop-the-world phases included, waits for the next one.", g.GOMAXPROCS, coreAdj(w.LimitCores))
	f.Fix.Settings = map[string]string{"GOMAXPROCS": strconv.Itoa(n)}
	f.Fix.Text = fmt.Sprintf("Set GOMAXPROCS=%d: the limit rounded down (min 1), as automaxprocs does, so that all Ps busy for a whole period "+
		"still fit the quota; rounding up would let the program overrun it by %s every period.", n, cores(float64(limitCPUs(w.LimitCores))-w.LimitCores))
	switch {
	case onAncestor(w):
		f.Mechanism += " The limit is set on ancestor " + w.BindingCgroup + ": Go's container awareness (1.25+) and automaxprocs read only the process's own cgroup and do not see it."
	case g.ContainerAware:
		f.Fix.Alternatives = append(f.Fix.Alternatives, "the binary is container-aware: remove the GOMAXPROCS environment variable (or runtime.GOMAXPROCS call) that overrides it")
	default:
		f.Fix.Alternatives = append(f.Fix.Alternatives, fmt.Sprintf("or rebuild with Go 1.25 or later and `go 1.25` in go.mod (no GOMAXPROCS variable): the runtime then uses max(ceil(limit), 2) = %d and follows limit changes",
			max(limitCPUs(w.LimitCores), 2)))
	}
	return f, true
}

// suggestedArenas is the MALLOC_ARENA_MAX for a CPU limit: two per CPU the limit allows
// (at most that many threads run at once, so contention for an arena stays rare), at least 2.
func suggestedArenas(limit float64) int {
	return max(2, 2*limitCPUs(limit))
}

// mallocArenas: glibc creates up to 8 arenas per host CPU, not per CPU of the limit; each
// keeps its freed memory in 64 MiB heaps, so resident memory creeps with the thread count.
func mallocArenas(w *Workload, p Process) (Finding, bool) {
	m := p.Malloc
	if m == nil || m.Allocator != "glibc" || w.LimitCores <= 0 {
		return Finding{}, false
	}
	n := suggestedArenas(w.LimitCores)
	// Arenas counts the non-main ones; the limit counts the main arena too. A limit at or
	// below the suggestion, or no more arenas than the mixin's per-CPU bound, is no problem.
	if m.ArenaLimit <= n || m.Arenas+1 <= arenasPerLimitCPU*limitCPUs(w.LimitCores) || m.HeapBytes < float64(m.Arenas+1)*arenaHeapFloor {
		return Finding{}, false
	}
	sev := Warning
	if w.MemoryLimitBytes > 0 && p.ResidentAnon >= memoryCriticalShare*w.MemoryLimitBytes {
		sev = Critical
	}
	f := newFinding(RuleMallocArenas, sev, w, &p, "glibc malloc arenas sized for the host, not the limit")
	f.Evidence = []Fact{
		{Name: "malloc_arenas", Value: float64(m.Arenas + 1), Text: fmt.Sprintf("%d malloc arenas (limit %d)", m.Arenas+1, m.ArenaLimit)},
		{Name: "cpu_limit_cores", Value: w.LimitCores, Text: "CPU limit " + cores(w.LimitCores) + limitWhere(w)},
	}
	if m.HeapBytes > 0 {
		f.Evidence = append(f.Evidence, Fact{Name: "arena_heap_resident_bytes", Value: m.HeapBytes, Text: "arena heaps resident " + mib(m.HeapBytes)})
	}
	if p.ResidentAnon > 0 {
		t := "anonymous RSS " + mib(p.ResidentAnon)
		if w.MemoryLimitBytes > 0 {
			t += " of a " + mib(w.MemoryLimitBytes) + " memory limit"
		}
		f.Evidence = append(f.Evidence, Fact{Name: "resident_anon_bytes", Value: p.ResidentAnon, Text: t})
	}
	hostPart := ""
	if w.HostCPUs > 0 {
		hostPart = fmt.Sprintf(" (8 x %d host CPUs)", w.HostCPUs)
	}
	f.Mechanism = fmt.Sprintf("glibc gives a thread that finds its arena busy a new one, up to %d%s whatever the CPU limit; "+
		"each arena keeps freed memory in its own 64 MiB heaps, so resident memory grows with the threads while live data does not.", m.ArenaLimit, hostPart)
	f.Fix.Settings = map[string]string{"MALLOC_ARENA_MAX": strconv.Itoa(n)}
	f.Fix.Text = fmt.Sprintf("Set MALLOC_ARENA_MAX=%d in the environment: two arenas per CPU of the %s limit, since no more threads than that run at once "+
		"(or GLIBC_TUNABLES=glibc.malloc.arena_max=%d).", n, coreAdj(w.LimitCores), n)
	f.Fix.Alternatives = []string{"or preload jemalloc or tcmalloc (LD_PRELOAD=libjemalloc.so.2), whose per-thread caches return memory to the system"}
	return f, true
}

// throttling: throttled often with no runtime cause found: the limit is below the demand
// (steady) or below its peaks (bursty).
func throttling(w *Workload) (Finding, bool) {
	if w.LimitCores <= 0 || w.Windows < 2 || w.Span <= 0 {
		return Finding{}, false
	}
	share := w.throttledShare()
	if share < throttlingShare || w.Periods > 0 && w.ThrottledPeriods/w.Periods < throttlingPeriodsShare {
		return Finding{}, false
	}
	sev := Warning
	if share >= throttlingCriticalShare {
		sev = Critical
	}
	period := period(w)
	f := newFinding(RuleThrottling, sev, w, nil, "CPU throttling")
	f.Evidence = append([]Fact{{Name: "usage_cores", Value: w.UsageCores, Text: "usage " + cores(w.UsageCores)}}, w.limitFacts()...)
	f.Fix.Settings = map[string]string{}
	// Throttled time is time runnable threads waited, summed over CPUs: the CPU they would
	// have used is at most that.
	if w.UsageCores < 0.8*w.LimitCores && w.ThrottledPeriods > 0 && w.ThrottledSeconds > 0 {
		// Bursts: the average fits, the peaks do not. The shortfall of a throttled period is
		// what a burst allowance (quota left unused by earlier periods) must cover.
		shortfall := w.ThrottledSeconds / w.ThrottledPeriods
		need := math.Ceil((w.LimitCores+shortfall/period)*10) / 10
		burstUS := min(int64(math.Ceil(shortfall*1e6)), int64(w.LimitCores*period*1e6))
		f.Mechanism = fmt.Sprintf("The average use (%s) fits the %s limit but its bursts do not: a burst spends the period's quota early and the cgroup waits for the next period.",
			cores(w.UsageCores), coreAdj(w.LimitCores))
		f.Evidence = append(f.Evidence, Fact{Name: "throttled_seconds_per_period", Value: shortfall, Text: fmt.Sprintf("%.1f ms short per throttled period", shortfall*1e3)})
		f.Fix.Settings["cpu.max.burst"] = strconv.FormatInt(burstUS, 10)
		f.Fix.Settings["cpu_limit_cores"] = strconv.FormatFloat(need, 'f', -1, 64)
		f.Fix.Text = fmt.Sprintf("Allow bursts: cpu.max.burst=%d (µs; cgroup v2, v1 cpu.cfs_burst_us, Linux 5.14+): quota left unused by earlier periods then covers the %.1f ms a throttled period lacked.",
			burstUS, shortfall*1e3)
		f.Fix.Alternatives = []string{fmt.Sprintf("or raise the CPU limit%s to %s, which covers the observed peak period", limitOwner(w), cores(need))}
		return f, true
	}
	// At least a tenth of a core more: on a saturated host the throttled time understates
	// the demand (threads that would not have run anyway), and the limit itself is no fix.
	need := math.Max(math.Ceil((w.UsageCores+w.ThrottledSeconds/w.Span.Seconds())*10)/10, math.Round((w.LimitCores+0.1)*10)/10)
	f.Mechanism = fmt.Sprintf("The workload uses its whole %s limit and wants more: its threads wait out the rest of every period they exhaust.", coreAdj(w.LimitCores))
	f.Fix.Settings["cpu_limit_cores"] = strconv.FormatFloat(need, 'f', -1, 64)
	f.Fix.Text = fmt.Sprintf("Raise the CPU limit%s to %s: the usage plus the throttled time observed, the demand the limit cut off.", limitOwner(w), cores(need))
	return f, true
}

// period is the CFS period of the limit, 0.1 s when unknown.
func period(w *Workload) float64 {
	if w.PeriodSeconds > 0 {
		return w.PeriodSeconds
	}
	return 0.1
}

// limitOwner names the ancestor that sets the limit, for a fix text. Fix texts carry
// Markdown of their own (code spans), so the tenant's cgroup name goes in as a code span it
// cannot close (tenantstr.MarkdownCode), which every report prints safely.
func limitOwner(w *Workload) string {
	if onAncestor(w) {
		return " (set on " + tenantstr.MarkdownCode(w.BindingCgroup) + ")"
	}
	return ""
}

func mib(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }
