// Package diagnose turns what the exporter measures about a workload into findings: the
// problem, its evidence as numbers, the mechanism in one sentence, and the fix computed for
// this workload by the runtime's own rules. The rules see only the Workload model below; the
// live sampler and (later) a Prometheus history adapter both fill it, so one rule set serves
// every source.
package diagnose

import "time"

// Workload is one cgroup with its limit, its throttling over the observed span and the
// watched processes in it.
type Workload struct {
	// Identity: the cgroup path always; Kubernetes names when the exporter knows them.
	Cgroup    string `json:"cgroup"`
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`

	// LimitCores is the binding CPU limit (the smallest quota on the path from the root);
	// 0: no limit. BindingCgroup is the cgroup that sets it (this one or an ancestor).
	LimitCores    float64 `json:"limit_cores,omitempty"`
	BindingCgroup string  `json:"binding_cgroup,omitempty"`
	// PeriodSeconds is the CFS period of the binding cgroup (0.1 s unless changed).
	PeriodSeconds float64 `json:"period_seconds,omitempty"`
	// MemoryLimitBytes is the binding memory limit, 0 when none.
	MemoryLimitBytes float64 `json:"memory_limit_bytes,omitempty"`
	// HostCPUs is the number of online CPUs of the host.
	HostCPUs int `json:"host_cpus,omitempty"`

	// Span is the observed time; the counters below are increases over it, taken on the
	// cgroup that sets the limit (where the kernel throttles).
	Span             time.Duration `json:"-"`
	Periods          float64       `json:"periods"`
	ThrottledPeriods float64       `json:"throttled_periods"`
	ThrottledSeconds float64       `json:"throttled_seconds"`
	// Windows: per-second sampler windows observed; ThrottledWindows: those in which any
	// period was throttled.
	Windows          int     `json:"sampler_windows"`
	ThrottledWindows int     `json:"throttled_windows"`
	UsageCores       float64 `json:"usage_cores"`
	// SystemCores is the part of UsageCores spent in the kernel.
	SystemCores float64 `json:"system_cores,omitempty"`

	// Pauses: how long the workload stood still at a time, from the sources that ran.
	Pauses Pauses `json:"pauses,omitzero"`

	Processes []Process `json:"processes,omitempty"`
}

// Process is one watched process with the runtime facts the exporter derived for it.
type Process struct {
	Name    string `json:"name"`
	PID     int    `json:"pid,omitempty"`
	Runtime string `json:"runtime,omitempty"` // jvm, go, or "" for others
	// StartTime is the process's start; zero when unknown.
	StartTime    time.Time `json:"-"`
	CPUCores     float64   `json:"cpu_cores"` // CPU used over the span, in cores
	Threads      int       `json:"threads,omitempty"`
	ResidentAnon float64   `json:"resident_anon_bytes,omitempty"`

	JVM    *JVMFacts    `json:"jvm,omitempty"`
	Go     *GoFacts     `json:"go,omitempty"`
	Malloc *MallocFacts `json:"malloc,omitempty"`
	// Warmup is set when the span covers the process's first minutes (WarmupPeriod).
	Warmup *WarmupFacts `json:"warmup,omitempty"`
	// GoPauseP99Seconds: the p99 of the Go stop-the-world pauses in the span (gopause
	// collector; 0 when it did not run or saw no pause).
	GoPauseP99Seconds float64 `json:"go_pause_p99_seconds,omitempty"`
}

// Pauses are the longest stretches a workload was held, each from its own source (0: that
// source did not run or saw none).
type Pauses struct {
	// LongestThrottledRun: the most consecutive sampler windows (seconds) with any throttled
	// period; LongestFrozenRun: with more than 90% of the periods throttled (a frozen
	// second, as the mixin counts them). Live mode only: history keeps no per-second order.
	LongestThrottledRun int `json:"longest_throttled_run_seconds,omitempty"`
	LongestFrozenRun    int `json:"longest_frozen_run_seconds,omitempty"`
	// LongestStall: the longest CFS bandwidth stall (cfsstall collector) as the bounds of its
	// histogram bucket.
	LongestStall Bucket `json:"longest_stall_seconds,omitzero"`
}

// Bucket is a histogram bucket's bounds (Low < value <= High).
type Bucket struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// WarmupFacts compare a process's first minutes with its steady state.
type WarmupFacts struct {
	// AgeSeconds: the process's age at the end of the span (live), or the time the
	// span held it warming up (history, all its starts).
	AgeSeconds float64 `json:"age_seconds"`
	// Cores: the process's CPU use while younger than the warm-up period; ThrottledCores:
	// the throttled time per second of the binding cgroup then (demand the limit cut off);
	// ThrottledShare: the share of its CFS periods throttled then.
	Cores          float64 `json:"cores"`
	ThrottledCores float64 `json:"throttled_cores"`
	ThrottledShare float64 `json:"throttled_share"`
	// Steady*: the same after the warm-up period; Steady false when not observed (a live
	// span inside the warm-up).
	Steady               bool    `json:"steady"`
	SteadyCores          float64 `json:"steady_cores,omitempty"`
	SteadyThrottledShare float64 `json:"steady_throttled_share,omitempty"`
}

// JVMFacts are the sizes a HotSpot JVM chose at start.
type JVMFacts struct {
	Version      string  `json:"version,omitempty"`
	GC           string  `json:"gc,omitempty"` // jvm.GC: g1, parallel, serial, z, ...
	CPUCount     int     `json:"cpu_count"`
	ParallelGC   int     `json:"gc_parallel_threads"`
	ConcurrentGC int     `json:"gc_concurrent_threads"`
	JIT          int     `json:"jit_threads"`
	HeapMax      float64 `json:"heap_committed_bytes,omitempty"`
}

// GoFacts are a Go program's toolchain and expected GOMAXPROCS.
type GoFacts struct {
	Version        string `json:"version,omitempty"`
	GOMAXPROCS     int    `json:"gomaxprocs"`
	ContainerAware bool   `json:"container_aware"`
	AutoMaxProcs   bool   `json:"automaxprocs"`
}

// MallocFacts are glibc malloc's arenas.
type MallocFacts struct {
	Allocator  string  `json:"allocator"` // glibc, jemalloc, tcmalloc, mimalloc, other
	Arenas     int     `json:"arenas"`    // non-main arenas
	ArenaLimit int     `json:"arena_limit"`
	HeapBytes  float64 `json:"heap_resident_bytes,omitempty"`
}

// Severity orders findings: critical before warning.
type Severity string

const (
	Warning  Severity = "warning"
	Critical Severity = "critical"
)

func (s Severity) rank() int {
	if s == Critical {
		return 2
	}
	if s == Warning {
		return 1
	}
	return 0
}

// Finding is one problem of one workload (and process, when a runtime causes it).
type Finding struct {
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	Cgroup   string   `json:"cgroup"`
	// Workload is the readable name: namespace/pod/container when known, else the cgroup.
	Workload  string `json:"workload"`
	Process   string `json:"process,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Runtime   string `json:"runtime,omitempty"`
	Evidence  []Fact `json:"evidence"`
	Mechanism string `json:"mechanism"`
	Fix       Fix    `json:"fix"`
}

// Fact is one number of evidence with its unit, rendered as Text.
type Fact struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Text  string  `json:"text"`
}

// Fix is the change computed for this workload: Settings are the exact values (flag or
// variable name → value), Text says what to do and why, Alternatives are other ways.
type Fix struct {
	Text         string            `json:"text"`
	Settings     map[string]string `json:"settings,omitempty"`
	Alternatives []string          `json:"alternatives,omitempty"`
}

// Name is the workload's readable name.
func (w *Workload) Name() string {
	if w.Pod != "" {
		n := w.Namespace + "/" + w.Pod
		if w.Container != "" {
			n += "/" + w.Container
		}
		return n
	}
	return w.Cgroup
}
