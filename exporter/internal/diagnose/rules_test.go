package diagnose

import (
	"strings"
	"testing"
	"time"
)

// workload is a 15 s observation of one cgroup with limit cores set on the cgroup itself.
func workload(limit float64, throttledWindows int, procs ...Process) Workload {
	return Workload{Cgroup: "/kubepods/pod1/c1", Namespace: "shop", Pod: "cart-1", Container: "cart", LimitCores: limit, BindingCgroup: "/kubepods/pod1/c1",
		PeriodSeconds: 0.1, HostCPUs: 16, Span: 15 * time.Second, Windows: 15, ThrottledWindows: throttledWindows, Processes: procs}
}

func only(t *testing.T, fs []Finding, rule string) Finding {
	t.Helper()
	if len(fs) != 1 || fs[0].Rule != rule {
		t.Fatalf("want exactly one %s finding, got %+v", rule, fs)
	}
	return fs[0]
}

func none(t *testing.T, fs []Finding) {
	t.Helper()
	if len(fs) != 0 {
		t.Fatalf("want no finding, got %+v", fs)
	}
}

func jvmProc(cpus, parallel, conc, jit int, gc string) Process {
	return Process{Name: "GcStorm", PID: 42, Runtime: "jvm", JVM: &JVMFacts{Version: "17.0.15", GC: gc, CPUCount: cpus, ParallelGC: parallel, ConcurrentGC: conc, JIT: jit}}
}

func TestJVMThreadsAboveLimit(t *testing.T) {
	// Seed 000: 24 CPUs → 18 parallel GC threads, 0.3-core limit.
	f := only(t, Diagnose([]Workload{workload(0.3, 9, jvmProc(24, 18, 0, 12, "parallel"))}), RuleJVMThreads)
	if f.Severity != Critical {
		t.Errorf("severity %s, want critical (throttled in 9 of 15 s)", f.Severity)
	}
	if got := f.Fix.Settings["-XX:ActiveProcessorCount"]; got != "1" {
		t.Errorf("ActiveProcessorCount %q, want 1", got)
	}
	// HotSpot's rules for 1 CPU, Parallel GC: 1 GC thread, no concurrent ones, 2 compilers.
	if !strings.Contains(f.Fix.Text, "ParallelGCThreads=1, ConcGCThreads=0, CICompilerCount=2") {
		t.Errorf("fix %q lacks the thread counts for 1 CPU", f.Fix.Text)
	}
	if f.Workload != "shop/cart-1/cart" || f.Process != "GcStorm" || f.PID != 42 {
		t.Errorf("identity %q %q %d", f.Workload, f.Process, f.PID)
	}

	// G1 on 16 CPUs in a 3-core limit: ActiveProcessorCount=3 → 3 parallel, 1 concurrent, 2 JIT.
	f = only(t, Diagnose([]Workload{workload(3, 0, jvmProc(16, 13, 4, 12, "g1"))}), RuleJVMThreads)
	if f.Severity != Warning {
		t.Errorf("severity %s, want warning without throttling", f.Severity)
	}
	if f.Fix.Settings["-XX:ActiveProcessorCount"] != "3" || !strings.Contains(f.Fix.Text, "ParallelGCThreads=3, ConcGCThreads=1, CICompilerCount=2") {
		t.Errorf("fix %+v", f.Fix)
	}

	// An explicit -XX:ParallelGCThreads=8 on a 2-CPU JVM is not fixed by ActiveProcessorCount.
	f = only(t, Diagnose([]Workload{workload(1, 0, jvmProc(2, 8, 0, 2, "parallel"))}), RuleJVMThreads)
	if f.Fix.Settings["-XX:ParallelGCThreads"] != "1" {
		t.Errorf("explicit ParallelGCThreads not corrected: %+v", f.Fix)
	}
}

func TestJVMSizedForLimitHasNoFinding(t *testing.T) {
	none(t, Diagnose([]Workload{workload(2, 0, jvmProc(2, 2, 0, 2, "parallel"))}))
	// A 2.5-core limit: 3 CPUs is the limit rounded up.
	none(t, Diagnose([]Workload{workload(2.5, 0, jvmProc(3, 3, 1, 2, "g1"))}))
}

