package diagnose

import (
	"math"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/quota-exporter/quota_exporter/exporter/internal/diagnose/series"
	"github.com/quota-exporter/quota_exporter/exporter/internal/tenantstr"
)

// The live adapter: two gathers of the exporter's collectors, span apart, become
// Workloads. The series are the exporter's own, read through package series' table;
// counters are the increase between the gathers.

type seriesKey struct{ cgroup, process string }

type sample struct {
	labels map[string]string
	value  float64
	hist   *dto.Histogram
}

// index maps metric name → samples of one gather.
type index map[string][]sample

func newIndex(mfs []*dto.MetricFamily) index {
	ix := index{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := sample{labels: make(map[string]string, len(m.GetLabel()))}
			for _, l := range m.GetLabel() {
				// Names come from tenants (and, with history, from any exporter a Prometheus
				// scraped): the exporter's label rule, whatever the source applied.
				s.labels[l.GetName()] = tenantstr.Label(l.GetValue())
			}
			switch {
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Untyped != nil:
				s.value = m.GetUntyped().GetValue()
			case m.Histogram != nil:
				s.hist = m.GetHistogram()
			}
			// A non-finite value (a broken series in history) is skipped: it would poison the
			// arithmetic and cannot be written as JSON.
			if math.IsNaN(s.value) || math.IsInf(s.value, 0) {
				continue
			}
			ix[mf.GetName()] = append(ix[mf.GetName()], s)
		}
	}
	return ix
}

// all: the samples of a metric of the table.
func (ix index) all(m series.Metric) []sample { return ix[m.Name] }

// byCgroup: metric's value per cgroup (cgroup series), with match on extra labels.
func (ix index) byCgroup(m series.Metric, match map[string]string) map[string]sample {
	out := map[string]sample{}
	for _, s := range ix.all(m) {
		if matches(s, match) {
			out[s.labels["cgroup"]] = s
		}
	}
	return out
}

// byProcess: per (cgroup, process) the sum over the series matching match.
func (ix index) byProcess(m series.Metric, match map[string]string) map[seriesKey]sample {
	out := map[seriesKey]sample{}
	for _, s := range ix.all(m) {
		if !matches(s, match) {
			continue
		}
		k := seriesKey{s.labels["cgroup"], s.labels["process"]}
		prev, ok := out[k]
		if ok {
			s.value += prev.value
		}
		out[k] = s
	}
	return out
}

func matches(s sample, match map[string]string) bool {
	for k, v := range match {
		if s.labels[k] != v {
			return false
		}
	}
	return true
}

// Observation is what the gathers were taken over.
type Observation struct {
	Span     time.Duration
	End      time.Time // when the span ended (process ages)
	HostCPUs int
	// WarmupPeriod: a process younger than this at End is warming up, and the span's
	// usage and throttling are its warm-up's (live mode); 0: not judged here (history
	// mode computes warm-ups from the series over time).
	WarmupPeriod time.Duration
}

