package collector

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// Real runtimes in real cgroups, scraped through the collectors: the acceptance cases.

func runtimeEnv(t *testing.T, configure ...func(*Config)) *Env {
	t.Helper()
	env := realEnv(t, time.Second, configure...)
	env.Config.ProcessMinResident = 64 << 20
	env.Processes.Filter.MinResident = env.Config.ProcessMinResident
	return env
}

func allRuntimeCollectors(t *testing.T, env *Env) map[string]Collector {
	t.Helper()
	cs := map[string]Collector{}
	for _, n := range []string{"cpu", "memory", "process", "go", "jvm", "malloc"} {
		c, err := registry[n].factory(env)
		if err != nil {
			t.Fatal(err)
		}
		cs[n] = c
	}
	return cs
}

// stdoutLines starts cmd and returns a channel of its output lines.
func stdoutLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	out := testutil.StartPiped(t, cmd)
	lines := make(chan string, 1024)
	go func() {
		s := bufio.NewScanner(out)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	return lines
}

func waitLine(t *testing.T, lines <-chan string, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("program exited before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("no %q line within %v", prefix, timeout)
		}
	}
}

// The LinkedIn case: a JVM told it has 24 CPUs in a 3-core cgroup runs 18 parallel GC threads.
func TestJVMGCThreadsAgainstQuota(t *testing.T) {
	java := testutil.LookPath(t, "java")
	javac := testutil.LookPath(t, "javac")
	cg := testutil.NewCgroup(t, "jvm", testutil.CgroupOptions{QuotaUS: 300000, PeriodUS: 100000})
	classes := t.TempDir()
	if out, err := exec.Command(javac, "-d", classes, filepath.Join("..", "internal", "jvm", "testdata", "QuotaBusy.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	cmd := cg.Command(java, "-XX:ActiveProcessorCount=24", "-XX:+UseParallelGC", "-Xmx256m", "-cp", classes, "QuotaBusy")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	env := runtimeEnv(t)
	cs := allRuntimeCollectors(t, env)
	var mfs = scrapeFamilies(t, env, cs)
	deadline := time.Now().Add(30 * time.Second)
	for value(seriesFor(mfs, "quota_jvm_perfdata_available", cg.Path)) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("JVM perf data never became available")
		}
		time.Sleep(300 * time.Millisecond)
		env.Cgroups.MaxAge, env.Processes.MaxAge = 0, 0
		mfs = scrapeFamilies(t, env, cs)
	}
	checks := map[string]float64{
		"quota_cpu_limit_cores":         3,
		"quota_jvm_cpu_count":           24,
		"quota_jvm_gc_parallel_threads": 18,
		"quota_jvm_perfdata_available":  1,
	}
	for name, want := range checks {
		if got := value(seriesFor(mfs, name, cg.Path)); got != want {
			t.Errorf("%s{cgroup=%q} = %v, want %v", name, cg.Path, got, want)
		}
	}
	info := seriesFor(mfs, "quota_process_info", cg.Path, "runtime", "jvm", "process", "QuotaBusy", "pid", strconv.Itoa(cmd.Process.Pid))
	if info == nil {
		t.Errorf("no quota_process_info for the JVM (pid %d, process QuotaBusy)", cmd.Process.Pid)
	}
	if seriesFor(mfs, "quota_jvm_info", cg.Path, "gc", "parallel", "version", "17.0.15") == nil && seriesFor(mfs, "quota_jvm_info", cg.Path, "gc", "parallel") == nil {
		t.Errorf("quota_jvm_info lacks gc=parallel")
	}
}