func TestNoLimitNoFinding(t *testing.T) {
	w := workload(0, 0, jvmProc(24, 18, 0, 12, "parallel"),
		Process{Name: "api", Runtime: "go", Go: &GoFacts{GOMAXPROCS: 64}},
		Process{Name: "worker", Malloc: &MallocFacts{Allocator: "glibc", Arenas: 127, ArenaLimit: 128, HeapBytes: 2 << 30}})
	w.BindingCgroup = ""
	none(t, Diagnose([]Workload{w}))
}

func TestLimitOnAncestor(t *testing.T) {
	w := workload(0.3, 9, jvmProc(24, 18, 0, 12, "parallel"))
	w.BindingCgroup = "/kubepods/pod1"
	f := only(t, Diagnose([]Workload{w}), RuleJVMThreads)
	if !strings.Contains(f.Mechanism, "ancestor") || !strings.Contains(f.Evidence[4].Text, "set on ancestor /kubepods/pod1") {
		t.Errorf("ancestor limit not named: %q / %q", f.Mechanism, f.Evidence[4].Text)
	}
}

func goProc(gomaxprocs int, aware bool) Process {
	return Process{Name: "api", PID: 7, Runtime: "go", Go: &GoFacts{Version: "go1.24.3", GOMAXPROCS: gomaxprocs, ContainerAware: aware}}
}

func TestGoMaxProcsAboveLimit(t *testing.T) {
	// Seed 004: GOMAXPROCS=16 in 0.5 cores.
	f := only(t, Diagnose([]Workload{workload(0.5, 14, goProc(16, false))}), RuleGoMaxProcs)
	if f.Fix.Settings["GOMAXPROCS"] != "1" || f.Severity != Critical {
		t.Errorf("fix %+v severity %s", f.Fix, f.Severity)
	}
	if len(f.Fix.Alternatives) != 1 || !strings.Contains(f.Fix.Alternatives[0], "go 1.25") || !strings.Contains(f.Fix.Alternatives[0], "= 2") {
		t.Errorf("no Go 1.25 upgrade advice: %q", f.Fix.Alternatives)
	}
	// Rounded down: 2.5 cores → 2.
	f = only(t, Diagnose([]Workload{workload(2.5, 0, goProc(16, false))}), RuleGoMaxProcs)
	if f.Fix.Settings["GOMAXPROCS"] != "2" {
		t.Errorf("GOMAXPROCS fix %q, want 2 (floor of 2.5)", f.Fix.Settings["GOMAXPROCS"])
	}
}

func TestGoMaxProcsWithinLimitHasNoFinding(t *testing.T) {
	none(t, Diagnose([]Workload{workload(2, 0, goProc(2, false))}))
	none(t, Diagnose([]Workload{workload(4, 0, goProc(3, false))}))
	// Go 1.25's own default for 0.5 cores is 2: not a finding.
	none(t, Diagnose([]Workload{workload(0.5, 0, goProc(2, true))}))
}

func TestContainerAwareGoUnderPodOnlyLimit(t *testing.T) {
	// golang/go#81180: Go reads only its own cgroup; the 0.5-core limit is on the pod.
	w := workload(0.5, 5, goProc(4, true))
	w.BindingCgroup = "/kubepods/pod1"
	f := only(t, Diagnose([]Workload{w}), RuleGoMaxProcs)
	if !strings.Contains(f.Mechanism, "do not see it") || f.Fix.Settings["GOMAXPROCS"] != "1" {
		t.Errorf("mechanism %q fix %+v", f.Mechanism, f.Fix)
	}
	for _, a := range f.Fix.Alternatives {
		if strings.Contains(a, "go 1.25") {
			t.Errorf("upgrade advised although a container-aware Go does not see an ancestor's limit: %q", a)
		}
	}
}