// FromFamilies builds the workloads from a gather at the start and one at the end of the
// window: every cgroup with a CPU limit on its path or a watched process.
func FromFamilies(start, end []*dto.MetricFamily, o Observation) []Workload {
	span, hostCPUs := o.Span, o.HostCPUs
	a, b := newIndex(start), newIndex(end)
	ws := map[string]*Workload{}
	get := func(s sample) *Workload {
		cg := s.labels["cgroup"]
		w := ws[cg]
		if w == nil {
			w = &Workload{Cgroup: cg, Namespace: s.labels["namespace"], Pod: s.labels["pod"], Container: s.labels["container"],
				Span: span, HostCPUs: hostCPUs}
			ws[cg] = w
		}
		return w
	}
	for _, s := range b.all(series.CPULimit) {
		w := get(s)
		w.LimitCores, w.BindingCgroup = s.value, s.labels["binding_cgroup"]
	}
	for _, s := range b.all(series.ProcessInfo) {
		get(s)
	}
	for _, s := range b.all(series.MemoryLimit) {
		if w := ws[s.labels["cgroup"]]; w != nil {
			w.MemoryLimitBytes = s.value
		}
	}

	periodsA, periodsB := a.byCgroup(series.CPUPeriods, nil), b.byCgroup(series.CPUPeriods, nil)
	thrA, thrB := a.byCgroup(series.ThrottledPeriods, nil), b.byCgroup(series.ThrottledPeriods, nil)
	secA, secB := a.byCgroup(series.ThrottledSeconds, nil), b.byCgroup(series.ThrottledSeconds, nil)
	ratioA, ratioB := a.byCgroup(series.ThrottledWindowRatio, nil), b.byCgroup(series.ThrottledWindowRatio, nil)
	periodLen := b.byCgroup(series.CPUPeriod, nil)
	stallA, stallB := a.byCgroup(series.ThrottleStall, nil), b.byCgroup(series.ThrottleStall, nil)
	usage, system := map[string]float64{}, map[string]float64{}
	for _, mode := range []string{"user", "system"} {
		ua, ub := a.byCgroup(series.CPUUsage, map[string]string{"mode": mode}), b.byCgroup(series.CPUUsage, map[string]string{"mode": mode})
		for cg, s := range ub {
			usage[cg] += increase(ua[cg], s)
			if mode == "system" {
				system[cg] += increase(ua[cg], s)
			}
		}
	}

	for cg, w := range ws {
		// Throttling is counted where the limit is (on v2 only there; on v1 there too).
		at := cg
		if w.BindingCgroup != "" {
			at = w.BindingCgroup
		}
		w.Periods = increase(periodsA[at], periodsB[at])
		w.ThrottledPeriods = increase(thrA[at], thrB[at])
		w.ThrottledSeconds = increase(secA[at], secB[at])
		w.PeriodSeconds = periodLen[at].value
		w.Windows, w.ThrottledWindows = windows(ratioA[at].hist, ratioB[at].hist)
		w.Pauses.LongestStall = highestBucket(bucketIncrease(stallA[at].hist, stallB[at].hist))
		if span > 0 {
			w.UsageCores = usage[cg] / span.Seconds()
			w.SystemCores = system[cg] / span.Seconds()
		}
	}

	addProcesses(ws, a, b, o)
	out := make([]Workload, 0, len(ws))
	for _, w := range ws {
		sort.Slice(w.Processes, func(i, j int) bool { return w.Processes[i].Name < w.Processes[j].Name })
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cgroup < out[j].Cgroup })
	return out
}

// increase of a counter between two samples; a reset (or a series new at the end) counts
// from zero.
func increase(a, b sample) float64 {
	if b.value >= a.value {
		return b.value - a.value
	}
	return b.value
}

// windows: sampler windows between the two histograms, and those with any throttling
// (ratio above 0: count minus the le=0 bucket, exported with full histograms).
func windows(a, b *dto.Histogram) (total, throttled int) {
	if b == nil {
		return 0, 0
	}
	zero := func(h *dto.Histogram) (count, le0 uint64) {
		if h == nil {
			return 0, 0
		}
		for _, bk := range h.GetBucket() {
			if bk.GetUpperBound() == 0 {
				le0 = bk.GetCumulativeCount()
			}
		}
		return h.GetSampleCount(), le0
	}
	ca, za := zero(a)
	cb, zb := zero(b)
	if cb < ca {
		ca, za = 0, 0
	}
	total = int(cb - ca)
	return total, total - int(zb-za)
}