// The Go case: GOMAXPROCS=76 under a 0.5-core quota shows 76, what the program itself reports.
func TestGoMaxProcsAgainstQuota(t *testing.T) {
	cg := testutil.NewCgroup(t, "go", testutil.CgroupOptions{QuotaUS: 50000, PeriodUS: 100000})
	prog := buildGoProg(t)
	for _, tc := range []struct {
		env  []string
		want string
	}{{[]string{"GOMAXPROCS=76"}, "76"}, {nil, ""}} {
		cmd := cg.Command(prog)
		cmd.Env = append(os.Environ(), tc.env...)
		lines := stdoutLines(t, cmd)
		printed := strings.Fields(waitLine(t, lines, "settled", 10*time.Second))[1]
		if tc.want != "" && printed != tc.want {
			t.Fatalf("program printed GOMAXPROCS %s, want %s", printed, tc.want)
		}
		env := runtimeEnv(t)
		mfs := scrapeFamilies(t, env, allRuntimeCollectors(t, env))
		got := value(seriesFor(mfs, "quota_go_gomaxprocs", cg.Path, "runtime", "go"))
		t.Logf("%v: program says GOMAXPROCS=%s, exporter %v, limit %v cores", tc.env, printed, got, value(seriesFor(mfs, "quota_cpu_limit_cores", cg.Path)))
		if strconv.FormatFloat(got, 'f', -1, 64) != printed {
			t.Errorf("quota_go_gomaxprocs = %v, the program's runtime.GOMAXPROCS(0) = %s", got, printed)
		}
		if seriesFor(mfs, "quota_go_info", cg.Path, "container_aware", "true", "automaxprocs", "false") == nil {
			t.Errorf("quota_go_info{container_aware=true,automaxprocs=false} missing")
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

var (
	heapNrRE   = regexp.MustCompile(`<heap nr="(\d+)">`)
	subheapsRE = regexp.MustCompile(`<aspace type="subheaps" size="(\d+)"/>`)
)

// A C program's glibc arenas and heaps, as its own malloc_info() reports them.
func TestMallocArenasAgainstMallocInfo(t *testing.T) {
	bin := testutil.BuildC(t, filepath.Join("..", "internal", "malloc", "testdata", "arenas.c"), "-O1", "-pthread")
	testutil.RequireRoot(t)
	cg := testutil.NewCgroup(t, "arenas", testutil.CgroupOptions{})
	for _, env := range [][]string{nil, {"MALLOC_ARENA_MAX=2"}} {
		cmd := cg.Command(bin)
		cmd.Env = append(os.Environ(), env...)
		stdin, _ := cmd.StdinPipe()
		lines := stdoutLines(t, cmd)
		var info strings.Builder
		for l := range lines {
			if l == "READY" {
				break
			}
			info.WriteString(l + "\n")
		}
		arenas, heaps := 0, 0
		for _, m := range heapNrRE.FindAllStringSubmatch(info.String(), -1) {
			if m[1] != "0" {
				arenas++
			}
		}
		for _, m := range subheapsRE.FindAllStringSubmatch(info.String(), -1) {
			n, _ := strconv.Atoi(m[1])
			heaps += n
		}
		e := runtimeEnv(t)
		mfs := scrapeFamilies(t, e, allRuntimeCollectors(t, e))
		gotA := value(seriesFor(mfs, "quota_process_malloc_arenas", cg.Path))
		gotH := value(seriesFor(mfs, "quota_process_malloc_heaps", cg.Path))
		limit := value(seriesFor(mfs, "quota_process_malloc_arena_limit", cg.Path))
		t.Logf("%v: malloc_info arenas=%d heaps=%d; exporter arenas=%v heaps=%v limit=%v", env, arenas, heaps, gotA, gotH, limit)
		if gotA != float64(arenas) || gotH != float64(heaps) {
			t.Errorf("exporter arenas/heaps %v/%v, malloc_info %d/%d", gotA, gotH, arenas, heaps)
		}
		if seriesFor(mfs, "quota_process_allocator_info", cg.Path, "allocator", "glibc") == nil {
			t.Error("allocator_info{allocator=glibc} missing")
		}
		if env != nil && limit != 2 {
			t.Errorf("arena limit %v under MALLOC_ARENA_MAX=2", limit)
		}
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}
