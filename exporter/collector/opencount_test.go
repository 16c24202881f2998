package collector

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// openLog records the files this test process opens below a set of directories, through
// fanotify (root, no strace): the kernel reports each open with the opener's pid, so opens by
// other processes (other tests, other exporters) are left out. Directories are marked one by
// one (FAN_EVENT_ON_CHILD), which sees the opens of their direct children.
type openLog struct {
	fd     int
	mu     sync.Mutex
	counts map[string]int
	stop   chan struct{}
	done   chan struct{}
}

func startOpenLog(t testing.TB, dirs []string) *openLog {
	t.Helper()
	return newOpenLog(t, func(fd int) error {
		for _, d := range dirs {
			if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD, unix.FAN_OPEN|unix.FAN_EVENT_ON_CHILD, unix.AT_FDCWD, d); err != nil {
				return fmt.Errorf("fanotify mark %s: %w", d, err)
			}
		}
		return nil
	})
}

// newOpenLog starts a log on a fanotify group marked by mark.
func newOpenLog(t testing.TB, mark func(fd int) error) *openLog {
	t.Helper()
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY|unix.O_LARGEFILE)
	if err != nil {
		testutil.Require(t, false, fmt.Sprintf("fanotify (needs root): %v", err))
	}
	if err := mark(fd); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	l := &openLog{fd: fd, counts: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go l.loop()
	t.Cleanup(l.close)
	return l
}

func (l *openLog) loop() {
	defer close(l.done)
	buf := make([]byte, 64<<10)
	self := int32(os.Getpid())
	for {
		n, err := unix.Read(l.fd, buf)
		if err == unix.EAGAIN || n <= 0 {
			select {
			case <-l.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		for off := 0; off+int(unix.FAN_EVENT_METADATA_LEN) <= n; {
			m := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&buf[off]))
			if m.Fd >= 0 {
				if m.Pid == self {
					if p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", m.Fd)); err == nil {
						l.mu.Lock()
						l.counts[p]++
						l.mu.Unlock()
					}
				}
				unix.Close(int(m.Fd))
			}
			if m.Mask&unix.FAN_Q_OVERFLOW != 0 {
				l.mu.Lock()
				l.counts["(queue overflow)"]++
				l.mu.Unlock()
			}
			off += int(m.Event_len)
		}
	}
}