func TestMallocArenas(t *testing.T) {
	p := Process{Name: "rss_creep", PID: 9, ResidentAnon: 300 << 20, Malloc: &MallocFacts{Allocator: "glibc", Arenas: 15, ArenaLimit: 16, HeapBytes: 280 << 20}}
	w := workload(1, 0, p)
	w.MemoryLimitBytes = 2 << 30
	f := only(t, Diagnose([]Workload{w}), RuleMallocArenas)
	if f.Fix.Settings["MALLOC_ARENA_MAX"] != "2" || f.Severity != Warning {
		t.Errorf("fix %+v severity %s", f.Fix, f.Severity)
	}
	// Near the memory limit it is critical.
	w.MemoryLimitBytes = 320 << 20
	if f := only(t, Diagnose([]Workload{w}), RuleMallocArenas); f.Severity != Critical {
		t.Errorf("severity %s near the memory limit", f.Severity)
	}
	for name, m := range map[string]MallocFacts{
		"limited":       {Allocator: "glibc", Arenas: 1, ArenaLimit: 2, HeapBytes: 280 << 20},
		"few arenas":    {Allocator: "glibc", Arenas: 3, ArenaLimit: 16, HeapBytes: 280 << 20},
		"little memory": {Allocator: "glibc", Arenas: 15, ArenaLimit: 16, HeapBytes: 2 << 20},
		"jemalloc":      {Allocator: "jemalloc"},
	} {
		p.Malloc = &m
		if fs := Diagnose([]Workload{workload(1, 0, p)}); len(fs) != 0 {
			t.Errorf("%s: unexpected %+v", name, fs)
		}
	}
}

func TestThrottling(t *testing.T) {
	// Steady: the whole limit used, throttled 12 of 15 s, 3 s throttled → 1.2 cores.
	w := workload(1, 12)
	w.UsageCores, w.ThrottledSeconds = 0.98, 3
	f := only(t, Diagnose([]Workload{w}), RuleThrottling)
	if f.Severity != Critical || f.Fix.Settings["cpu_limit_cores"] != "1.2" || f.Fix.Settings["cpu.max.burst"] != "" {
		t.Errorf("severity %s fix %+v", f.Severity, f.Fix)
	}
	// Bursty: 0.3 of 1 core on average, throttled 4 of 15 s, 1.5 s in 40 periods → 37.5 ms
	// short per period: a 37500 µs burst, or 1.375 → 1.4 cores.
	w = workload(1, 4)
	w.UsageCores, w.ThrottledSeconds, w.ThrottledPeriods = 0.3, 1.5, 40
	f = only(t, Diagnose([]Workload{w}), RuleThrottling)
	if f.Severity != Warning || f.Fix.Settings["cpu.max.burst"] != "37500" || f.Fix.Settings["cpu_limit_cores"] != "1.4" {
		t.Errorf("severity %s fix %+v", f.Severity, f.Fix)
	}
	// Throttled in every window but little throttled time (a saturated host): still more
	// than the current limit.
	w = workload(1, 15)
	w.UsageCores, w.ThrottledSeconds = 0.89, 0.8
	if f := only(t, Diagnose([]Workload{w}), RuleThrottling); f.Fix.Settings["cpu_limit_cores"] != "1.1" {
		t.Errorf("fix %+v, want 1.1 cores", f.Fix)
	}
	// Rarely throttled: nothing.
	w = workload(1, 2)
	w.UsageCores, w.ThrottledSeconds = 0.5, 0.1
	none(t, Diagnose([]Workload{w}))
}

func TestRuntimeFindingExplainsThrottling(t *testing.T) {
	w := workload(0.3, 12, jvmProc(24, 18, 0, 12, "parallel"))
	w.UsageCores, w.ThrottledSeconds = 0.3, 5
	only(t, Diagnose([]Workload{w}), RuleJVMThreads)
}

func TestReportOrderAndExitCode(t *testing.T) {
	ws := []Workload{workload(1, 0, jvmProc(4, 4, 0, 3, "parallel")), workload(0.5, 14, goProc(16, false))}
	ws[1].Cgroup, ws[1].Pod = "/kubepods/pod2/c2", "api-1"
	r := NewReport("live", 15*time.Second, ws, true, time.Unix(0, 0))
	if len(r.Findings) != 2 || r.Findings[0].Severity != Critical || r.Findings[1].Severity != Warning {
		t.Fatalf("order: %+v", r.Findings)
	}
	if r.ExitCode() != 2 || r.Worst != "critical" || len(r.Workloads) != 2 {
		t.Errorf("exit %d worst %s workloads %d", r.ExitCode(), r.Worst, len(r.Workloads))
	}
	if r := NewReport("live", time.Second, ws[:1], false, time.Unix(0, 0)); r.ExitCode() != 1 {
		t.Errorf("warning exit %d", r.ExitCode())
	}
	if r := NewReport("live", time.Second, nil, false, time.Unix(0, 0)); r.ExitCode() != 0 || r.Worst != "none" {
		t.Errorf("empty exit %d worst %s", r.ExitCode(), r.Worst)
	}
}

