package diagnose

import (
	"io"
	"testing"
	"time"
)

// Whatever numbers an adapter hands over (NaN, negative, huge: a broken series, a
// counter reset), the rules and every renderer return without panicking.
func FuzzDiagnose(f *testing.F) {
	f.Add(0.3, 0.3, 5.0, 40.0, 9, 15, 24, 18, "parallel", 16, 15, 16, 70e6, "glibc")
	f.Add(0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0, "", 0, 0, 0, 0.0, "")
	f.Add(-1.0, 1e300, -3.0, 0.0, -5, 3, -1, 99, "z", -2, 1<<30, -7, -1.0, "jemalloc")
	f.Fuzz(func(t *testing.T, limit, usage, thrSec, thrPeriods float64, thrWin, win, cpus, par int, gc string, gomax, arenas, arenaLimit int, heap float64, alloc string) {
		w := Workload{Cgroup: "/c", LimitCores: limit, BindingCgroup: "/", PeriodSeconds: 0.1, Span: 15 * time.Second,
			UsageCores: usage, ThrottledSeconds: thrSec, ThrottledPeriods: thrPeriods, Windows: win, ThrottledWindows: thrWin,
			Processes: []Process{
				{Name: "j", JVM: &JVMFacts{Version: gc, GC: gc, CPUCount: cpus, ParallelGC: par, HeapMax: heap}},
				{Name: "g", Go: &GoFacts{GOMAXPROCS: gomax}},
				{Name: "m", ResidentAnon: heap, Malloc: &MallocFacts{Allocator: alloc, Arenas: arenas, ArenaLimit: arenaLimit, HeapBytes: heap}},
			}}
		r := NewReport("live", w.Span, []Workload{w}, true, time.Unix(0, 0))
		_ = WriteText(io.Discard, r, Style{Color: true})
		_ = WriteMarkdown(io.Discard, r)
		_ = WriteJSON(io.Discard, r)
	})
}
