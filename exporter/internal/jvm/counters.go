package jvm

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/quota-exporter/quota_exporter/exporter/internal/hsperfdata"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// Collector is a normalised GC collector: what kind of pause a sun.gc.collector.N counts.
type Collector string

// Normalised collectors.
const (
	CollectorYoung      Collector = "young"
	CollectorFull       Collector = "full"
	CollectorConcurrent Collector = "concurrent"
)

// collectorNames maps sun.gc.collector.N.name across JDKs (checked on 11, 17, 21 fixtures):
//
//	name                                  JDK        GC              normalised
//	G1 young collection pauses            17+        G1              young
//	G1 incremental collections            11         G1              young (young and mixed)
//	G1 full collection pauses             17+        G1              full
//	G1 stop-the-world full collections    11         G1              full
//	G1 concurrent cycle pauses            17+        G1              concurrent (remark, cleanup)
//	G1 stop-the-world phases              11         G1              concurrent (remark, cleanup)
//	Parallel young collection pauses      17+        Parallel        young
//	PSScavenge                            8, 11      Parallel        young
//	Parallel full collection pauses       17+        Parallel        full
//	PSParallelCompact, PSMarkSweep        8, 11      Parallel        full
//	Serial young collection pauses        17+        Serial          young
//	Copy, PCopy, ParNew                   8, 11      Serial, CMS     young
//	Serial full collection pauses, MSC    all        Serial          full
//	CMS                                   8, 11      CMS             concurrent (initial mark, remark)
//	Z concurrent cycle pauses             17, 21     ZGC             concurrent (~3 pauses per cycle)
//	ZGC minor collection pauses           21 gen, 25 ZGC             young
//	ZGC major collection pauses           21 gen, 25 ZGC             concurrent (pauses of a major cycle)
//	Shenandoah partial                    all        Shenandoah      young (not updated in practice)
//	Shenandoah full                       all        Shenandoah      concurrent (counts cycle pauses too)
//
// Unknown names fall back to words in them (full/major → full, young/minor/incremental/scavenge →
// young, anything else concurrent) so a new JDK degrades instead of disappearing.
var collectorNames = map[string]Collector{
	"G1 young collection pauses":         CollectorYoung,
	"G1 incremental collections":         CollectorYoung,
	"G1 full collection pauses":          CollectorFull,
	"G1 stop-the-world full collections": CollectorFull,
	"G1 concurrent cycle pauses":         CollectorConcurrent,
	"G1 stop-the-world phases":           CollectorConcurrent,
	"Parallel young collection pauses":   CollectorYoung,
	"PSScavenge":                         CollectorYoung,
	"Parallel full collection pauses":    CollectorFull,
	"PSParallelCompact":                  CollectorFull,
	"PSMarkSweep":                        CollectorFull,
	"Serial young collection pauses":     CollectorYoung,
	"Copy":                               CollectorYoung,
	"PCopy":                              CollectorYoung,
	"ParNew":                             CollectorYoung,
	"Serial full collection pauses":      CollectorFull,
	"MSC":                                CollectorFull,
	"CMS":                                CollectorConcurrent,
	"Z concurrent cycle pauses":          CollectorConcurrent,
	"ZGC minor collection pauses":        CollectorYoung,
	"ZGC major collection pauses":        CollectorConcurrent,
	"Shenandoah partial":                 CollectorYoung,
	"Shenandoah full":                    CollectorConcurrent,
}

// NormalizeCollector maps a sun.gc.collector.N.name to young, full or concurrent.
func NormalizeCollector(name string) Collector {
	if c, ok := collectorNames[name]; ok {
		return c
	}
	l := strings.ToLower(name)
	switch {
	case strings.Contains(l, "full") || strings.Contains(l, "major"):
		return CollectorFull
	case strings.Contains(l, "young") || strings.Contains(l, "minor") || strings.Contains(l, "incremental") ||
		strings.Contains(l, "scavenge"):
		return CollectorYoung
	}
	return CollectorConcurrent
}

// GCFromCollectors guesses the collector in use from the collector names.
func GCFromCollectors(names []string) GC {
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "G1 "):
			return GCG1
		case strings.HasPrefix(n, "Parallel ") || strings.HasPrefix(n, "PS"):
			return GCParallel
		case strings.HasPrefix(n, "Serial ") || n == "Copy":
			return GCSerial // not "MSC": CMS uses it for its fallback full collections too
		case n == "CMS" || n == "ParNew" || n == "PCopy":
			return GCCMS
		case strings.HasPrefix(n, "ZGC "):
			return GCZGenerational
		case strings.HasPrefix(n, "Z "):
			return GCZ
		case strings.HasPrefix(n, "Shenandoah"):
			return GCShenandoah
		}
	}
	return GCUnknown
}

// GCStats are one normalised collector's totals.
type GCStats struct {
	Pauses  int64
	Seconds float64
}

