//go:build linux

package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroupfs/fixture"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// onlyCgroupCollectors switches off the per-process collectors (fixture hosts have no /proc).
var onlyCgroupCollectors = []string{"--no-collector.process", "--no-collector.go", "--no-collector.jvm", "--no-collector.malloc", "--no-collector.smaps"}

func threadsOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line")
	return 0
}

// scrape returns the exposition at addr, failing unless it comes within limit with status 200.
func scrape(t *testing.T, addr string, limit time.Duration) string {
	t.Helper()
	status, body, took := scrapeWithin(t, "http://"+addr+"/metrics", 3*limit)
	if took > limit {
		t.Fatalf("scrape took %v, limit %v", took, limit)
	}
	if status != http.StatusOK {
		t.Fatalf("scrape: %d\n%s", status, body)
	}
	return body
}

// The real binary over a fixture host whose one cgroup has FIFOs in place of its
// cgroup.procs, cpu.stat, cpu.max and memory.stat: 50 scrapes within the deadline with the
// other cgroups' series, threads bounded, and SIGTERM during scrapes exits within 5 s.
func TestBinaryFIFOHostAndSIGTERM(t *testing.T) {
	bin := buildExporter(t)
	root := t.TempDir()
	const stuck = "/stuck.scope"
	if err := fixture.Write(root, fixture.V2, []fixture.Cgroup{
		{Path: "/ok.scope", PIDs: []int{10}, QuotaUS: 50000, UserUS: 1e6, MemUsage: 1 << 20},
		{Path: stuck, PIDs: []int{11}, QuotaUS: 50000, UserUS: 2e6, MemUsage: 1 << 20},
	}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cgroup.procs", "cpu.stat", "cpu.max", "memory.stat"} {
		p := filepath.Join(root, "sys/fs/cgroup", stuck, f)
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	cmd := exec.Command(bin, append([]string{"--web.listen-address=" + addr, "--scrape.timeout=2s", "--throttle.window=100ms",
		"--path.procfs=" + filepath.Join(root, "proc"), "--path.sysfs=" + filepath.Join(root, "sys")}, onlyCgroupCollectors...)...)
	runExporter(t, cmd, addr)
	limit := 2*time.Second + 500*time.Millisecond
	var threads int
	for i := range 50 {
		body := scrape(t, addr, limit)
		for _, want := range []string{`quota_cpu_usage_seconds_total{cgroup="/ok.scope"`, `quota_memory_usage_bytes{cgroup="/ok.scope"`} {
			if !strings.Contains(body, want) {
				t.Fatalf("scrape %d lacks %s", i, want)
			}
		}
		if i == 0 {
			threads = threadsOf(t, cmd.Process.Pid)
		}
		if i == 49 && !strings.Contains(body, `quota_exporter_read_errors_total{collector="discovery",reason="timeout"}`) {
			t.Errorf("FIFOs not counted as timeouts:\n%s", body)
		}
	}
	if n := threadsOf(t, cmd.Process.Pid); n > threads+4 {
		t.Errorf("exporter threads grew from %d to %d over 50 scrapes", threads, n)
	}

	// SIGTERM with scrapes in flight.
	for range 5 {
		go func() {
			if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
				resp.Body.Close()
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	t.Logf("exited %v after SIGTERM", sigtermWithin(t, cmd.Process, 5*time.Second))
}

// writeQuotaTree writes a v2 fixture host with n cgroups that each have a CPU quota (only
// the files discovery, the cpu collector and the sampler read).
func writeQuotaTree(t *testing.T, root string, n int) {
	t.Helper()
	if err := fixture.Write(root, fixture.V2, []fixture.Cgroup{{Path: "/"}}); err != nil {
		t.Fatal(err)
	}
	stat := "usage_usec 1000\nuser_usec 600\nsystem_usec 400\nnr_periods 10\nnr_throttled 5\nthrottled_usec 2000\n"
	for i := range n {
		d := filepath.Join(root, "sys/fs/cgroup/many", fmt.Sprintf("q%05d.scope", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range map[string]string{"cgroup.procs": "", "cpu.max": "50000 100000\n", "cpu.stat": stat} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// 20 000 cgroups with a quota under RLIMIT_NOFILE 1024 (soft and hard, so the exporter
// cannot raise it): the exporter stays up, exports every cgroup and its throttling
// histograms, and its sampler holds fewer descriptors than the limit.
func TestManyQuotaCgroupsUnderFileLimit(t *testing.T) {
	prlimit := testutil.LookPath(t, "prlimit")
	bin := buildExporter(t)
	root := shmTempDir(t) // 60 000 files: tmpfs writes and removes them in seconds
	const n = 20000
	writeQuotaTree(t, root, n)
	addr := freeAddr(t)
	// Only the sampler (and discovery): the cpu collector's 200 000 series would make
	// each scrape of this test take a minute on a loaded 2-core machine. The budgets off:
	// 20 000 cgroups of one tenant, 4 times the node-wide ceiling, are what this test is about.
	cmd := exec.Command(prlimit, append([]string{"--nofile=1024:1024", "--", bin, "--web.listen-address=" + addr, "--scrape.timeout=2m",
		"--throttle.window=1s", "--no-collector.memory", "--no-collector.cpu",
		"--budget.cgroups-per-tenant=0", "--budget.cgroups=0", "--budget.sampled-cgroups-per-tenant=0", "--budget.sampled-cgroups=0",
		"--budget.series-per-tenant=0", "--budget.series=0",
		"--path.procfs=" + filepath.Join(root, "proc"), "--path.sysfs=" + filepath.Join(root, "sys")}, onlyCgroupCollectors...)...)
	runExporter(t, cmd, addr)
	var body string
	deadline := time.Now().Add(5 * time.Minute)
	for {
		body = scrape(t, addr, 3*time.Minute)
		if strings.Count(body, "quota_cpu_throttled_window_ratio_count{") == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if got := strings.Count(body, "quota_cpu_throttled_window_ratio_count{"); got != n {
		t.Errorf("throttling histograms of %d cgroups, want %d", got, n)
	}
	if !strings.Contains(body, fmt.Sprintf("quota_exporter_throttle_sampler_cgroups %d", n)) {
		t.Errorf("sampler does not watch all %d cgroups", n)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "quota_exporter_throttle_sampler_open_files "); ok {
			held, _ := strconv.Atoi(v)
			if held <= 0 || held >= 1024 {
				t.Errorf("sampler holds %d descriptors under a limit of 1024", held)
			}
			t.Logf("sampler holds %d descriptors", held)
		}
	}
	if strings.Contains(body, `reason="io"`) {
		t.Errorf("io errors (EMFILE?) counted:\n%s", grepLines(body, `reason="io"`))
	}
}

// shmTempDir is a temporary directory on tmpfs (/dev/shm) when there is one.
func shmTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "quota-exporter-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func grepLines(body, sub string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A 100 MB cgroup.procs with the real binary in a 256 MiB v1 memory cgroup: the exporter
// stays up (reads are capped) and keeps exporting.
func TestHugeCgroupProcsUnderMemoryLimit(t *testing.T) {
	cg := testutil.NewCgroup(t, "stuck-mem", testutil.CgroupOptions{MemoryLimit: 256 << 20})
	bin := buildExporter(t)
	root := worldReadableTempDir(t)
	if err := fixture.Write(root, fixture.V1, []fixture.Cgroup{
		{Path: "/ok", PIDs: []int{10}, QuotaUS: 50000, UserUS: 1e6, MemUsage: 1 << 20},
		{Path: "/huge", PIDs: []int{11}, QuotaUS: 50000, UserUS: 1e6, MemUsage: 1 << 20},
	}); err != nil {
		t.Fatal(err)
	}
	line := []byte("4194303\n")
	chunk := make([]byte, 0, 1<<20)
	for len(chunk)+len(line) <= cap(chunk) {
		chunk = append(chunk, line...)
	}
	for _, ctl := range []string{"cpu,cpuacct", "memory"} {
		f, err := os.Create(filepath.Join(root, "sys/fs/cgroup", ctl, "huge/cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			if _, err := f.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	addr := freeAddr(t)
	cmd := cg.Command(bin, "--web.listen-address="+addr, "--scrape.timeout=10s", "--process.min-resident=0",
		"--path.procfs="+filepath.Join(root, "proc"), "--path.sysfs="+filepath.Join(root, "sys"))
	runExporter(t, cmd, addr)
	for i := range 5 {
		body := scrape(t, addr, 15*time.Second)
		if !strings.Contains(body, `quota_cpu_usage_seconds_total{cgroup="/ok"`) {
			t.Fatalf("scrape %d lacks the healthy cgroup", i)
		}
	}
	peak := cg.ReadKeyed("memory", "memory.stat")["hierarchical_memory_limit"]
	maxUsage, _ := os.ReadFile(filepath.Join(cg.Dir("memory"), "memory.max_usage_in_bytes"))
	failcnt, _ := os.ReadFile(filepath.Join(cg.Dir("memory"), "memory.failcnt"))
	t.Logf("limit %d, peak usage %s, failcnt %s", peak, strings.TrimSpace(string(maxUsage)), strings.TrimSpace(string(failcnt)))
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("exporter died: %v", err)
	}
}