// take waits for the events of opens already done, then returns and resets the counts.
func (l *openLog) take() map[string]int {
	time.Sleep(100 * time.Millisecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts
	l.counts = map[string]int{}
	return c
}

func (l *openLog) close() {
	select {
	case <-l.stop:
		return
	default:
	}
	close(l.stop)
	<-l.done
	unix.Close(l.fd)
}

// allDirs lists root and every directory below it (not following symlinks).
func allDirs(t testing.TB, root string) []string {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	return dirs
}

// checkOnce fails for every per-process or per-cgroup file opened more than once in one
// scrape (cgroup.procs included: the walk lists it once and hands the PIDs on).
// pidStat is a process's stat file, which the process source reads again after each round of
// reads by PID (processes.Each) to tell the process from a later one with the same PID.
var pidStat = regexp.MustCompile(`/proc/[0-9]+/stat$`)

// maxPIDRounds is the most rounds of reads by PID of one process in a scrape: detection, then
// the jvm, go and malloc collectors' reads.
const maxPIDRounds = 4

func checkOnce(t *testing.T, scrape string, opens map[string]int, scope func(string) bool) (checked int) {
	t.Helper()
	var paths []string
	for p := range opens {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if p == "(queue overflow)" {
			t.Errorf("%s: fanotify queue overflowed; counts incomplete", scrape)
			continue
		}
		if !scope(p) {
			continue
		}
		checked++
		limit := 1
		if pidStat.MatchString(p) {
			// Read by the listing, then once after each round of reads by PID (the source's
			// PID-reuse check): detection, perf data, the executable, maps.
			limit = 1 + maxPIDRounds
		}
		if opens[p] > limit {
			t.Errorf("%s: %s opened %d times", scrape, p, opens[p])
		}
	}
	return checked
}

// waitOOMWatch waits until the OOM watcher applied the cgroup source's first walk. When it starts watching a cgroup it
// reads that cgroup's memory.events (v2; its parent's too) or registers its memory.oom_control
// (v1) once, in the background or in the scrape that first sees the cgroup: in that one scrape
// the file is opened twice, once by the watcher and once by the memory collector (CI saw it).
// Every later scrape opens it once; the tests count from there.
func waitOOMWatch(t testing.TB, set *Set) {
	t.Helper()
	if c, ok := set.collectors["oom"].(*oomCollector); ok {
		c.env.Cgroups.Snapshot(context.Background())
		if err := c.syncs.Await(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
}

// scrapeOnce gathers every scrape-time collector once, as a new scrape (fresh walk and listing).
func scrapeOnce(t testing.TB, env *Env, reg *prometheus.Registry) {
	newScrape(env)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// scrapeCollectors are the collectors that read files during a scrape (throttle and smaps
// read in their own loops, never in a scrape).
var scrapeCollectors = []string{"cpu", "memory", "binding", "oom", "process", "go", "jvm", "malloc"}

// TestOpensPerScrapeFixture: on a fixture host with JVM, Go and glibc processes, one scrape
// (the first, which detects every runtime, and a later one) opens each /proc/<pid> file and
// each cgroup control file at most once.
func TestOpensPerScrapeFixture(t *testing.T) {
	testutil.RequireRoot(t)
	root := memTempDir(t) // tmpfs: the fixture's sparse mem files
	counts := processHost(t, root, 50)
	if counts.jvms == 0 || counts.goProcs == 0 || counts.otherLarge == 0 {
		t.Fatalf("fixture lacks a runtime: %+v", counts)
	}
	env, err := NewEnv(Config{ProcPath: filepath.Join(root, "proc"), SysPath: filepath.Join(root, "sys"),
		ThrottleWindow: time.Second, ProcessMinResident: 64 << 20}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	reg, set := collectorSet(t, env, scrapeCollectors)
	waitOOMWatch(t, set)
	log := startOpenLog(t, allDirs(t, root))
	inScope := func(p string) bool { return strings.HasPrefix(p, root+"/proc/") || strings.HasPrefix(p, root+"/sys/") }
	for _, scrape := range []string{"first scrape", "second scrape"} {
		scrapeOnce(t, env, reg)
		opens := log.take()
		n := checkOnce(t, scrape, opens, inScope)
		if n < counts.jvms*5 {
			t.Errorf("%s: only %d files seen opened: the log misses opens", scrape, n)
		}
		t.Logf("%s: %d files opened", scrape, n)
	}
}

// TestOpensPerScrapeRealJVM: the same on this host with a real JVM (JDK 17) in a real v1
// cgroup with a quota, counting its /proc/<pid> files (task/*/comm included) and its
// cgroup's control files.
func TestOpensPerScrapeRealJVM(t *testing.T) {
	java := testutil.LookPath(t, "java")
	javac := testutil.LookPath(t, "javac")
	testutil.RequireV1Cgroups(t)
	classes := t.TempDir()
	if out, err := exec.Command(javac, "-d", classes, filepath.Join("..", "internal", "jvm", "testdata", "QuotaBusy.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	cg := testutil.NewCgroup(t, fmt.Sprintf("opens%d", os.Getpid()), testutil.CgroupOptions{QuotaUS: 20000, PeriodUS: 100000})
	cmd := cg.Command(java, "-Xmx64m", "-cp", classes, "QuotaBusy")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	// Only the scrapes' own walks: on a shared host other tests' cgroups come and go, and the
	// schedule's walk between scrapes would open these files once more.
	env := runtimeEnv(t, func(c *Config) { c.CgroupCheckEvery = time.Hour })
	reg, set := collectorSet(t, env, scrapeCollectors)
	waitOOMWatch(t, set)
	// Wait for the JVM's perf data, so the scrapes take the same path as in production.
	deadline := time.Now().Add(60 * time.Second)
	for {
		p := env.Processes.JVM
		if info, err := p.Inspect(context.Background(), pid, env.Cgroups.JVMCgroup(cgroupOf(t, env, cg.Path))); err == nil && info.PerfDataAvailable() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("JVM perf data not readable after 60 s")
		}
		time.Sleep(500 * time.Millisecond)
	}
	env.Processes.JVM.Evict(func(int, uint64) bool { return false }) // start cold
	procDir := fmt.Sprintf("/proc/%d", pid)
	dirs := []string{procDir, procDir + "/task"}
	tasks, _ := os.ReadDir(procDir + "/task")
	for _, task := range tasks {
		dirs = append(dirs, procDir+"/task/"+task.Name())
	}
	perf, _ := filepath.Glob(procDir + "/root/tmp/hsperfdata_*")
	dirs = append(dirs, perf...)
	for _, h := range []string{"cpu", "cpuacct", "memory", "cpuset"} {
		if d := filepath.Join("/sys/fs/cgroup", h, cg.Path); dirExists(d) {
			dirs = append(dirs, d)
		}
	}
	log := startOpenLog(t, dirs)
	inScope := func(p string) bool {
		return strings.HasPrefix(p, procDir+"/") || strings.Contains(p, cg.Path+"/") || strings.Contains(p, "/hsperfdata_")
	}
	for _, scrape := range []string{"first scrape", "second scrape"} {
		scrapeOnce(t, env, reg)
		opens := log.take()
		n := checkOnce(t, scrape, opens, inScope)
		if n < 5 {
			t.Errorf("%s: only %d files of the JVM seen opened: the log misses opens (%v)", scrape, n, opens)
		}
		t.Logf("%s: %d files of the JVM and its cgroup opened", scrape, n)
	}
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
