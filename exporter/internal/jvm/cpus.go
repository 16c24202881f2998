package jvm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Version is a Java version: Feature 17, Interim 0, Update 15 for "17.0.15"; JDK 8 "1.8.0_372"
// is Feature 8, Update 372. The zero Version means unknown.
type Version struct {
	Feature, Interim, Update int
}

func (v Version) String() string {
	if v.Feature == 0 {
		return ""
	}
	if v.Feature == 8 {
		return fmt.Sprintf("1.8.0_%d", v.Update)
	}
	return fmt.Sprintf("%d.%d.%d", v.Feature, v.Interim, v.Update)
}

// Known reports whether the version was found.
func (v Version) Known() bool { return v.Feature > 0 }

// maxVersion caps a java.version value (the longest real ones, "21.0.2+13-LTS-58", are short).
const maxVersion = 64

// ParseVersion parses java.version values: "17.0.15", "21", "25-ea", "11.0.13+8", "1.8.0_372".
func ParseVersion(s string) (Version, bool) {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "-+ "); i >= 0 {
		s = s[:i]
	}
	if len(s) > maxVersion {
		return Version{}, false // no version; strconv's errors would copy it
	}
	if rest, ok := strings.CutPrefix(s, "1."); ok { // JDK 8 and older
		major, upd, _ := strings.Cut(rest, "_")
		first, _, _ := strings.Cut(major, ".")
		f, err := strconv.Atoi(first)
		if err != nil || f <= 0 {
			return Version{}, false
		}
		u, _ := strconv.Atoi(upd)
		return Version{Feature: f, Update: u}, true
	}
	var n [3]int
	for i, more := 0, true; i < 3 && more; i++ {
		var part string
		part, s, more = strings.Cut(s, ".")
		v, err := strconv.Atoi(part)
		if err != nil || v < 0 {
			return Version{}, false
		}
		n[i] = v
	}
	if n[0] <= 0 {
		return Version{}, false
	}
	return Version{Feature: n[0], Interim: n[1], Update: n[2]}, true
}

// VersionFromPerfData decodes sun.rt.jvmVersion (major<<24 | minor<<16 | security<<8 | build).
// For JDK 8 that field holds the HotSpot version (25.x), which is why java.property.java.version
// is preferred; a major of 25 with a non-zero minor is taken as JDK 8.
func VersionFromPerfData(v int64) (Version, bool) {
	major, minor, sec := int(v>>24&0xff), int(v>>16&0xff), int(v>>8&0xff)
	if major < 9 {
		return Version{}, false
	}
	if major == 25 && minor != 0 {
		return Version{}, false // HotSpot 25.x of JDK 8: no update number in it
	}
	return Version{Feature: major, Interim: minor, Update: sec}, true
}

// CgroupCPU is the CPU limit of the JVM's cgroup and the CPUs it may run on.
type CgroupCPU struct {
	V2       bool  // cgroup v2 (weight instead of shares)
	QuotaUS  int64 // cfs quota or cpu.max quota; <= 0 when unlimited
	PeriodUS int64
	Shares   int64 // v1 cpu.shares; 0 when unknown
	Weight   int64 // v2 cpu.weight; 0 when unknown
	// Affinity is the number of CPUs in the process's Cpus_allowed_list. Inspect fills it in
	// when it is 0.
	Affinity int
	// MemoryLimitBytes is the cgroup memory limit, 0 when unlimited or unknown. It only decides
	// the default GC (server-class needs 1792 MiB) and ZGC's heap-based worker cap.
	MemoryLimitBytes int64
	// AncestorQuotaUS/AncestorPeriodUS are the smallest CPU quota among the cgroup's
	// ancestors and AncestorMemoryBytes their smallest memory limit (0: none), which JDK 24+
	// reads (see SeenBy).
	AncestorQuotaUS, AncestorPeriodUS int64
	AncestorMemoryBytes               int64
}

// SeenBy is the cgroup as a JVM of version v sees it. Since JDK 24 (JDK-8322420, not in
// 17.0.15 or 21 updates so far) HotSpot walks from its cgroup up to the root and takes the
// lowest CPU and memory limit on the way, so a container whose only limit is its pod's
// sizes itself for the pod's limit; older JDKs read their own cgroup only and see the
// host's CPUs. Checked with 17.0.15 and 25.0.3 in the v2 VM (test/v2) and on a v1 host
// (25.0.3 under a parent's 1-core quota: 1 CPU; 17.0.15: the host's 2). Inside a
// private cgroup namespace (containerd's default on v2) the JVM's root is its container's
// cgroup, so it cannot see the pod there: the exporter then reports what this returns,
// which assumes the walk reaches the pod (see docs/cgroups.md). An unknown version is taken
// as current.
func (cg CgroupCPU) SeenBy(v Version) CgroupCPU {
	if v.Known() && v.Feature < 24 {
		return cg
	}
	if cg.AncestorQuotaUS > 0 && cg.AncestorPeriodUS > 0 && (cg.QuotaUS <= 0 || cg.PeriodUS <= 0 ||
		float64(cg.AncestorQuotaUS)/float64(cg.AncestorPeriodUS) < float64(cg.QuotaUS)/float64(cg.PeriodUS)) {
		cg.QuotaUS, cg.PeriodUS = cg.AncestorQuotaUS, cg.AncestorPeriodUS
	}
	if m := cg.AncestorMemoryBytes; m > 0 && (cg.MemoryLimitBytes <= 0 || m < cg.MemoryLimitBytes) {
		cg.MemoryLimitBytes = m
	}
	return cg
}