func addProcesses(ws map[string]*Workload, a, b index, o Observation) {
	span := o.Span
	procs := map[seriesKey]*Process{}
	for _, s := range b.all(series.ProcessInfo) {
		pid, _ := strconv.Atoi(s.labels["pid"])
		rt := s.labels["runtime"]
		if rt == "other" {
			rt = ""
		}
		procs[seriesKey{s.labels["cgroup"], s.labels["process"]}] = &Process{Name: s.labels["process"], PID: pid, Runtime: rt}
	}
	cpuA, cpuB := a.byProcess(series.ProcessCPU, nil), b.byProcess(series.ProcessCPU, nil)
	for k, p := range procs {
		if span > 0 {
			p.CPUCores = increase(cpuA[k], cpuB[k]) / span.Seconds()
		}
	}
	gauge := func(m series.Metric, set func(p *Process, s sample)) {
		for k, s := range b.byProcess(m, nil) {
			if p := procs[k]; p != nil {
				set(p, s)
			}
		}
	}
	gauge(series.ProcessThreads, func(p *Process, s sample) { p.Threads = int(s.value) })
	gauge(series.ProcessResidentAnon, func(p *Process, s sample) { p.ResidentAnon = s.value })
	gauge(series.ProcessStartTime, func(p *Process, s sample) {
		sec, frac := math.Modf(s.value)
		p.StartTime = time.Unix(int64(sec), int64(frac*1e9)).UTC()
	})
	jvmOf := func(p *Process) *JVMFacts {
		if p.JVM == nil {
			p.JVM = &JVMFacts{}
		}
		return p.JVM
	}
	for _, s := range b.all(series.JVMInfo) {
		if p := procs[seriesKey{s.labels["cgroup"], s.labels["process"]}]; p != nil {
			j := jvmOf(p)
			j.Version, j.GC = s.labels["version"], s.labels["gc"]
		}
	}
	gauge(series.JVMCPUCount, func(p *Process, s sample) { jvmOf(p).CPUCount = int(s.value) })
	gauge(series.JVMParallelGCThreads, func(p *Process, s sample) { jvmOf(p).ParallelGC = int(s.value) })
	gauge(series.JVMConcurrentGCThreads, func(p *Process, s sample) { jvmOf(p).ConcurrentGC = int(s.value) })
	gauge(series.JVMJITThreads, func(p *Process, s sample) { jvmOf(p).JIT = int(s.value) })
	gauge(series.JVMHeapCommitted, func(p *Process, s sample) { jvmOf(p).HeapMax = s.value })

	goOf := func(p *Process) *GoFacts {
		if p.Go == nil {
			p.Go = &GoFacts{}
		}
		return p.Go
	}
	for _, s := range b.all(series.GoInfo) {
		if p := procs[seriesKey{s.labels["cgroup"], s.labels["process"]}]; p != nil {
			g := goOf(p)
			g.Version, g.ContainerAware, g.AutoMaxProcs = s.labels["version"], s.labels["container_aware"] == "true", s.labels["automaxprocs"] == "true"
		}
	}
	gauge(series.GoMaxProcs, func(p *Process, s sample) { goOf(p).GOMAXPROCS = int(s.value) })

	mallocOf := func(p *Process) *MallocFacts {
		if p.Malloc == nil {
			p.Malloc = &MallocFacts{}
		}
		return p.Malloc
	}
	for _, s := range b.all(series.AllocatorInfo) {
		if p := procs[seriesKey{s.labels["cgroup"], s.labels["process"]}]; p != nil && s.value == 1 {
			mallocOf(p).Allocator = s.labels["allocator"]
		}
	}
	gauge(series.MallocArenas, func(p *Process, s sample) { mallocOf(p).Arenas = int(s.value) })
	gauge(series.MallocArenaLimit, func(p *Process, s sample) { mallocOf(p).ArenaLimit = int(s.value) })
	gauge(series.MallocHeapResident, func(p *Process, s sample) { mallocOf(p).HeapBytes = s.value })

	// Go pauses of every kind, summed, as a p99.
	pauses := map[seriesKey][]bucketCount{}
	pa := map[string]sample{}
	for _, s := range a.all(series.GoSTWPause) {
		pa[seriesID(s)] = s
	}
	for _, s := range b.all(series.GoSTWPause) {
		k := seriesKey{s.labels["cgroup"], s.labels["process"]}
		pauses[k] = addBuckets(pauses[k], bucketIncrease(pa[seriesID(s)].hist, s.hist))
	}
	for k, bs := range pauses {
		if p := procs[k]; p != nil {
			p.GoPauseP99Seconds = quantile(0.99, bs)
		}
	}

	for k, p := range procs {
		w := ws[k.cgroup]
		if w == nil {
			continue
		}
		if age := o.End.Sub(p.StartTime); o.WarmupPeriod > 0 && !p.StartTime.IsZero() && age >= 0 && age < o.WarmupPeriod {
			// The whole span lies in the process's first minutes: its numbers are the warm-up's.
			wu := &WarmupFacts{AgeSeconds: age.Seconds(), Cores: p.CPUCores}
			if span > 0 {
				wu.ThrottledCores = w.ThrottledSeconds / span.Seconds()
			}
			if w.Periods > 0 {
				wu.ThrottledShare = w.ThrottledPeriods / w.Periods
			}
			p.Warmup = wu
		}
		w.Processes = append(w.Processes, *p)
	}
}

// seriesID identifies a series by all its labels.
func seriesID(s sample) string {
	keys := make([]string, 0, len(s.labels))
	for k := range s.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	id := ""
	for _, k := range keys {
		id += k + "=" + s.labels[k] + "\xff"
	}
	return id
}
