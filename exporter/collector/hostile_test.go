package collector

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/procread"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// The hostile-tenant suite: real processes in real jails (chroot) next to honest ones, and the
// exporter's scrapes over all of them. What users rely on, asserted on every scrape:
//   - nothing outside a jail is opened for a jailed process (fanotify on the root mount; an
//     O_PATH lookup is no open and is not reported, a read is);
//   - every scrape answers within its timeout;
//   - threads and heap stay within documented bounds (hostileMaxThreads, hostileMaxHeap);
//   - the honest JVM and Go process keep their series; no jailed java exports perf data.

// Bounds the suite holds the exporter to, above its baseline before the first scrape
// (docs/security.md quotes the measured figures).
const (
	// hostileScrapeTimeout is the scrape's deadline (the default --scrape.timeout is 10 s;
	// a stuck FIFO read used to cost procread.DefaultTimeout, 2 s, per file).
	hostileScrapeTimeout = 5 * time.Second
	// hostileMaxThreads: OS threads added while scraping; the workers of the parallel
	// readers (16) and GOMAXPROCS, never one per hostile file.
	hostileMaxThreads = 32
	// hostileMaxHeap: Go heap in use added at the peak while scraping; the crafted binary
	// claims a 900 MiB section name table, the maps of the processes are streamed.
	hostileMaxHeap = 48 << 20
)

// probe samples the test process's threads and Go heap while scrapes run.
type probe struct {
	mu          sync.Mutex
	maxThreads  int
	maxHeap     uint64
	baseThreads int
	baseHeap    uint64
	stop, done  chan struct{}
}

func threadsNow() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