// Counters are the perf data values the exporter exports, in base units (seconds, bytes).
type Counters struct {
	Safepoints           int64
	SafepointSeconds     float64
	SafepointSyncSeconds float64
	GC                   map[Collector]GCStats
	// CollectorNames are the raw sun.gc.collector.N.name values, in N order.
	CollectorNames     []string
	JITSeconds         float64
	HeapCommittedBytes int64 // sum of the generation spaces' capacity (no metaspace)
	HeapUsedBytes      int64
	HeapMaxBytes       int64 // see heapMax
	MetaspaceUsedBytes int64
	ThreadsLive        int64
	// VMStartSeconds is sun.rt.createVmBeginTime as Unix seconds (0 when absent).
	VMStartSeconds float64
}

// maxCollectors bounds the collector index scan.
const maxCollectors = 16

// perfDataNames are the entries read by name (ReadCounters, Inspector.InspectProcess).
var perfDataNames = map[string]bool{
	"sun.os.hrt.frequency": true, "sun.rt.createVmBeginTime": true,
	"sun.rt.safepoints": true, "sun.rt.safepointTime": true, "sun.rt.safepointSyncTime": true,
	"java.ci.totalTime": true, "sun.gc.metaspace.used": true, "java.threads.live": true,
	"java.rt.vmArgs": true, "sun.rt.javaCommand": true, "java.property.java.vm.name": true,
	"java.property.java.version": true, "sun.rt.jvmVersion": true,
}

// WantedCounter tells the perf data entries the exporter reads: those in perfDataNames, the
// GC collectors' name, invocations and time (sun.gc.collector.N.*, N < maxCollectors) and
// the generations' maxCapacity and their spaces' used and capacity. A parse keeps no other
// (hsperfdata.ParseWanted).
func WantedCounter(name []byte) bool {
	if perfDataNames[string(name)] {
		return true
	}
	if rest, ok := bytes.CutPrefix(name, []byte("sun.gc.collector.")); ok {
		n, field, ok := bytes.Cut(rest, []byte("."))
		i, err := strconv.Atoi(string(n))
		return ok && err == nil && i >= 0 && i < maxCollectors && len(n) <= 2 &&
			(string(field) == "name" || string(field) == "invocations" || string(field) == "time")
	}
	if rest, ok := bytes.CutPrefix(name, []byte("sun.gc.generation.")); ok {
		return generationCounter(string(rest)) != ""
	}
	return false
}

// generationCounter tells what a sun.gc.generation.<rest> entry counts: "max" (a
// generation's maxCapacity), "used" or "capacity" (a space's), "" for others.
func generationCounter(rest string) string {
	switch {
	case strings.HasSuffix(rest, ".maxCapacity") && strings.Count(rest, ".") == 1:
		return "max"
	case strings.Contains(rest, ".space.") && strings.HasSuffix(rest, ".used"):
		return "used"
	case strings.Contains(rest, ".space.") && strings.HasSuffix(rest, ".capacity"):
		return "capacity"
	}
	return ""
}

// ReadCounters extracts the counters from a snapshot. Missing counters stay zero.
func ReadCounters(s *hsperfdata.Snapshot) Counters {
	c := Counters{GC: map[Collector]GCStats{}}
	freq, ok := s.Frequency()
	if !ok {
		freq = 1e9 // Linux value; only a torn header entry could hide it
	}
	secs := func(name string) float64 {
		v, _ := s.Int(name)
		return float64(v) / float64(freq)
	}
	c.Safepoints, _ = s.Int("sun.rt.safepoints")
	c.SafepointSeconds = secs("sun.rt.safepointTime")
	c.SafepointSyncSeconds = secs("sun.rt.safepointSyncTime")
	c.JITSeconds = secs("java.ci.totalTime")
	c.MetaspaceUsedBytes, _ = s.Int("sun.gc.metaspace.used")
	c.ThreadsLive, _ = s.Int("java.threads.live")
	if ms, ok := s.Int("sun.rt.createVmBeginTime"); ok {
		c.VMStartSeconds = float64(ms) / 1e3
	}
	for i := 0; i < maxCollectors; i++ {
		p := "sun.gc.collector." + strconv.Itoa(i) + "."
		name, ok := s.String(p + "name")
		if !ok {
			continue
		}
		name = tenantstr.Keep(name)
		c.CollectorNames = append(c.CollectorNames, name)
		st := c.GC[NormalizeCollector(name)]
		n, _ := s.Int(p + "invocations")
		st.Pauses += n
		st.Seconds += secs(p + "time")
		c.GC[NormalizeCollector(name)] = st
	}
	var genMax []int64
	for _, e := range s.Entries() {
		rest, ok := strings.CutPrefix(e.Name, "sun.gc.generation.")
		if !ok {
			continue
		}
		v, _ := s.Int(e.Name)
		switch generationCounter(rest) {
		case "max":
			genMax = append(genMax, v)
		case "used":
			c.HeapUsedBytes += v
		case "capacity":
			c.HeapCommittedBytes += v
		}
	}
	c.HeapMaxBytes = heapMax(GCFromCollectors(c.CollectorNames), genMax)
	return c
}

// heapMax derives MaxHeapSize from the generations' maxCapacity: G1 and generational ZGC
// report the whole heap for each generation, the others split it.
func heapMax(gc GC, gens []int64) int64 {
	var sum, top int64
	for _, g := range gens {
		sum += g
		top = max(top, g)
	}
	if gc == GCG1 || gc == GCZGenerational {
		return top
	}
	return sum
}
