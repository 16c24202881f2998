//go:build linux

package collector

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs"
	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
)

// stuckTimeout is the scrape deadline of these tests; a scrape may take it plus stuckMargin.
const (
	stuckTimeout = 2 * time.Second
	stuckMargin  = 500 * time.Millisecond
)

// stuckCgroup picks the host's first cgroup with processes and a CPU quota: the one whose
// files are replaced by FIFOs.
func stuckCgroup(h host) string {
	for _, c := range h.cgroups {
		if c.QuotaUS > 0 && len(c.PIDs) > 0 {
			return c.Path
		}
	}
	panic("no cgroup with a quota and processes in " + h.name)
}

// cgroupDirs are the directories of one cgroup path in every hierarchy of the fixture.
func cgroupDirs(t *testing.T, root, path string) []string {
	t.Helper()
	l, err := cgroupfs.ReadLayout(filepath.Join(root, "proc"), filepath.Join(root, "sys"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var dirs []string
	for _, h := range []*cgroupfs.Hierarchy{l.CPU, l.CPUAcct, l.CPUSet, l.Memory, l.Unified} {
		if h == nil {
			continue
		}
		d := h.Dir(path)
		if _, err := os.Stat(d); err == nil && !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// fileKinds lists the names of the regular files in the given directories.
func fileKinds(t *testing.T, dirs []string) []string {
	t.Helper()
	set := map[string]bool{}
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Type().IsRegular() {
				set[e.Name()] = true
			}
		}
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// seriesKeys are "name{labels}" of the cgroup series of a scrape, except those of skip.
func seriesKeys(mfs []*dto.MetricFamily, skip string) map[string]bool {
	out := map[string]bool{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "quota_cpu_") && !strings.HasPrefix(mf.GetName(), "quota_memory_") {
			continue
		}
		for _, m := range mf.Metric {
			var b strings.Builder
			b.WriteString(mf.GetName())
			drop := false
			for _, lp := range m.Label {
				if lp.GetName() == "cgroup" && lp.GetValue() == skip {
					drop = true
				}
				b.WriteString("," + lp.GetName() + "=" + lp.GetValue())
			}
			if !drop {
				out[b.String()] = true
			}
		}
	}
	return out
}

func osThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			var n int
			for _, c := range strings.TrimSpace(v) {
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	return 0
}

// A FIFO in place of each kind of cgroup file the exporter reads (one cgroup, every
// hierarchy it is in): 50 scrapes each answer within the deadline with every series of the
// other cgroups, and goroutines and OS threads stay bounded.
func TestFIFOInPlaceOfCgroupFile(t *testing.T) {
	logger := promslog.NewNopLogger()
	for _, h := range hosts {
		t.Run(h.name, func(t *testing.T) {
			root := t.TempDir()
			if err := fixture.Write(root, h.mode, h.cgroups); err != nil {
				t.Fatal(err)
			}
			cfg := Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys"), ThrottleWindow: 100 * time.Millisecond}
			names := []string{"cpu", "memory", "throttle"}
			newSet := func() *Set {
				env, err := NewEnv(cfg, logger)
				if err != nil {
					t.Fatal(err)
				}
				set, err := NewSet(env, names)
				if err != nil {
					t.Fatal(err)
				}
				return set
			}
			// Every series of an intact host, the sampler's histograms included: it scrapes
			// once a window until every sampled cgroup has them (each needs two reads).
			healthy := func() map[string]bool {
				set := newSet()
				defer set.Close()
				var mfs []*dto.MetricFamily
				scrapeEachWindow(t, cfg.ThrottleWindow, func() bool {
					mfs = gatherWithinDeadline(t, set, 0)
					n := samplerCgroups(mfs)
					return n > 0 && windowHistograms(mfs) == n
				})
				return seriesKeys(mfs, stuckCgroup(h))
			}()
			stuck := stuckCgroup(h)
			dirs := cgroupDirs(t, root, stuck)
			for _, kind := range fileKinds(t, dirs) {
				t.Run(kind, func(t *testing.T) {
					for _, d := range dirs {
						p := filepath.Join(d, kind)
						if _, err := os.Stat(p); err != nil {
							continue
						}
						orig, _ := os.ReadFile(p)
						if err := os.Remove(p); err != nil {
							t.Fatal(err)
						}
						if err := syscall.Mkfifo(p, 0o644); err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { os.Remove(p); os.WriteFile(p, orig, 0o644) })
					}
					set := newSet()
					defer func() {
						begin := time.Now()
						set.Close()
						if d := time.Since(begin); d > 3*time.Second {
							t.Errorf("Close took %v", d)
						}
					}()
					// Each healthy series is in every scrape, except a sampler histogram before
					// the sampler's second read of its cgroup: once there, it stays.
					histograms := map[string]bool{}
					check := func(i int, mfs []*dto.MetricFamily) {
						got := seriesKeys(mfs, stuck)
						for k := range healthy {
							window := strings.Contains(k, "_window_")
							switch {
							case got[k] && window:
								histograms[k] = true
							case !got[k] && (!window || histograms[k]):
								t.Fatalf("scrape %d lacks healthy series %s", i, k)
							}
						}
					}
					var goroutines, threads int
					for i := range 50 {
						check(i, gatherWithinDeadline(t, set, i))
						if i == 0 {
							goroutines, threads = runtime.NumGoroutine(), osThreads(t)
						}
					}
					if g := runtime.NumGoroutine(); g > goroutines+10 {
						t.Errorf("goroutines grew from %d to %d over 50 scrapes", goroutines, g)
					}
					if n := osThreads(t); n > threads+5 {
						t.Errorf("OS threads grew from %d to %d over 50 scrapes", threads, n)
					}
					// The histograms the healthy host had come too (50 quick scrapes may end
					// before the sampler's second window).
					want := 0
					for k := range healthy {
						if strings.Contains(k, "_window_") {
							want++
						}
					}
					i := 50
					scrapeEachWindow(t, cfg.ThrottleWindow, func() bool {
						check(i, gatherWithinDeadline(t, set, i))
						i++
						return len(histograms) == want
					})
					// The FIFO is counted as a read that would block, never taken for an empty
					// (malformed) kernel file: the fixture's files are all well-formed.
					if n := readErrors(t, set.env, "parse"); n > 0 {
						t.Errorf("read_errors_total{reason=\"parse\"} = %v: the FIFO was read as an empty file", n)
					}
					// Nothing was left blocked on the FIFO: a read given up on (a slow machine's
					// too) has returned. A blocking open or read of it never returns.
					for deadline := time.Now().Add(10 * time.Second); len(stuckByKind(set.env)) > 0; time.Sleep(10 * time.Millisecond) {
						if time.Now().After(deadline) {
							t.Fatalf("reads given up on never returned (blocked on the FIFO): %v", stuckByKind(set.env))
						}
					}
				})
			}
		})
	}
}

// A FIFO in place of mountinfo: start-up fails at once instead of hanging.
func TestFIFOInPlaceOfMountinfo(t *testing.T) {
	root := t.TempDir()
	if err := fixture.Write(root, fixture.V2, hosts[0].cgroups); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "proc", "self", "mountinfo")
	os.Remove(p)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := NewEnv(Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys")}, promslog.NewNopLogger())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || Reason(err) != "timeout" {
			t.Fatalf("want a timeout error, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("NewEnv blocked on a FIFO mountinfo")
	}
}

// blockingCollector blocks in Update until released, like a collector stuck in the kernel.
type blockingCollector struct {
	started chan struct{}
	release chan struct{}
}

func (b *blockingCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	select {
	case b.started <- struct{}{}:
	default:
	}
	<-b.release
	return nil
}

// A collector that never returns: every scrape answers at the deadline with the others'
// series, the stuck one reports success 0 and one timeout, and it is never started twice.
func TestHardDeadlineAndOneOutstandingUpdate(t *testing.T) {
	root := t.TempDir()
	if err := fixture.Write(root, fixture.V2, hosts[0].cgroups); err != nil {
		t.Fatal(err)
	}
	env, err := NewEnv(Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys")}, promslog.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	cpu, _ := newCPUCollector(env)
	stuck := &blockingCollector{started: make(chan struct{}, 10), release: make(chan struct{})}
	set := &Set{env: env, collectors: map[string]Collector{"cpu": cpu, "stuck": stuck}}
	for i := range 5 {
		begin := time.Now()
		mfs, err := set.Gather(context.Background(), 200*time.Millisecond)
		if d := time.Since(begin); d > 200*time.Millisecond+stuckMargin {
			t.Fatalf("scrape %d took %v", i, d)
		}
		if err != nil {
			t.Fatal(err)
		}
		if v := gaugeOf(mfs, "quota_exporter_scrape_collector_success", "stuck"); v != 0 {
			t.Fatalf("scrape %d: stuck collector success %v", i, v)
		}
		if v := gaugeOf(mfs, "quota_exporter_scrape_collector_success", "cpu"); v != 1 {
			t.Fatalf("scrape %d: cpu success %v", i, v)
		}
	}
	if n := len(stuck.started); n != 1 {
		t.Fatalf("stuck collector started %d times, want 1", n)
	}
	if v := counterValue(t, env, "stuck", "timeout"); v != 1 {
		t.Fatalf("read_errors{collector=stuck,reason=timeout} = %v, want 1", v)
	}
	close(stuck.release)
	waitUntil(t, func() bool { return set.runs.claim("stuck") })
}

// A scrape whose client has gone cancels the collection.
func TestGatherCancelledWithRequest(t *testing.T) {
	env := &Env{Logger: promslog.NewNopLogger(), Errors: NewErrorCounter(promslog.NewNopLogger())}
	var seen context.Context
	got := make(chan struct{})
	c := collectorFunc(func(ctx context.Context, ch chan<- prometheus.Metric) error {
		seen = ctx
		close(got)
		<-ctx.Done()
		return ctx.Err()
	})
	set := &Set{env: env, collectors: map[string]Collector{"c": c}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-got; cancel() }()
	if _, err := set.Gather(ctx, time.Minute); err == nil {
		t.Fatal("want the request's error")
	}
	select {
	case <-seen.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("collector's context not cancelled when the only waiting request went away")
	}
}

type collectorFunc func(ctx context.Context, ch chan<- prometheus.Metric) error

func (f collectorFunc) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	return f(ctx, ch)
}

func gaugeOf(mfs []*dto.MetricFamily, name, collector string) float64 {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == "collector" && lp.GetValue() == collector {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

func counterValue(t *testing.T, env *Env, collector, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := env.Errors.vec.WithLabelValues(collector, reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met in 5 s")
}

// scrapeEachWindow calls scrape once a sampler window until it returns true, failing after
// maxWindows windows: the sampler's progress on a loaded machine, not a time limit.
func scrapeEachWindow(t *testing.T, window time.Duration, scrape func() bool) {
	t.Helper()
	const maxWindows = 300
	for range maxWindows {
		if scrape() {
			return
		}
		time.Sleep(window)
	}
	t.Fatalf("not done after %d sampler windows", maxWindows)
}

// windowHistograms counts the cgroups with a throttled-ratio histogram in a scrape.
func windowHistograms(mfs []*dto.MetricFamily) int {
	for _, mf := range mfs {
		if mf.GetName() == "quota_cpu_throttled_window_ratio" {
			return len(mf.Metric)
		}
	}
	return 0
}

// samplerCgroups is the number of cgroups the sampler watches, as a scrape reports it.
func samplerCgroups(mfs []*dto.MetricFamily) int {
	for _, mf := range mfs {
		if mf.GetName() == "quota_exporter_throttle_sampler_cgroups" && len(mf.Metric) == 1 {
			return int(mf.Metric[0].GetGauge().GetValue())
		}
	}
	return 0
}

// readErrors sums env's read_errors_total of one reason over the collectors.
func readErrors(t *testing.T, env *Env, reason string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(env.Errors)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == "reason" && lp.GetValue() == reason {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// gatherWithinDeadline runs scrape i of a stuck-read test and fails unless it answers within the
// deadline plus the margin.
func gatherWithinDeadline(t *testing.T, set *Set, i int) []*dto.MetricFamily {
	t.Helper()
	begin := time.Now()
	mfs, err := set.Gather(context.Background(), stuckTimeout)
	if d := time.Since(begin); d > stuckTimeout+stuckMargin {
		t.Fatalf("scrape %d took %v", i, d)
	}
	if err != nil {
		t.Fatalf("scrape %d: %v", i, err)
	}
	return mfs
}