// CPUSource says which rule produced a CPU count.
type CPUSource string

// CPU count sources.
const (
	CPUFromFlag      CPUSource = "flag"      // -XX:ActiveProcessorCount
	CPUFromAffinity  CPUSource = "affinity"  // no container limit seen (or -UseContainerSupport)
	CPUFromQuota     CPUSource = "quota"     // ceil(quota/period), below affinity
	CPUFromShares    CPUSource = "shares"    // ceil(shares/1024), older JDKs only
	CPUFromContainer CPUSource = "container" // container support on, but no limit below affinity
)

const perCPUShares = 1024

// CPUCount is the processor count the JVM sized its thread pools for, following HotSpot's
// os::active_processor_count / OSContainer::active_processor_count:
//
//   - -XX:ActiveProcessorCount=N (N > 0) wins.
//   - -XX:-UseContainerSupport, a JDK without container support (before 10 and 8u191), or
//     cgroup v2 on a JDK that only reads v1 (before 15 and 11.0.16, 8u372): the affinity count.
//   - Otherwise min(affinity, limit), limit = ceil(quota/period) when a quota is set. Before
//     JDK 19 / 17.0.5 / 11.0.17 / 8u371 (JDK-8281181) shares count too: with no quota,
//     ceil(shares/1024) (shares 1024 or weight 100 mean "not set"); with both, the quota
//     (or the smaller one with -XX:-PreferContainerQuotaForCPUCount).
//
// An unknown version is taken as current (shares ignored). cg is the cgroup as the JVM sees
// it: CgroupCPU.SeenBy applies the ancestors' limits for JDK 24+.
func CPUCount(v Version, f Flags, cg CgroupCPU) (int, CPUSource) {
	if f.ActiveProcessorCount > 0 {
		return f.ActiveProcessorCount, CPUFromFlag
	}
	affinity := max(cg.Affinity, 1)
	if !f.UseContainerSupport.Is(true) || !containerAware(v, cg.V2) {
		return affinity, CPUFromAffinity
	}
	quota := 0
	if cg.QuotaUS > 0 && cg.PeriodUS > 0 {
		quota = int(math.Ceil(float64(cg.QuotaUS) / float64(cg.PeriodUS)))
	}
	share := 0
	if sharesCount(v) {
		if s := effectiveShares(cg); s > 0 {
			share = int(math.Ceil(float64(s) / perCPUShares))
		}
	}
	limit, src := 0, CPUFromContainer
	switch {
	case quota != 0 && share != 0:
		limit, src = quota, CPUFromQuota
		if !f.PreferContainerQuotaForCPUCount.Is(true) && share < quota {
			limit, src = share, CPUFromShares
		}
	case quota != 0:
		limit, src = quota, CPUFromQuota
	case share != 0:
		limit, src = share, CPUFromShares
	}
	if limit == 0 || limit >= affinity {
		if limit == 0 {
			return affinity, CPUFromAffinity
		}
		return affinity, CPUFromContainer
	}
	return limit, src
}

func containerAware(v Version, v2 bool) bool {
	if !v.Known() {
		return true
	}
	if v2 {
		return v.Feature >= 15 || v.Feature == 11 && v.Update >= 16 || v.Feature == 8 && v.Update >= 372
	}
	return v.Feature >= 10 || v.Feature == 8 && v.Update >= 191
}

// sharesCount reports whether this JDK still turns cpu shares into a CPU count.
func sharesCount(v Version) bool {
	if !v.Known() || v.Feature >= 19 {
		return false
	}
	switch v.Feature {
	case 17:
		return v.Update < 5
	case 11:
		return v.Update < 17
	case 8:
		return v.Update < 371
	}
	return true
}

// effectiveShares returns cpu shares as HotSpot's cgroup code reports them: -1 (here 0) for
// the default, and v2 weights mapped back to the 2..262144 shares range, rounded to the
// nearest multiple of 1024 (CgroupV2Subsystem::cpu_shares).
func effectiveShares(cg CgroupCPU) int64 {
	if !cg.V2 {
		if cg.Shares <= 0 || cg.Shares == perCPUShares {
			return 0
		}
		return cg.Shares
	}
	w := cg.Weight
	if w <= 0 || w == 100 {
		return 0
	}
	x := int64(float64(262142*w-1)/9999.0) + 2
	if x <= perCPUShares {
		return perCPUShares
	}
	lower := x / perCPUShares * perCPUShares
	upper := lower + perCPUShares
	if x-lower <= upper-x {
		return lower
	}
	return upper
}

