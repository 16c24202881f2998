//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// readBlocks reports whether reading path does not return within limit. A blocked read
// leaves its goroutine behind until the FUSE server answers.
func readBlocks(path string, limit time.Duration) bool {
	done := make(chan struct{})
	go func() { _, _ = os.ReadFile(path); close(done) }()
	select {
	case <-done:
		return false
	case <-time.After(limit):
		return true
	}
}

// sigtermWithin sends SIGTERM to the exporter and fails the test unless it exits within
// limit; it returns how long the exit took.
func sigtermWithin(t *testing.T, p *os.Process, limit time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _, _ = p.Wait(); close(exited) }()
	select {
	case <-exited:
		return time.Since(begin)
	case <-time.After(limit):
		t.Fatalf("exporter still running %v after SIGTERM", limit)
		return 0
	}
}

// startVictim starts a process that maps fuse's file and faults it in with its mmap_lock
// held (testdata/stuckvictim.c, govictim), and stops it at cleanup, after the server has been
// told to answer: it unblocks only then (or when the connection is aborted, which the FUSE
// cleanup, registered earlier and so run later, does).
func startVictim(t *testing.T, fuse *testutil.FUSE, name string, cmd *exec.Cmd) *testutil.Helper {
	t.Helper()
	v := testutil.StartHelper(t, name, cmd)
	t.Cleanup(func() { fuse.Answer(); v.Stop(2 * time.Second) })
	v.WaitLine(t, "mapped", 10*time.Second)
	return v
}

// metricLines are the lines of body for metric name whose labels contain every one of subs.
func metricLines(body, name string, subs ...string) []string {
	var out []string
lines:
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, name+"{") {
			continue
		}
		for _, sub := range subs {
			if !strings.Contains(l, sub) {
				continue lines
			}
		}
		out = append(out, l)
	}
	return out
}

// stuckProcessReads sums quota_exporter_stuck_reads{collector="process"}.
func stuckProcessReads(body string) int {
	n := 0
	for _, l := range metricLines(body, "quota_exporter_stuck_reads", `collector="process"`) {
		f := strings.Fields(l)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		n += int(v)
	}
	return n
}

