package collector

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/execache"
	"github.com/quota-exporter/quota_exporter/exporter/internal/hsperfdata"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// Bounds of issue 29 ("bounded by construction") on real tenant processes, scraped by the
// default collectors: what a scrape allocates and what the exporter keeps per process may
// not grow with what the tenants' files claim.
const (
	// craftedScrapeAlloc bounds the heap one scrape allocates (a calm scrape of ~50
	// processes allocates a few MiB).
	craftedScrapeAlloc = 64 << 20
	// craftedKeptPerProcess bounds the live heap per watched process after the scrapes.
	craftedKeptPerProcess = 32 << 10
	// craftedDynsymName is the length of the one string every crafted dynamic symbol names.
	craftedDynsymName = 1<<20 - 2
)

// heapLive is the live Go heap after a GC.
func heapLive() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestCraftedTenantFilesBounded: tenant processes that run, in a real cgroup, each planting
// one of the inputs whose parse or kept result used to grow with what it claimed:
//   - copies of sleep named java whose .dynsym/.dynstr section headers point at 43 689
//     symbols that all name one 1 MiB string (debug/elf: 43 GiB at the first scrape);
//   - processes of one Go-looking executable whose build info is almost 1 MiB, most of it the
//     main module path (1 MiB kept per process);
//   - processes named java whose perf data file is 1 MiB of 40 000 tiny entries without the VM
//     start-time counter (3.4 MiB kept per process).
//
// Every scrape allocates within craftedScrapeAlloc and the exporter keeps at most
// craftedKeptPerProcess per process afterwards; the crafted perf data is refused.
func TestCraftedTenantFilesBounded(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireV1Cgroups(t)
	const dynsymProcs, goProcs, perfProcs = 4, 32, 16
	cg := testutil.NewCgroup(t, fmt.Sprintf("crafted%d", os.Getpid()), testutil.CgroupOptions{QuotaUS: 50000, PeriodUS: 100000})
	dir := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	testutil.Require(t, err == nil, "no sleep in PATH")
	img, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(cmd *exec.Cmd) int {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	java := write("dynsym/java", testutil.CraftSymbols(t, img, ".dynsym", 43689, craftedDynsymName))
	for range dynsymProcs {
		run(cg.Command(java, "3600"))
	}
	app := write("go/app", testutil.CraftedELF{GoVersion: "go1.26.8", ModInfo: testutil.CraftedModuleText(1<<20 - 64), Runnable: true}.Bytes())
	var goPIDs []int
	for range goProcs {
		goPIDs = append(goPIDs, run(cg.Command(app)))
	}
	perf := testutil.CraftedPerfData{Entries: 40000, Padding: hsperfdata.MaxFileSize}.Bytes()
	for range perfProcs {
		j := testutil.NewJail(t)
		j.Install(t, testutil.Sleeper(t), "jdk/bin/java")
		cmd := j.Start(t, "/jdk/bin/java", nil)
		joinCgroup(t, cg, cmd.Process.Pid)
		j.WriteFile(t, "tmp/hsperfdata_root/"+strconv.Itoa(cmd.Process.Pid), perf)
	}
	procs := dynsymProcs + goProcs + perfProcs
	waitExecs(t, cg, procs)

	base := heapLive()
	env := cgroupEnv(t, cg)
	_, set := collectorSet(t, env, scrapeCollectors)
	waitOOMWatch(t, set)
	pr := startProbe()
	var mfs map[string]*dto.MetricFamily
	var maxAlloc uint64
	for i := range 3 {
		newScrape(env)
		var got []*dto.MetricFamily
		n := testutil.Allocated(func() { got, err = set.Gather(context.Background(), hostileScrapeTimeout) })
		if err != nil {
			t.Fatalf("scrape %d: %v", i, err)
		}
		maxAlloc = max(maxAlloc, n)
		mfs = map[string]*dto.MetricFamily{}
		for _, mf := range got {
			mfs[mf.GetName()] = mf
		}
	}
	_, peak := pr.end()
	kept := heapLive() - min(base, heapLive())
	runtime.KeepAlive(env)
	runtime.KeepAlive(set)
	t.Logf("%d tenant processes: a scrape allocated at most %d MiB (bound %d), heap in use +%d MiB at the peak; %d KiB kept, %d bytes per process (bound %d)",
		procs, maxAlloc>>20, craftedScrapeAlloc>>20, peak>>20, kept>>10, kept/uint64(procs), craftedKeptPerProcess)
	if maxAlloc > craftedScrapeAlloc {
		t.Errorf("a scrape allocated %d bytes, bound %d", maxAlloc, craftedScrapeAlloc)
	}
	if kept/uint64(procs) > craftedKeptPerProcess {
		t.Errorf("%d bytes kept per process, bound %d", kept/uint64(procs), craftedKeptPerProcess)
	}
	// The crafted processes are still watched: the Go ones with their series, the java ones
	// without perf data.
	for _, pid := range goPIDs[:1] {
		if seriesFor(mfs, "quota_process_info", cg.Path, "pid", strconv.Itoa(pid), "runtime", "go") == nil {
			t.Errorf("the crafted Go process %d is not detected as Go", pid)
		}
	}
	jvms := 0
	if mf := mfs["quota_jvm_perfdata_available"]; mf != nil {
		for _, m := range mf.Metric {
			if labelOf(m, "cgroup") != cg.Path {
				continue
			}
			jvms++
			if value(m) != 0 {
				t.Errorf("crafted perf data exported: %v", m.Label)
			}
		}
	}
	if jvms != dynsymProcs+perfProcs {
		t.Errorf("quota_jvm_perfdata_available for %d JVMs, want %d", jvms, dynsymProcs+perfProcs)
	}
	// The processes of one executable share what was read of it.
	if f, err := os.Open(app); err == nil {
		id, ok := execache.IDOf(f)
		f.Close()
		if b, hit := env.Processes.GoBuilds.Get(id); ok && (!hit || !b.Go) {
			t.Errorf("the Go executable's build info is not kept for its processes: %+v, %v", b, hit)
		}
	}
}

// cgroupEnv is runtimeEnv watching cg alone: what it keeps is the tenants', not the host's.
func cgroupEnv(t *testing.T, cg *testutil.Cgroup) *Env {
	t.Helper()
	env, err := NewEnv(Config{ProcPath: "/proc", SysPath: "/sys", ThrottleWindow: time.Second, ProcessMinResident: 64 << 20,
		CgroupInclude: regexp.MustCompile("^" + regexp.QuoteMeta(cg.Path) + "$")}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// joinCgroup moves pid into every v1 controller of cg.
func joinCgroup(t *testing.T, cg *testutil.Cgroup, pid int) {
	t.Helper()
	for _, d := range []string{"cpu", "cpuacct", "memory"} {
		if p := cg.Dir(d); dirExists(p) {
			if err := os.WriteFile(filepath.Join(p, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
				t.Fatalf("into %s: %v", p, err)
			}
		}
	}
}

// waitExecs waits until cg holds n processes and none is still the shell that joins it.
func waitExecs(t *testing.T, cg *testutil.Cgroup, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pids, shells := cg.PIDs(), 0
		for _, pid := range pids {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(b)) == "sh" {
				shells++
			}
		}
		if len(pids) == n && shells == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cgroup holds %d processes (%d not exec'd yet), want %d", len(pids), shells, n)
		}
	}
}

// TestJVMWithoutPerfDataRemembered: a process named java without perf data cost a listing of
// its /tmp (up to 4 096 lookups) and a read of its /etc/passwd at every scrape. The miss is
// now remembered per process and tried again on a slow clock: the next scrapes open nothing
// in its root, and a perf data file that shows up later is found once the retry is due.
func TestJVMWithoutPerfDataRemembered(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireV1Cgroups(t)
	cg := testutil.NewCgroup(t, fmt.Sprintf("noperf%d", os.Getpid()), testutil.CgroupOptions{QuotaUS: 50000, PeriodUS: 100000})
	j := testutil.NewJail(t)
	j.Install(t, testutil.Sleeper(t), "jdk/bin/java")
	j.WriteFile(t, "etc/passwd", []byte("root:x:0:0::/:/bin/sh\n"))
	for i := range 64 {
		j.MkdirAll(t, fmt.Sprintf("tmp/hsperfdata_user%d", i))
	}
	cmd := j.Start(t, "/jdk/bin/java", nil)
	joinCgroup(t, cg, cmd.Process.Pid)
	log := newOpenLog(t, func(fd int) error {
		return unix.FanotifyMark(fd, unix.FAN_MARK_ADD|unix.FAN_MARK_MOUNT, unix.FAN_OPEN|unix.FAN_ONDIR, unix.AT_FDCWD, j.Dir)
	})
	// Reads of processes' files that earlier tests left stuck count against the node-wide
	// pool; while it is full the first look is refused, not made.
	for deadline := time.Now().Add(30 * time.Second); procread.Stuck() > 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	env := cgroupEnv(t, cg)
	_, set := collectorSet(t, env, []string{"process", "jvm"})
	scrape := func() (map[string]int, float64) {
		t.Helper()
		log.take()
		newScrape(env)
		got, err := set.Gather(context.Background(), hostileScrapeTimeout)
		if err != nil {
			t.Fatal(err)
		}
		opens := map[string]int{}
		for p, n := range log.take() {
			if strings.HasPrefix(p, j.Dir+"/") {
				opens[strings.TrimPrefix(p, j.Dir)] = n
			}
		}
		mfs := map[string]*dto.MetricFamily{}
		for _, mf := range got {
			mfs[mf.GetName()] = mf
		}
		return opens, value(seriesFor(mfs, "quota_jvm_perfdata_available", cg.Path))
	}
	first, avail := scrape()
	t.Logf("first scrape: perf data %v, opened in the root %v", avail, first)
	if avail != 0 || first["/tmp"] == 0 || first["/etc/passwd"] == 0 {
		t.Fatalf("first scrape: perf data %v, opens %v: want a look at /tmp and /etc/passwd", avail, first)
	}
	for i := range 3 {
		if opens, _ := scrape(); len(opens) > 0 {
			t.Errorf("scrape %d after the miss opened %v in the process's root", i+2, opens)
		}
	}
	// The JVM's file shows up: found at the first scrape after the retry is due.
	start := time.Now()
	j.WriteFile(t, "tmp/hsperfdata_root/"+strconv.Itoa(cmd.Process.Pid), testutil.CraftedPerfData{VMStartMillis: start.UnixMilli() - 500}.Bytes())
	for avail != 1 {
		if time.Since(start) > 2*time.Minute {
			t.Fatal("the perf data file that showed up was not read within 2 minutes")
		}
		time.Sleep(time.Second)
		_, avail = scrape()
	}
	t.Logf("perf data that showed up read after %v", time.Since(start).Round(time.Second))
}
