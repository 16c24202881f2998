//go:build linux

package collector

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"
	"github.com/quota-exporter/quota_exporter/exporter/internal/processes"
)

// processSeriesKeys are "name{labels}" of the per-process series of a scrape (those with a
// process label), except those of the cgroup skip.
func processSeriesKeys(mfs []*dto.MetricFamily, skip string) map[string]bool {
	out := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var b strings.Builder
			b.WriteString(mf.GetName())
			isProcess, drop := false, false
			for _, lp := range m.Label {
				switch lp.GetName() {
				case "process":
					isProcess = true
				case "cgroup":
					drop = lp.GetValue() == skip
				}
				b.WriteString("," + lp.GetName() + "=" + lp.GetValue())
			}
			if isProcess && !drop {
				out[b.String()] = true
			}
		}
	}
	return out
}

// hasProcessInfo says whether a scrape exports quota_process_info for pid.
func hasProcessInfo(mfs []*dto.MetricFamily, pid int) bool {
	for _, mf := range mfs {
		if mf.GetName() != "quota_process_info" {
			continue
		}
		for _, m := range mf.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == "pid" && lp.GetValue() == strconv.Itoa(pid) {
					return true
				}
			}
		}
	}
	return false
}

// fifoInPlace replaces path (a file or a symlink) by a named pipe, on which a reader's open
// blocks until a writer comes: what a /proc file behind a held mmap_lock looks like. The
// returned release puts the original back and lets the blocked readers return.
func fifoInPlace(t *testing.T, path string) (release func()) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	var link string
	if fi.Mode()&os.ModeSymlink != 0 {
		link, _ = os.Readlink(path)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	} else if err := os.Rename(path, path+".orig"); err != nil { // mem is a sparse 128 TiB file: moved, not copied
		t.Fatal(err)
	}
	target := path
	if link != "" {
		// exe: a link to a FIFO (readlink answers, opening the executable blocks).
		target = path + ".fifo"
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(target, 0o644); err != nil {
		t.Fatal(err)
	}
	done := false
	return func() {
		if done {
			return
		}
		done = true
		// O_RDWR does not block: blocked openers return, then read EOF once it is closed.
		f, err := os.OpenFile(target, os.O_RDWR, 0)
		if err != nil {
			t.Error(err)
			return
		}
		if link != "" {
			os.Remove(path)
			os.Symlink(link, path)
		} else {
			os.Rename(path+".orig", path)
		}
		f.Close()
	}
}

// One container's processes (a JVM, three Go programs, a glibc program) have a FIFO in place
// of one kind of /proc/<pid> file: 50 scrapes each answer within the deadline with every
// series of the other processes, OS threads stay bounded, the stuck reads are counted, and
// once the reads return the processes are exported again.
func TestFIFOInPlaceOfProcessFile(t *testing.T) {
	testutil := func(kind string, dir string) []string {
		switch kind {
		case "task comm":
			m, _ := filepath.Glob(filepath.Join(dir, "task", "*", "comm"))
			return m
		case "perf data":
			m, _ := filepath.Glob(filepath.Join(dir, "root", "tmp", "hsperfdata_*", "*"))
			return m
		}
		return []string{filepath.Join(dir, kind)}
	}
	kinds := []string{"stat", "status", "environ", "cmdline", "maps", "mem", "exe", "task comm", "perf data"}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			root := memTempDir(t)
			processHost(t, root, 10) // pids 10000-10004 in the first container, 10005-10009 in the second
			stuckPIDs := []int{10000, 10001, 10004}
			cfg := Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys"), SmapsInterval: time.Hour}
			newSet := func() *Set {
				env, err := NewEnv(cfg, promslog.NewNopLogger())
				if err != nil {
					t.Fatal(err)
				}
				set, err := NewSet(env, append(append([]string{}, processCollectors...), "smaps"))
				if err != nil {
					t.Fatal(err)
				}
				return set
			}
			var stuckCg string
			healthy := func() map[string]bool {
				set := newSet()
				defer set.Close()
				mfs, err := set.Gather(context.Background(), stuckTimeout)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range set.env.Processes.Last() {
					if p.PID == stuckPIDs[0] {
						stuckCg = p.Cgroup.Path
					}
				}
				for _, pid := range stuckPIDs {
					if !hasProcessInfo(mfs, pid) {
						t.Fatalf("pid %d not exported before its file is replaced", pid)
					}
				}
				return processSeriesKeys(mfs, stuckCg)
			}()
			if len(healthy) == 0 || stuckCg == "" {
				t.Fatal("no per-process series in the healthy scrape")
			}
			var releases []func()
			for _, pid := range stuckPIDs {
				for _, p := range testutil(kind, filepath.Join(cfg.ProcPath, strconv.Itoa(pid))) {
					releases = append(releases, fifoInPlace(t, p))
				}
			}
			releaseAll := func() {
				for _, r := range releases {
					r()
				}
			}
			defer releaseAll()

			set := newSet()
			defer set.Close()
			var threads int
			for i := range 50 {
				mfs := gatherWithinDeadline(t, set, i)
				got := processSeriesKeys(mfs, stuckCg)
				for k := range healthy {
					if !got[k] {
						t.Fatalf("scrape %d lacks healthy series %s", i, k)
					}
				}
				if i == 0 {
					threads = osThreads(t)
				}
				newScrape(set.env) // list again every scrape, as with a long scrape interval
			}
			if n := osThreads(t); n > threads+5 {
				t.Errorf("OS threads grew from %d to %d over 50 scrapes", threads, n)
			}
			stuck := stuckOf(set.env, processes.ProcessErrors)
			t.Logf("stuck reads after 50 scrapes: %v (%d OS threads, %d goroutines)", stuck, osThreads(t), runtime.NumGoroutine())
			if (kind == "stat" || kind == "status") && len(stuck) == 0 {
				t.Errorf("no stuck read counted for a FIFO in place of %s", kind)
			}
			for k, n := range stuck {
				if n > len(stuckPIDs) {
					t.Errorf("%d stuck %s reads for %d stuck processes: more than one outstanding read per process", n, k, len(stuckPIDs))
				}
			}

			// The reads return: the processes are exported again.
			releaseAll()
			waitUntil(t, func() bool { return len(stuckOf(set.env, processes.ProcessErrors)) == 0 })
			var mfs []*dto.MetricFamily
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				newScrape(set.env)
				var err error
				if mfs, err = set.Gather(context.Background(), stuckTimeout); err != nil {
					t.Fatal(err)
				}
				back := true
				for _, pid := range stuckPIDs {
					back = back && hasProcessInfo(mfs, pid)
				}
				if back {
					return
				}
			}
			t.Errorf("stuck processes %v not exported again once their reads returned", stuckPIDs)
		})
	}
}