// Real processes stuck in the kernel: a C (glibc) and a Go program each have a page of a
// FUSE file faulted in with their mmap_lock held and a writer queued on the lock, and the
// FUSE server does not answer, so reads of their /proc/<pid>/cmdline, environ, mem and
// smaps block (stat, status and, since Linux 6.16, maps do not). The real exporter, scraped
// 50 times, answers every scrape within the deadline with the healthy process and the
// cgroup's series, its OS threads stay bounded, quota_exporter_stuck_reads shows the stuck
// reads, SIGTERM exits within 5 s, and once the server answers the stuck reads return and
// the series that were missing are exported again (the C program's malloc series: environ
// and mem); the Go program, whose runtime detection blocked, is exported meanwhile as
// runtime="unknown" and as runtime="go" once its detection returns.
func TestRealProcessStuckInKernel(t *testing.T) {
	cg := testutil.NewCgroup(t, "fuse", testutil.CgroupOptions{QuotaUS: 50000})
	victimBin := testutil.BuildC(t, "testdata/stuckvictim.c", "-O2", "-Wall", "-pthread")
	goVictimBin := testutil.BuildGo(t, "./testdata/govictim")
	bin := buildExporter(t)
	fuse := testutil.MountStuckFUSE(t)

	healthy := testutil.StartHelper(t, "healthy", cg.Command("sleep", "600"))
	t.Cleanup(func() { healthy.Stop(time.Second) })
	// Two victims, C (glibc) and Go, on the same FUSE page (the second waits for the page
	// the first one's read is filling).
	victim := startVictim(t, fuse, "victim", cg.Command(victimBin, fuse.Data))
	fuse.WaitRead(t, 10*time.Second) // the fault is in the kernel, the lock held
	goVictim := startVictim(t, fuse, "govictim", cg.Command(goVictimBin, fuse.Data))
	vpid, gpid, hpid := victim.Cmd.Process.Pid, goVictim.Cmd.Process.Pid, healthy.Cmd.Process.Pid
	// What the kernel does here (6.18): cmdline and environ wait for the mmap_lock; stat,
	// status and maps do not.
	for _, v := range []*testutil.Helper{victim, goVictim} {
		v.Say("lock") // the main thread queues for the lock (write)
		v.WaitLine(t, "locking", 5*time.Second)
		for try := 0; !readBlocks(fmt.Sprintf("/proc/%d/cmdline", v.Cmd.Process.Pid), 300*time.Millisecond); try++ {
			if try == 20 { // the main thread had seconds to reach the lock
				t.Fatalf("/proc/<%s>/cmdline does not block: it is not stuck behind its mmap_lock", v.Name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	procDir := fmt.Sprintf("/proc/%d/", vpid)
	for _, f := range []string{"stat", "status", "maps"} {
		if readBlocks(procDir+f, 2*time.Second) {
			t.Logf("note: /proc/<victim>/%s blocks too on this kernel", f)
		}
	}

	args := []string{"--scrape.timeout=2s", "--process.min-resident=0", "--cgroup.include=" + cg.Path, "--process.smaps-interval=1s"}
	addr := freeAddr(t)
	cmd := exec.Command(bin, append([]string{"--web.listen-address=" + addr}, args...)...)
	runExporter(t, cmd, addr)
	limit := 2*time.Second + 500*time.Millisecond
	pidLabel := func(pid int) string { return fmt.Sprintf(`pid="%d"`, pid) }
	// The victim's stat and status answer, so it is listed and exported; its malloc series
	// need /proc/<pid>/environ and mem, which block.
	victimMalloc := `process="stuckvictim"`
	var threads, maxThreads int
	var slowest time.Duration
	victimListed, victimMalloced, goListed := 0, 0, 0
	var body string
	for i := range 50 {
		begin := time.Now()
		body = scrape(t, addr, limit)
		slowest = max(slowest, time.Since(begin))
		for _, want := range []string{
			`quota_cpu_usage_seconds_total{cgroup="` + cg.Path + `"`,
			`quota_memory_usage_bytes{cgroup="` + cg.Path + `"`,
			`quota_exporter_scrape_collector_success{collector="cpu"} 1`,
			`quota_exporter_scrape_collector_success{collector="memory"} 1`,
		} {
			if !strings.Contains(body, want) {
				t.Fatalf("scrape %d lacks %s", i, want)
			}
		}
		if len(metricLines(body, "quota_process_info", pidLabel(hpid))) == 0 ||
			len(metricLines(body, "quota_process_allocator_info", `process="sleep"`)) == 0 {
			t.Fatalf("scrape %d lacks the healthy process %d:\n%s", i, hpid, grepLines(body, "quota_process_"))
		}
		if len(metricLines(body, "quota_process_info", pidLabel(vpid))) > 0 {
			victimListed++
		}
		if len(metricLines(body, "quota_process_allocator_info", victimMalloc)) > 0 {
			victimMalloced++
		}
		if len(metricLines(body, "quota_process_info", pidLabel(gpid))) > 0 {
			goListed++
		}
		n := threadsOf(t, cmd.Process.Pid)
		if i == 2 {
			threads = n // the stuck reads (one per kind) have started by now
		}
		maxThreads = max(maxThreads, n)
	}
	final := threadsOf(t, cmd.Process.Pid)
	t.Logf("50 scrapes with a process stuck in the kernel: slowest %v; exporter threads %d after 3 scrapes, %d after 50 (max %d); "+
		"victim listed in %d scrapes, its malloc series in %d, Go victim listed in %d; stuck reads: %s; timeouts: %s",
		slowest, threads, final, maxThreads, victimListed, victimMalloced, goListed,
		strings.Join(metricLines(body, "quota_exporter_stuck_reads", ""), "; "),
		strings.Join(metricLines(body, "quota_exporter_read_errors_total", `reason="timeout"`), "; "))
	if final > threads+6 {
		t.Errorf("exporter threads grew from %d to %d over 50 scrapes", threads, final)
	}
	if stuckProcessReads(body) == 0 {
		t.Errorf("quota_exporter_stuck_reads does not show the stuck process:\n%s", grepLines(body, "quota_exporter_"))
	}
	// The Go victim's runtime detection blocks: it is exported meanwhile with its stat and
	// status series, as runtime="unknown".
	if goListed < 45 || len(metricLines(body, "quota_process_info", pidLabel(gpid), `runtime="unknown"`)) == 0 {
		t.Errorf("the Go victim was listed in %d of 50 scrapes (want >= 45), last as:\n%s", goListed,
			strings.Join(metricLines(body, "quota_process_info", pidLabel(gpid)), "\n"))
	}
	if victimMalloced > 0 {
		t.Errorf("the victim's malloc series were exported in %d scrapes while its mem and environ block", victimMalloced)
	}
	if len(metricLines(body, "quota_exporter_read_errors_total", `reason="timeout"`)) == 0 {
		t.Errorf("no timeout counted:\n%s", grepLines(body, "read_errors_total"))
	}

	// A second exporter, scraped while the process is stuck, exits within 5 s of SIGTERM.
	addr2 := freeAddr(t)
	cmd2 := exec.Command(bin, append([]string{"--web.listen-address=" + addr2}, args...)...)
	runExporter(t, cmd2, addr2)
	scrape(t, addr2, limit)
	scrape(t, addr2, limit)
	t.Logf("exited %v after SIGTERM with reads stuck in the kernel", sigtermWithin(t, cmd2.Process, 5*time.Second))

	// The server answers: the victim runs on, the exporter's stuck reads return and the
	// process is exported again.
	fuse.Answer()
	victim.WaitLine(t, "unblocked", 10*time.Second)
	goVictim.WaitLine(t, "unblocked", 10*time.Second)
	deadline := time.Now().Add(15 * time.Second)
	for {
		body = scrape(t, addr, limit)
		back := len(metricLines(body, "quota_process_allocator_info", victimMalloc)) > 0 &&
			len(metricLines(body, "quota_process_info", pidLabel(gpid), `runtime="go"`)) > 0
		if back && stuckProcessReads(body) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15 s after the FUSE server answered: victim's malloc series and the Go victim exported %v, stuck reads %d:\n%s",
				back, stuckProcessReads(body), grepLines(body, "quota_process_"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("the stuck processes' series reappeared within %v of the server's answer", 15*time.Second-time.Until(deadline))
}
