// Package series is the one table of the exporter's series that diagnose reads, each with
// what diagnose uses it for. The live adapter (diagnose.FromFamilies), the history loader
// (diagnose/history) and the diagnose subcommand read metrics only through it, and
// TestTableMatchesCollectors checks every name, type and label against the descriptors the
// collectors register (the ones docs/metrics.md is generated from): a renamed metric or label
// fails a test, not a diagnosis.
package series

// Kind is a metric's type, which also says how history summarises it over its span.
type Kind int

const (
	Counter   Kind = iota // live: increase between the gathers; history: increase()
	Gauge                 // live: value at the end; history: max_over_time()
	Info                  // the last value: labels of a value-1 series, or a timestamp; history: last_over_time()
	Histogram             // live: bucket increases; history: see the entry
)

// Mode says which of diagnose's modes reads a metric.
type Mode int

const (
	Live    Mode = 1 << iota // two gathers of the collectors built in-process
	History                  // --prometheus.url
	Both    = Live | History
)

// Metric is one exporter series diagnose reads.
type Metric struct {
	Name  string
	Kind  Kind
	Modes Mode
	// Labels are the labels diagnose reads besides the cgroup and process identity.
	Labels []string
	// Use is what diagnose uses it for (docs/diagnose.md).
	Use string
}

// Table lists every Metric below, in the order declared.
var Table []Metric

func add(name string, k Kind, modes Mode, use string, labels ...string) Metric {
	m := Metric{Name: name, Kind: k, Modes: modes, Labels: labels, Use: use}
	Table = append(Table, m)
	return m
}

// Per cgroup. Throttling is read on the cgroup whose limit binds (binding_cgroup).
var (
	CPULimit = add("quota_cpu_binding_limit_cores", Gauge, Both,
		"the binding CPU limit, and the cgroup that sets it; a cgroup with one is a workload", "binding_cgroup")
	MemoryLimit = add("quota_memory_binding_limit_bytes", Gauge, Both,
		"the memory limit: an arena finding is critical when anonymous RSS nears it")
	CPUPeriod = add("quota_cpu_period_seconds", Gauge, Both,
		"the CFS period: the burst fix and the quota of one period")
	CPUPeriods = add("quota_cpu_periods_total", Counter, Both,
		"CFS periods: the share of them throttled (history: per step, for warm-ups)")
	ThrottledPeriods = add("quota_cpu_throttled_periods_total", Counter, Both,
		"throttled CFS periods (history: per step, for warm-ups)")
	ThrottledSeconds = add("quota_cpu_throttled_seconds_total", Counter, Both,
		"throttled time: the demand the limit cut off (history: per step, for warm-ups)")
	CPUUsage = add("quota_cpu_usage_seconds_total", Counter, Both,
		"usage in cores, and its kernel part (mode=system) for kernel contention", "mode")
	// Live mode takes the sampler's windows from the sampler itself (diagnose.Windows), in order.
	ThrottledWindowRatio = add("quota_cpu_throttled_window_ratio", Histogram, History,
		`the sampler's windows and the throttled ones: increase of _count minus that of le="0" (le="0.5" with the default buckets)`)
	ThrottleStall = add("quota_cpu_throttle_stall_seconds", Histogram, Live,
		"the bucket of the longest CFS bandwidth stall (--collector.cfsstall)")
)

// Per process.
var (
	ProcessInfo = add("quota_process_info", Info, Both,
		"the watched processes, their PID and runtime", "pid", "runtime")
	ProcessCPU = add("quota_process_cpu_seconds_total", Counter, Both,
		"a process's CPU use (history: per step, its warm-up and steady state)")
	ProcessThreads = add("quota_process_threads", Gauge, Both,
		"threads hitting a contended kernel resource")
	ProcessResidentAnon = add("quota_process_resident_anon_bytes", Gauge, Both,
		"anonymous RSS against the memory limit (arenas)")
	ProcessStartTime = add("quota_process_start_time_seconds", Info, Both,
		"the process's age: warming up while younger than --warmup.period")
	JVMInfo = add("quota_jvm_info", Info, Both,
		"the JVM's version and GC: the thread counts HotSpot derives", "version", "gc")
	JVMCPUCount = add("quota_jvm_cpu_count", Gauge, Both,
		"the CPU count the JVM sized itself for")
	JVMParallelGCThreads = add("quota_jvm_gc_parallel_threads", Gauge, Both,
		"parallel GC threads, and whether a flag set them")
	JVMConcurrentGCThreads = add("quota_jvm_gc_concurrent_threads", Gauge, Both,
		"concurrent GC threads (evidence)")
	JVMJITThreads = add("quota_jvm_jit_threads", Gauge, Both,
		"JIT compiler threads (evidence)")
	JVMHeapCommitted = add("quota_jvm_heap_committed_bytes", Gauge, Both,
		"the heap size HotSpot's ergonomics take into account")
	GoInfo = add("quota_go_info", Info, Both,
		"the Go version and container awareness: which fix applies", "version", "container_aware", "automaxprocs")
	GoMaxProcs = add("quota_go_gomaxprocs", Gauge, Both,
		"GOMAXPROCS against the limit")
	GoSTWPause = add("quota_go_stw_pause_seconds", Histogram, Live,
		"the p99 stop-the-world pause (--collector.gopause)")
	AllocatorInfo = add("quota_process_allocator_info", Info, Both,
		"the allocator: the arena rule is glibc's", "allocator")
	MallocArenas = add("quota_process_malloc_arenas", Gauge, Both,
		"glibc arenas")
	MallocArenaLimit = add("quota_process_malloc_arena_limit", Gauge, Both,
		"the arena limit glibc applies (8 per host CPU by default)")
	MallocHeapResident = add("quota_process_malloc_heap_resident_bytes", Gauge, Both,
		"resident arena heaps: a finding only when they hold memory")
)

// The exporter's own, of this run.
var (
	CollectorSuccess = add("quota_exporter_scrape_collector_success", Gauge, Live,
		"collectors that failed: a note that findings may be missing", "collector")
	ReadErrors = add("quota_exporter_read_errors_total", Counter, Live,
		"denied reads of processes' files: a note that runtime findings need root", "reason")
)
