//go:build linux

package collector

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"

	"github.com/quota-exporter/quota_exporter/exporter/internal/kernel"
	"github.com/quota-exporter/quota_exporter/exporter/internal/malloc"
	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
)

// processValue is the value of the series name of pid in a scrape (matched by the process
// label quota_process_info gives pid).
func processValue(mfs []*dto.MetricFamily, name string, pid int) (float64, bool) {
	label := func(m *dto.Metric, name string) string {
		for _, lp := range m.Label {
			if lp.GetName() == name {
				return lp.GetValue()
			}
		}
		return ""
	}
	process := ""
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if mf.GetName() == "quota_process_info" && label(m, "pid") == strconv.Itoa(pid) {
				process = label(m, "process")
			}
		}
	}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if mf.GetName() == name && process != "" && label(m, "process") == process {
				if g := m.GetGauge(); g != nil {
					return g.GetValue(), true
				}
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

// A glibc program whose maps and mem reads miss their time bound (a FIFO in place of them, as
// a /proc file behind a held mmap_lock behaves) keeps its arena series with their last values,
// so that an alert's `for` does not restart on a busy node; past staleReading it loses them.
// A failed smaps read never exports 0 bytes: the last good reading stands until it is two
// intervals old, and the read is tried again within seconds, not an interval.
func TestMissedReadKeepsLastReading(t *testing.T) {
	root := memTempDir(t)
	processHost(t, root, 5) // 10004 is a glibc program with two arena heaps
	const pid = 10004
	cfg := Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys"), SmapsInterval: time.Hour}
	dir := filepath.Join(cfg.ProcPath, strconv.Itoa(pid))
	// smaps: 10 MiB resident in each arena heap.
	var smaps strings.Builder
	for _, h := range arenaHeaps(kindOther) {
		fmt.Fprintf(&smaps, "%x-%x rw-p 00000000 00:00 0 \nSize:              65536 kB\nRss:               10240 kB\n", h, h+malloc.HeapMaxSize)
	}
	must(t, os.WriteFile(filepath.Join(dir, "smaps"), []byte(smaps.String()), 0o444))

	env, err := NewEnv(cfg, promslog.NewNopLogger())
	must(t, err)
	set, err := NewSet(env, processCollectors)
	must(t, err)
	defer set.Close()
	sm := &smapsCollector{env: env, interval: time.Hour} // refreshed by hand, without its loop
	const arenas = "quota_process_malloc_arenas"
	want, ok := processValue(gatherWithinDeadline(t, set, 0), arenas, pid)
	if !ok || want != 2 {
		t.Fatalf("healthy scrape: %s %v (exported %t), want 2", arenas, want, ok)
	}
	sm.refresh(context.Background())
	if v, ok := smapsExported(t, sm); !ok || v != 20<<20 {
		t.Fatalf("smaps before: %v (exported %t), want 20 MiB", v, ok)
	}
	var proc *processes.Process
	for _, p := range env.Processes.Last() {
		if p.PID == pid {
			proc = p
		}
	}

	// smaps fails (reading a directory fails at once) when due again.
	must(t, os.Remove(filepath.Join(dir, "smaps")))
	must(t, os.Mkdir(filepath.Join(dir, "smaps"), 0o755))
	r := smapsSlot.Load(proc)
	r.at = r.at.Add(-time.Hour)
	smapsSlot.Store(proc, r)
	sm.refresh(context.Background())
	if v, ok := smapsExported(t, sm); !ok || v != 20<<20 {
		t.Errorf("smaps after a failed read: %v (exported %t), want the last good reading, 20 MiB", v, ok)
	}
	if r := smapsSlot.Load(proc); r.misses != 1 || r.due(time.Hour) {
		t.Errorf("after one failed smaps read: %d misses, due at once %t; want 1, false", r.misses, r.due(time.Hour))
	}

	// maps and mem stall from now on, and the heap layout is due again.
	h := heapSlot.Load(proc)
	h.at = h.at.Add(-mallocRefresh - time.Second)
	heapSlot.Store(proc, h)
	for _, f := range []string{"maps", "mem"} {
		defer fifoInPlace(t, filepath.Join(dir, f))()
	}
	for i := 1; i <= 3; i++ {
		newScrape(env)
		if v, ok := processValue(gatherWithinDeadline(t, set, i), arenas, pid); !ok || v != want {
			t.Errorf("scrape %d while pid %d's maps read is stuck: %s %v (exported %t), want the last reading %v", i, pid, arenas, v, ok, want)
		}
	}
	if stuck := stuckOf(env, processes.ProcessErrors); stuck["maps"] != 1 {
		t.Errorf("stuck reads %v, want maps: 1 (the FIFO did not stall the read)", stuck)
	}

	// Past staleReading the last readings go.
	h = heapSlot.Load(proc)
	h.at, h.readAt = h.at.Add(-staleReading-time.Second), h.readAt.Add(-staleReading-time.Second)
	heapSlot.Store(proc, h)
	newScrape(env)
	if v, ok := processValue(gatherWithinDeadline(t, set, 4), arenas, pid); ok {
		t.Errorf("%s still exported (%v) when its last reading is older than %s", arenas, v, staleReading)
	}
	r = smapsSlot.Load(proc)
	r.readAt = r.readAt.Add(-2*time.Hour - time.Second)
	smapsSlot.Store(proc, r)
	if v, ok := smapsExported(t, sm); ok {
		t.Errorf("smaps exported (%v) two intervals after its last good reading", v)
	}
}

// orKept serves the last good reading for reads that missed their time bound, for up to
// staleReading, and never for reads that returned an error.
func TestOrKept(t *testing.T) {
	root := memTempDir(t)
	processHost(t, root, 1)
	env, err := NewEnv(Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys")}, promslog.NewNopLogger())
	must(t, err)
	procs, _ := env.Processes.Processes(context.Background())
	if len(procs) == 0 {
		t.Fatal("no process listed")
	}
	p := procs[0]
	k := newKeptSlot[int]()
	if v, ok := orKept(k, p, procread.Result[int]{Err: procread.ErrStuck}); ok {
		t.Errorf("a stuck read with nothing kept: %d, true", v)
	}
	if v, ok := orKept(k, p, procread.Result[int]{Value: 7}); !ok || v != 7 {
		t.Errorf("a good read: %d, %t", v, ok)
	}
	for _, err := range []error{procread.ErrStuck, procread.ErrOverloaded, fmt.Errorf("read: %w", procread.ErrTimeout), context.DeadlineExceeded} {
		if v, ok := orKept(k, p, procread.Result[int]{Err: err}); !ok || v != 7 {
			t.Errorf("%v: %d, %t; want the kept 7", err, v, ok)
		}
	}
	for _, err := range []error{os.ErrNotExist, os.ErrPermission, kernel.ErrPIDReused} {
		if v, ok := orKept(k, p, procread.Result[int]{Err: err}); ok {
			t.Errorf("%v: %d, true; want nothing", err, v)
		}
	}
	s := k.slot.Load(p)
	s.at = s.at.Add(-staleReading - time.Second)
	k.slot.Store(p, s)
	if v, ok := orKept(k, p, procread.Result[int]{Err: procread.ErrStuck}); ok {
		t.Errorf("a stuck read with a reading older than %s kept: %d, true", staleReading, v)
	}
}

// smapsExported is the smaps collector's one series (only the glibc program has an smaps
// file), if it exports one.
func smapsExported(t *testing.T, sm *smapsCollector) (float64, bool) {
	ch := make(chan prometheus.Metric, 64)
	must(t, sm.Update(context.Background(), ch))
	close(ch)
	var got []float64
	for m := range ch {
		var d dto.Metric
		must(t, m.Write(&d))
		got = append(got, d.GetGauge().GetValue())
	}
	if len(got) > 1 {
		t.Fatalf("smaps series of %d processes, want the glibc program's only", len(got))
	}
	if len(got) == 0 {
		return 0, false
	}
	return got[0], true
}

// TestSmapsRetryBackoff: a failed smaps read is retried after smapsTick, doubling per miss up
// to the interval; a good one after the interval.
func TestSmapsRetryBackoff(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		misses int
		ago    time.Duration
		due    bool
	}{
		{0, 4 * time.Minute, false}, {0, 5 * time.Minute, true},
		{1, 15 * time.Second, false}, {1, 21 * time.Second, true},
		{3, 70 * time.Second, false}, {3, 81 * time.Second, true},
		{40, 4 * time.Minute, false}, {40, 5 * time.Minute, true},
	} {
		r := smapsReading{at: now.Add(-c.ago), readAt: now.Add(-time.Hour), misses: c.misses}
		if got := r.due(5 * time.Minute); got != c.due {
			t.Errorf("%d misses, last read %s ago: due %t, want %t", c.misses, c.ago, got, c.due)
		}
	}
}