// Threads are the thread pool sizes HotSpot configures from its CPU count.
type Threads struct {
	ParallelGC   int // ParallelGCThreads (ZGC/Shenandoah: their parallel workers)
	ConcurrentGC int // ConcGCThreads
	JIT          int // CICompilerCount
	C1, C2       int // split of JIT with tiered compilation (C1 0 without)
}

// DefaultGC is the collector HotSpot picks without a flag: G1 on a server-class machine (at
// least 2 CPUs and 1792 MiB of memory, the cgroup limit counting as memory), Serial otherwise.
// memBytes 0 means unknown and is taken as large.
func DefaultGC(cpus int, memBytes int64) GC {
	if cpus >= 2 && (memBytes == 0 || memBytes >= 1792<<20) {
		return GCG1
	}
	return GCSerial
}

// ConfiguredThreads is what HotSpot's ergonomics derive from n CPUs for gc (checked against
// -XX:+PrintFlagsFinal on JDK 17.0.15 for n = 1..64, see the tests):
//
//	GC               ParallelGCThreads                 ConcGCThreads
//	G1               n<=8 ? n : 8+(n-8)*5/8            max((P+2)/4, 1)
//	Parallel         n<=8 ? n : 8+(n-8)*5/8            0
//	CMS (<=JDK 13)   n<=8 ? n : 8+(n-8)*5/8            (P+3)/4 when > 1, else 0
//	Serial, Epsilon  0                                 0
//	ZGC (17+)        ceil(0.6n), heap-capped           ceil(0.25n) (JDK 11-16: ceil(0.125n)), heap-capped
//	Shenandoah       max(n/2, 1)                       max(n/4, 1)
//
// ZGC caps both at max(MaxHeapSize*2% / 2 MiB, 1) workers; maxHeap <= 0 means unknown (no cap).
// Explicit -XX:ParallelGCThreads / ConcGCThreads override (G1 derives ConcGCThreads from the
// explicit ParallelGCThreads). JIT: CICompilerCount = max(log2(n)*log2(max(log2(n),1))*3/2, 2)
// with tiered compilation, C1 = max(count/3, 1), C2 the rest. Without tiered, JDK 17+ uses the
// same count, all C2; JDK 11 reports 2 for any n (checked on 11.0.13).
func ConfiguredThreads(v Version, gc GC, n int, f Flags, maxHeap int64) Threads {
	n = max(n, 1)
	var t Threads
	switch gc {
	case GCG1, GCParallel, GCCMS:
		t.ParallelGC = defaultParallel(n)
	case GCZ, GCZGenerational:
		t.ParallelGC = zWorkers(n, 60, maxHeap)
	case GCShenandoah:
		t.ParallelGC = max(n/2, 1)
	}
	if f.ParallelGCThreads >= 0 && gc != GCSerial && gc != GCEpsilon {
		t.ParallelGC = f.ParallelGCThreads
	}
	switch gc {
	case GCG1:
		t.ConcurrentGC = max((t.ParallelGC+2)/4, 1)
	case GCCMS:
		// 0 (the CMS thread works alone) up to 4 parallel threads: checked on 11.0.13.
		if c := (t.ParallelGC + 3) / 4; c > 1 {
			t.ConcurrentGC = c
		}
	case GCZ, GCZGenerational:
		pct := 25.0
		if v.Known() && v.Feature < 17 {
			pct = 12.5
		}
		t.ConcurrentGC = zWorkers(n, pct, maxHeap)
	case GCShenandoah:
		t.ConcurrentGC = max(n/4, 1)
	}
	if f.ConcGCThreads >= 0 && gc != GCSerial && gc != GCEpsilon && gc != GCParallel {
		t.ConcurrentGC = f.ConcGCThreads
	}
	tiered := f.TieredCompilation.Is(true)
	switch {
	case f.CICompilerCount > 0:
		t.JIT = f.CICompilerCount
	case !tiered && v.Known() && v.Feature < 17:
		t.JIT = 2
	default:
		t.JIT = max(log2(n)*log2(max(log2(n), 1))*3/2, 2)
	}
	if tiered {
		t.C1 = max(t.JIT/3, 1)
		t.C2 = max(t.JIT-t.C1, 1)
	} else {
		t.C2 = t.JIT
	}
	return t
}

func defaultParallel(n int) int {
	if n <= 8 {
		return n
	}
	return 8 + (n-8)*5/8
}

// zWorkers is ZHeuristics::nworkers: a share of the CPUs, capped so relocation workers cannot
// take more than 2% of the heap in 2 MiB pages.
func zWorkers(n int, pct float64, maxHeap int64) int {
	w := int(math.Ceil(float64(n) * pct / 100))
	if maxHeap > 0 {
		w = min(w, max(int(float64(maxHeap)*0.02/float64(2<<20)), 1))
	}
	return max(w, 1)
}

func log2(n int) int {
	r := 0
	for n > 1 {
		n >>= 1
		r++
	}
	return r
}