// A pod's limit throttles the pod and its containers: one finding, on the pod's cgroup; or
// on the container when the pod's cgroup is not watched.
func TestThrottlingOncePerLimit(t *testing.T) {
	pod, ctr := workload(1, 12), workload(1, 12)
	pod.Cgroup, pod.BindingCgroup, pod.Pod = "/kubepods/pod1", "/kubepods/pod1", ""
	ctr.BindingCgroup = "/kubepods/pod1"
	for _, w := range []*Workload{&pod, &ctr} {
		w.UsageCores, w.ThrottledSeconds = 0.98, 3
	}
	if f := only(t, Diagnose([]Workload{ctr, pod}), RuleThrottling); f.Cgroup != "/kubepods/pod1" {
		t.Errorf("reported on %s, want the pod", f.Cgroup)
	}
	if f := only(t, Diagnose([]Workload{ctr}), RuleThrottling); f.Cgroup != ctr.Cgroup {
		t.Errorf("reported on %s, want the container", f.Cgroup)
	}
}

// warmingJVM is a JVM sized for its limit in its first 40 s.
func warmingJVM(wu WarmupFacts) Process {
	p := jvmProc(1, 1, 0, 2, "g1")
	p.Name, p.Warmup = "Warmup", &wu
	return p
}

func TestWarmup(t *testing.T) {
	// Seed 001: 1-core limit, the warm-up used 0.97 cores and was throttled 1.9 s/s in 85%
	// of its periods: demand 2.87 → a 2.9-core limit, the request stays at 1 core (steady
	// state unseen in a live span).
	w := workload(1, 13, warmingJVM(WarmupFacts{AgeSeconds: 40, Cores: 0.97, ThrottledCores: 1.9, ThrottledShare: 0.85}))
	w.HostCPUs = 16
	f := only(t, Diagnose([]Workload{w}), RuleWarmup)
	if f.Severity != Critical || f.Fix.Settings["cpu_limit_cores"] != "2.9" || f.Fix.Settings["cpu_request_cores"] != "1" {
		t.Errorf("severity %s fix %+v", f.Severity, f.Fix)
	}
	if !strings.Contains(f.Fix.Text, "Burstable") || !strings.Contains(f.Fix.Alternatives[0], "cpu.max.burst") {
		t.Errorf("fix %+v", f.Fix)
	}
	// History: a steady state of 0.2 cores, unthrottled: the request follows it; the demand
	// is capped at the host's CPUs.
	w = workload(1, 0, warmingJVM(WarmupFacts{AgeSeconds: 300, Cores: 1, ThrottledCores: 3.5, ThrottledShare: 0.3, Steady: true, SteadyCores: 0.16, SteadyThrottledShare: 0.01}))
	w.HostCPUs, w.Windows = 4, 0
	f = only(t, Diagnose([]Workload{w}), RuleWarmup)
	if f.Severity != Warning || f.Fix.Settings["cpu_limit_cores"] != "4" || f.Fix.Settings["cpu_request_cores"] != "0.2" {
		t.Errorf("severity %s fix %+v", f.Severity, f.Fix)
	}
	// The warm-up explains the cgroup's throttling: no second finding.
	w = workload(1, 13, warmingJVM(WarmupFacts{AgeSeconds: 40, Cores: 0.97, ThrottledCores: 1.9, ThrottledShare: 0.85}))
	w.UsageCores, w.ThrottledSeconds = 0.98, 28
	only(t, Diagnose([]Workload{w}), RuleWarmup)
}