func startProbe() *probe {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	p := &probe{baseThreads: threadsNow(), baseHeap: ms.HeapInuse, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			n := threadsNow()
			p.mu.Lock()
			p.maxThreads, p.maxHeap = max(p.maxThreads, n), max(p.maxHeap, ms.HeapInuse)
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *probe) end() (threads int, heap uint64) {
	close(p.stop)
	<-p.done
	return p.maxThreads - p.baseThreads, p.maxHeap - min(p.maxHeap, p.baseHeap)
}

// startMountOpenLog records the files this process opens on the mount holding dir
// (FAN_MARK_MOUNT: every open on it, whatever the directory).
func startMountOpenLog(t *testing.T, dir string) *openLog {
	t.Helper()
	return newOpenLog(t, func(fd int) error {
		return unix.FanotifyMark(fd, unix.FAN_MARK_ADD|unix.FAN_MARK_MOUNT, unix.FAN_OPEN, unix.AT_FDCWD, dir)
	})
}

// hostileJava is one jailed process named java and what its jail does.
type hostileJava struct {
	name string
	jail *testutil.Jail
	cmd  *exec.Cmd
}

// craftBinary writes a copy of the sleeper (a real static Go binary) whose section name table
// claims size bytes, the file extended (sparse) to hold them: the kernel runs it, and a reader
// that believes its section headers reads size bytes. sparseTo > 0 extends it further.
func craftBinary(t *testing.T, dst string, namesSize, sparseTo int64) {
	t.Helper()
	b, err := os.ReadFile(testutil.Sleeper(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := elf.NewFile(strings.NewReader(string(b))); err != nil {
		t.Fatal(err)
	}
	if namesSize > 0 {
		shoff := binary.LittleEndian.Uint64(b[40:])
		shstrndx := uint64(binary.LittleEndian.Uint16(b[62:]))
		binary.LittleEndian.PutUint64(b[shoff+shstrndx*64+32:], uint64(namesSize))
		// Point the table at the end of the file, which the sparse extension fills.
		binary.LittleEndian.PutUint64(b[shoff+shstrndx*64+24:], uint64(len(b)))
		sparseTo = max(sparseTo, int64(len(b))+namesSize)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if sparseTo > 0 {
		if err := os.Truncate(dst, sparseTo); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHostileTenants(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireV1Cgroups(t)
	java := testutil.LookPath(t, "java")
	javac := testutil.LookPath(t, "javac")
	sleeper := testutil.Sleeper(t)

	// Honest tenants: a JVM and a Go program, each in its own quota cgroup.
	classes := t.TempDir()
	if out, err := exec.Command(javac, "-d", classes, filepath.Join("..", "internal", "jvm", "testdata", "QuotaBusy.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	honest := testutil.NewCgroup(t, fmt.Sprintf("tenantfs-honest%d", os.Getpid()), testutil.CgroupOptions{QuotaUS: 50000, PeriodUS: 100000})
	jvmCmd := honest.Command(java, "-Xmx32m", "-cp", classes, "QuotaBusy", "idle")
	jvmLines := stdoutLines(t, jvmCmd)
	waitLine(t, jvmLines, "ready", 60*time.Second)
	goCmd := honest.Command(sleeper)
	goLines := stdoutLines(t, goCmd)
	waitLine(t, goLines, "ready", 10*time.Second)
	honestJVM := jvmCmd.Process.Pid
	perfFile := fmt.Sprintf("/tmp/hsperfdata_root/%d", honestJVM)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, err := os.Stat(perfFile); err == nil && st.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no perf data file %s", perfFile)
		}
	}

	// Hostile tenants, in one quota cgroup: processes named java in jails.
	hostile := testutil.NewCgroup(t, fmt.Sprintf("tenantfs-hostile%d", os.Getpid()), testutil.CgroupOptions{QuotaUS: 50000, PeriodUS: 100000})
	intoCgroup := func(pid int) {
		for _, d := range []string{"cpu", "cpuacct", "memory"} {
			if p := hostile.Dir(d); dirExists(p) {
				if err := os.WriteFile(filepath.Join(p, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
					t.Fatalf("into %s: %v", p, err)
				}
			}
		}
	}
	var outside []string // directories outside every jail that hostile symlinks point at
	var all []*hostileJava
	// start runs the sleeper (or bin) as /jdk/bin/java in a fresh jail prepared by prep,
	// which gets the jailed pid (its perf data file name) once the process runs.
	start := func(name, bin string, prep func(j *testutil.Jail, pid int)) *hostileJava {
		j := testutil.NewJail(t)
		if bin == "" {
			j.Install(t, sleeper, "jdk/bin/java")
		} else {
			j.MkdirAll(t, "jdk/bin")
			if err := os.Rename(bin, j.Path("jdk/bin/java")); err != nil {
				t.Fatal(err)
			}
		}
		j.MkdirAll(t, "tmp")
		cmd := j.Start(t, "/jdk/bin/java", nil)
		intoCgroup(cmd.Process.Pid)
		prep(j, cmd.Process.Pid)
		h := &hostileJava{name: name, jail: j, cmd: cmd}
		all = append(all, h)
		return h
	}
	// outsideWithVictim makes a directory outside the jails holding hsperfdata_root/<pid>,
	// a hard link to the honest JVM's live perf data file.
	outsideWithVictim := func(pid int) string {
		d := t.TempDir()
		outside = append(outside, d)
		if err := os.MkdirAll(filepath.Join(d, "hsperfdata_root"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(perfFile, filepath.Join(d, "hsperfdata_root", strconv.Itoa(pid))); err != nil {
			t.Fatalf("hard link of the honest perf data: %v", err)
		}
		if err := os.WriteFile(filepath.Join(d, "passwd"), []byte("root:x:0:0::/:/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "release"), []byte("JAVA_VERSION=\"99\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	rel := func(from, to string) string { r, _ := filepath.Rel(from, to); return r }
	pidName := func(pid int) string { return strconv.Itoa(pid) }
	// Symlinks, absolute and relative, at every component of every path read below the root,
	// and FIFOs at every file read there.
	start("tmp absolute", "", func(j *testutil.Jail, pid int) {
		o := outsideWithVictim(pid)
		j.Symlink(t, o, "tmp")
		j.Symlink(t, o, "etc")
	})
	start("tmp relative", "", func(j *testutil.Jail, pid int) {
		o := outsideWithVictim(pid)
		j.Symlink(t, rel(j.Dir, o), "tmp")
		j.Symlink(t, rel(j.Dir, o), "etc")
	})
	start("hsperfdata dir absolute", "", func(j *testutil.Jail, pid int) {
		o := outsideWithVictim(pid)
		j.Symlink(t, filepath.Join(o, "hsperfdata_root"), "tmp/hsperfdata_root")
		j.Symlink(t, filepath.Join(o, "passwd"), "etc/passwd")
		j.Symlink(t, filepath.Join(o, "release"), "jdk/release")
	})
	start("hsperfdata dir relative", "", func(j *testutil.Jail, pid int) {
		o := outsideWithVictim(pid)
		j.Symlink(t, rel(j.Path("tmp"), filepath.Join(o, "hsperfdata_root")), "tmp/hsperfdata_root")
		j.Symlink(t, rel(j.Path("etc"), filepath.Join(o, "passwd")), "etc/passwd")
		j.Symlink(t, rel(j.Path("jdk"), filepath.Join(o, "release")), "jdk/release")
	})
	start("perf data file absolute", "", func(j *testutil.Jail, pid int) {
		o := outsideWithVictim(pid)
		j.Symlink(t, filepath.Join(o, "hsperfdata_root", pidName(pid)), "tmp/hsperfdata_root/"+pidName(pid))
	})
	start("perf data file relative", "", func(j *testutil.Jail, pid int) {
		o := outsideWithVictim(pid)
		j.Symlink(t, rel(j.Path("tmp/hsperfdata_root"), filepath.Join(o, "hsperfdata_root", pidName(pid))), "tmp/hsperfdata_root/"+pidName(pid))
	})
	start("magic link", "", func(j *testutil.Jail, pid int) {
		o := outsideWithVictim(pid)
		j.Symlink(t, "/proc/1/root"+o, "tmp")
	})
	start("fifos", "", func(j *testutil.Jail, pid int) {
		j.Mkfifo(t, "tmp/hsperfdata_root/"+pidName(pid))
		j.Mkfifo(t, "etc/passwd")
		j.Mkfifo(t, "jdk/release")
	})
	start("fifo at tmp", "", func(j *testutil.Jail, pid int) { j.Mkfifo(t, "tmp") })
	// Binaries: a huge sparse one (above the inspection cap) and a crafted one whose section
	// name table claims 900 MiB (the recipe of goruntime's and elfscan's fuzz seeds), each
	// named like a Go program and like java.
	bins := t.TempDir()
	craftBinary(t, filepath.Join(bins, "huge"), 0, 2<<30)
	craftBinary(t, filepath.Join(bins, "crafted"), 900<<20, 0)
	craftBinary(t, filepath.Join(bins, "huge-java"), 0, 2<<30)
	craftBinary(t, filepath.Join(bins, "crafted-java"), 900<<20, 0)
	start("huge sparse binary named java", filepath.Join(bins, "huge-java"), func(*testutil.Jail, int) {})
	start("crafted binary named java", filepath.Join(bins, "crafted-java"), func(*testutil.Jail, int) {})
	goLike := func(name, bin string) *exec.Cmd {
		j := testutil.NewJail(t)
		j.MkdirAll(t, "app")
		if err := os.Rename(bin, j.Path("app/"+name)); err != nil {
			t.Fatal(err)
		}
		cmd := j.Start(t, "/app/"+name, nil)
		intoCgroup(cmd.Process.Pid)
		return cmd
	}
	hugeGo := goLike("huge", filepath.Join(bins, "huge"))
	craftedGo := goLike("crafted", filepath.Join(bins, "crafted"))

	env := runtimeEnv(t)
	_, set := collectorSet(t, env, scrapeCollectors)
	waitOOMWatch(t, set)
	errReg := prometheus.NewRegistry()
	errReg.MustRegister(env.Errors)
	log := startMountOpenLog(t, "/")
	stuckBefore := procread.Stuck() // other tests' stuck reads may still be returning
	pr := startProbe()

	scrape := func(what string) map[string]*dto.MetricFamily {
		t.Helper()
		log.take() // the test's own opens (it writes the tenants' files) are not the exporter's
		newScrape(env)
		begin := time.Now()
		mfs, err := set.Gather(context.Background(), hostileScrapeTimeout)
		d := time.Since(begin)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d > hostileScrapeTimeout {
			t.Errorf("%s took %v, timeout %v", what, d, hostileScrapeTimeout)
		}
		byName := map[string]*dto.MetricFamily{}
		for _, mf := range mfs {
			byName[mf.GetName()] = mf
		}
		checkOpens(t, what, log.take(), outside)
		checkHonest(t, what, byName, honest.Path, hostile.Path, honestJVM)
		return byName
	}
	var slowest time.Duration
	for i := range 3 {
		begin := time.Now()
		mfs := scrape(fmt.Sprintf("scrape %d", i))
		slowest = max(slowest, time.Since(begin))
		if i == 2 {
			// The Go-like binaries: the crafted one is still read as Go (its build info is
			// found through the program headers), the huge one is skipped and counted.
			if seriesFor(mfs, "quota_process_info", hostile.Path, "pid", strconv.Itoa(craftedGo.Process.Pid), "runtime", "go") == nil {
				t.Errorf("the crafted Go binary (section names claiming 900 MiB) is not detected as Go")
			}
			if seriesFor(mfs, "quota_process_info", hostile.Path, "pid", strconv.Itoa(hugeGo.Process.Pid), "runtime", "go") != nil {
				t.Errorf("the huge sparse binary was inspected")
			}
		}
	}
	// Generations: jailed java processes that escape through /tmp, one after the other, while
	// scrapes run.
	for g := range 8 {
		h := start(fmt.Sprintf("generation %d", g), "", func(j *testutil.Jail, pid int) {
			j.Symlink(t, outsideWithVictim(pid), "tmp")
		})
		scrape(fmt.Sprintf("generation %d", g))
		_ = h.cmd.Process.Kill()
		_ = h.cmd.Wait()
	}
	threads, heap := pr.end()
	t.Logf("%d hostile processes: slowest scrape %v (timeout %v); threads +%d (bound %d); Go heap in use +%d KiB at the peak (bound %d MiB); stuck reads %d",
		len(all)+2, slowest, hostileScrapeTimeout, threads, hostileMaxThreads, heap>>10, hostileMaxHeap>>20, procread.Stuck())
	if threads > hostileMaxThreads {
		t.Errorf("threads grew by %d, bound %d", threads, hostileMaxThreads)
	}
	if heap > hostileMaxHeap {
		t.Errorf("heap in use grew by %d MiB, bound %d", heap>>20, hostileMaxHeap>>20)
	}
	if n := procread.Stuck(); n > stuckBefore {
		t.Errorf("%d reads stuck after the suite (%d before): a FIFO or symlink blocked a reader", n, stuckBefore)
	}
	// The huge binary is a skipped sample with a counted reason, not a failed scrape.
	if n := errorCount(t, env, "process", "parse"); n < 1 {
		t.Errorf(`read_errors_total{collector="process",reason="parse"} = %v: the huge binary was not counted`, n)
	}
	mfs, _ := errReg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			t.Logf("%s %v %v", mf.GetName(), m.Label, value(m))
		}
	}
}

// checkOpens fails for any file opened below a directory outside the jails that a hostile
// symlink points at, and for the host's /etc/passwd.
func checkOpens(t *testing.T, what string, opens map[string]int, outside []string) {
	t.Helper()
	for p := range opens {
		if p == "(queue overflow)" {
			t.Errorf("%s: fanotify queue overflowed", what)
			continue
		}
		if p == "/etc/passwd" {
			t.Errorf("%s: opened the host's /etc/passwd", what)
		}
		for _, o := range outside {
			if strings.HasPrefix(p, o+"/") || p == o {
				t.Errorf("%s: opened %s, outside every jail", what, p)
			}
		}
	}
}

// checkHonest fails unless the honest JVM has its perf data and the honest Go process its Go
// series, and no process in the hostile cgroup has perf data.
func checkHonest(t *testing.T, what string, mfs map[string]*dto.MetricFamily, honest, hostile string, jvmPid int) {
	t.Helper()
	if value(seriesFor(mfs, "quota_jvm_perfdata_available", honest, "process", "QuotaBusy")) != 1 {
		t.Errorf("%s: the honest JVM (pid %d) lost its perf data", what, jvmPid)
	}
	if seriesFor(mfs, "quota_go_gomaxprocs", honest) == nil {
		t.Errorf("%s: the honest Go process lost its series", what)
	}
	if mf := mfs["quota_jvm_perfdata_available"]; mf != nil {
		for _, m := range mf.Metric {
			if labelOf(m, "cgroup") == hostile && value(m) != 0 {
				t.Errorf("%s: a jailed java exported perf data: %v", what, m.Label)
			}
		}
	}
	if seriesFor(mfs, "quota_jvm_perfdata_available", hostile) == nil {
		t.Errorf("%s: no jailed java seen by the jvm collector (the suite tests nothing)", what)
	}
}