func TestWarmupWithoutThrottlingOrThrottledLaterHasNoFinding(t *testing.T) {
	none(t, Diagnose([]Workload{workload(1, 0, warmingJVM(WarmupFacts{AgeSeconds: 40, Cores: 0.5, ThrottledShare: 0.01}))}))
	// Throttled in bursts, the demand within the limit: not a warm-up problem.
	none(t, Diagnose([]Workload{workload(1, 0, warmingJVM(WarmupFacts{AgeSeconds: 40, Cores: 0.86, ThrottledCores: 0.02, ThrottledShare: 0.3}))}))
	// A young JVM with 18 GC threads: the thread finding, not warm-up.
	p := jvmProc(24, 18, 0, 12, "parallel")
	p.Warmup = &WarmupFacts{AgeSeconds: 40, Cores: 0.26, ThrottledCores: 0.16, ThrottledShare: 0.43}
	only(t, Diagnose([]Workload{workload(0.3, 9, p)}), RuleJVMThreads)
	// Throttled as much later: steady throttling (the throttling rule's), not warm-up.
	w := workload(1, 0, warmingJVM(WarmupFacts{AgeSeconds: 300, Cores: 1, ThrottledCores: 1, ThrottledShare: 0.6, Steady: true, SteadyCores: 1, SteadyThrottledShare: 0.6}))
	none(t, Diagnose([]Workload{w}))
}

func TestKernelContention(t *testing.T) {
	// Seed 002: 32 threads in one 1-core limit, 80% of the time in the kernel, throttled
	// in 90% of the periods → one CPU of cpuset, one thread per CPU.
	w := workload(1, 15, Process{Name: "kernel_contention", PID: 5, Threads: 33})
	w.UsageCores, w.SystemCores, w.Periods, w.ThrottledPeriods, w.ThrottledSeconds = 1, 0.8, 150, 135, 14
	f := only(t, Diagnose([]Workload{w}), RuleKernel)
	if f.Severity != Critical || f.Fix.Settings["cpuset_cpus"] != "1" || f.Fix.Settings["threads"] != "1" {
		t.Errorf("severity %s fix %+v", f.Severity, f.Fix)
	}
	if !strings.Contains(f.Fix.Text, "static CPU manager policy") || !strings.Contains(f.Evidence[0].Text, "80% of the CPU time in the kernel") {
		t.Errorf("fix %q evidence %+v", f.Fix.Text, f.Evidence)
	}
	// Young, but kernel-bound: contention, not warm-up.
	w.Processes[0].Warmup = &WarmupFacts{AgeSeconds: 8, Cores: 1, ThrottledCores: 0.9, ThrottledShare: 0.9}
	only(t, Diagnose([]Workload{w}), RuleKernel)
	// A 2.5-core limit: 3 CPUs.
	w.LimitCores = 2.5
	if f := only(t, Diagnose([]Workload{w}), RuleKernel); f.Fix.Settings["cpuset_cpus"] != "3" {
		t.Errorf("fix %+v", f.Fix)
	}
	// User-heavy throttling is plain throttling; kernel-heavy but unthrottled is no finding.
	w.LimitCores, w.SystemCores, w.Processes[0].Warmup = 1, 0.1, nil
	only(t, Diagnose([]Workload{w}), RuleThrottling)
	w = workload(1, 0)
	w.UsageCores, w.SystemCores, w.Periods = 0.6, 0.5, 150
	none(t, Diagnose([]Workload{w}))
}

func TestPauseEvidence(t *testing.T) {
	w := workload(1, 9)
	w.UsageCores, w.ThrottledSeconds = 0.98, 3
	w.Pauses = Pauses{LongestThrottledRun: 4, LongestFrozenRun: 2, LongestStall: Bucket{Low: 0.25, High: 0.5}}
	f := only(t, Diagnose([]Workload{w}), RuleThrottling)
	got := evidenceText(f)
	for _, want := range []string{"throttled in 9 of the last 15 s", "throttled 4 s in a row at most", "longest freeze 2 s", "longest CFS stall 250 ms–500 ms"} {
		if !strings.Contains(got, want) {
			t.Errorf("evidence %q lacks %q", got, want)
		}
	}
	g := goProc(16, false)
	g.GoPauseP99Seconds = 0.085
	f = only(t, Diagnose([]Workload{workload(0.5, 14, g)}), RuleGoMaxProcs)
	if !strings.Contains(evidenceText(f), "stop-the-world pauses p99 85 ms") {
		t.Errorf("evidence %q", evidenceText(f))
	}
}
