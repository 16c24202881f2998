// Package benchnode measures an exporter binary on this node: it creates N real quota
// cgroups (v1, or v2 where /sys/fs/cgroup is a cgroup2 mount with cpu and memory, as in the
// v2 test VM) with real processes in them (a few throttled by duty-cycled burners, a few JVMs and
// Go programs, the rest sleeping), runs the exporter with its defaults and reports its idle
// CPU, scrape cost, memory, series and response size next to the floor of reading the same
// kernel files. `make bench-node` runs it; docs/performance.md has the method and figures.
package benchnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Root is where the host mounts its v1 hierarchies, or its cgroup2 hierarchy.
const Root = "/sys/fs/cgroup"

// Unified reports whether Root is a cgroup v2 mount with the cpu and memory controllers
// (checked once: the mount does not change during a run).
var Unified = sync.OnceValue(func() bool {
	b, err := os.ReadFile(filepath.Join(Root, "cgroup.controllers"))
	f := strings.Fields(string(b))
	return err == nil && slices.Contains(f, "cpu") && slices.Contains(f, "memory")
})

// parentPrefix names the top cgroup of one run: quota_benchnode-<pid>.slice, so a crashed
// run's leftovers can be told from a live one's. A systemd-style slice, so that each container
// below it is a tenant of its own for the exporter's budgets, as on a node of N pods.
const (
	parentPrefix = "quota_benchnode-"
	parentSuffix = ".slice"
)

// hierarchies are the v1 hierarchies the containers live in (cpu and cpuacct may be one
// mount; creating a directory twice is harmless), or the one v2 hierarchy.
func hierarchies() []string {
	if Unified() {
		return []string{"unified"}
	}
	return []string{"cpu", "cpuacct", "memory"}
}

// WorkloadOptions shape the node: N container cgroups, each with a 0.5-core quota and a
// 256 MiB memory limit, like the reference measurement in shared/reference/real-node-cost.md.
type WorkloadOptions struct {
	N             int
	SleepFraction float64 // share of cgroups holding a sleeping process (0.2: 200 per 1 000)
	Burners       int     // duty-cycled burners that really get throttled
	JVMs          int
	GoPrograms    int
	QuotaUS       int64
	MemoryLimit   int64
	// Self is the executable that runs the burner and Go children (this program or the test
	// binary; see ChildMain).
	Self string
	// Logf reports progress (nil: silent).
	Logf func(format string, args ...any)
}

func (o *WorkloadOptions) defaults() {
	if o.QuotaUS == 0 {
		o.QuotaUS = 50000
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = 256 << 20
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Workload is a created node: its cgroups and the processes started in them.
type Workload struct {
	Parent     string // cgroup path of the parent, e.g. /quota_benchnode-123.slice
	Containers []string
	Processes  int
	procs      []*exec.Cmd
	tmp        string
	logf       func(string, ...any)
}

// Dir is a cgroup's directory in one hierarchy (on v2 the controller is ignored).
func Dir(controller, cgroup string) string {
	if Unified() {
		return filepath.Join(Root, cgroup)
	}
	return filepath.Join(Root, controller, cgroup)
}

// CheckHost reports why this host cannot run the benchmark ("" when it can).
func CheckHost() string {
	if os.Geteuid() != 0 {
		return "needs root (creates cgroups)"
	}
	if Unified() {
		return ""
	}
	for _, c := range hierarchies() {
		if _, err := os.Stat(Dir(c, "cgroup.procs")); err != nil {
			return "v1 " + c + " hierarchy not mounted at " + Dir(c, "")
		}
	}
	return ""
}

// NewWorkload creates the cgroups and starts the processes. On error everything created so
// far is removed again. The caller must call Close.
func NewWorkload(ctx context.Context, o WorkloadOptions) (_ *Workload, err error) {
	o.defaults()
	CleanStale(o.Logf)
	w := &Workload{Parent: fmt.Sprintf("/%s%d%s", parentPrefix, os.Getpid(), parentSuffix), logf: o.Logf}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	if w.tmp, err = os.MkdirTemp("", "benchnode-"); err != nil {
		return nil, err
	}
	begin := time.Now()
	if Unified() {
		// v2: the controllers must be enabled in the parent before its children get limits.
		if err := os.Mkdir(Dir("", w.Parent), 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
		for _, d := range []string{Root, Dir("", w.Parent)} {
			if err := write(d, "cgroup.subtree_control", "+cpu +memory"); err != nil {
				return nil, err
			}
		}
	}
	for i := range o.N {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		cg := fmt.Sprintf("%s/c%05d", w.Parent, i)
		for _, c := range hierarchies() {
			if err := os.MkdirAll(Dir(c, cg), 0o755); err != nil {
				return nil, fmt.Errorf("create cgroup: %w", err)
			}
		}
		w.Containers = append(w.Containers, cg)
		if err := setLimits(cg, o.QuotaUS, o.MemoryLimit); err != nil {
			return nil, err
		}
	}
	o.Logf("created %d cgroups under %s in %.1fs", o.N, w.Parent, time.Since(begin).Seconds())

	// The special processes take the first cgroups, the sleepers the following ones.
	next := 0
	take := func() (string, bool) {
		if next >= len(w.Containers) {
			return "", false
		}
		next++
		return w.Containers[next-1], true
	}
	for range o.Burners {
		if cg, ok := take(); ok {
			if err := w.startIn(cg, o.Self, nil, "BENCHNODE_CHILD=burn"); err != nil {
				return nil, err
			}
		}
	}
	for range o.GoPrograms {
		if cg, ok := take(); ok {
			if err := w.startIn(cg, o.Self, nil, "BENCHNODE_CHILD=idle"); err != nil {
				return nil, err
			}
		}
	}
	if o.JVMs > 0 {
		classDir, err := compileJava(ctx, w.tmp)
		if err != nil {
			o.Logf("no JVMs: %v", err)
		} else {
			for range o.JVMs {
				if cg, ok := take(); ok {
					args := []string{"-Xms16m", "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classDir, "BenchIdle"}
					if err := w.startIn(cg, "java", args); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	sleepers := int(float64(o.N)*o.SleepFraction) - next
	for range max(sleepers, 0) {
		cg, ok := take()
		if !ok {
			break
		}
		if err := w.startSleeper(cg); err != nil {
			return nil, err
		}
	}
	o.Logf("started %d processes in %.1fs", w.Processes, time.Since(begin).Seconds())
	return w, nil
}

// setLimits writes the CPU quota (100 ms period) and the memory limit.
func setLimits(cg string, quotaUS, memory int64) error {
	cpuFile, cpu, memFile := "cpu.cfs_quota_us", strconv.FormatInt(quotaUS, 10), "memory.limit_in_bytes"
	if Unified() {
		cpuFile, cpu, memFile = "cpu.max", cpu+" 100000", "memory.max"
	}
	if err := write(Dir("cpu", cg), cpuFile, cpu); err != nil {
		return err
	}
	return write(Dir("memory", cg), memFile, strconv.FormatInt(memory, 10))
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, file), err)
	}
	return nil
}

// startIn runs a program that joins the cgroup (every hierarchy) before it execs, so a JVM
// or Go runtime sees its quota from the first instruction.
func (w *Workload) startIn(cg, name string, args []string, env ...string) error {
	var dirs []string
	for _, c := range hierarchies() {
		dirs = append(dirs, "'"+Dir(c, cg)+"'")
	}
	script := `for d in ` + strings.Join(dirs, " ") + `; do echo $$ > "$d/cgroup.procs" || exit 111; done; exec "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh", name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return w.start(cmd)
}

// startSleeper starts `sleep` and moves it into the cgroup: it does nothing before the move,
// and a shell per sleeper would cost 600 forks at N = 3 000.
func (w *Workload) startSleeper(cg string) error {
	cmd := exec.Command("sleep", "infinity")
	if err := w.start(cmd); err != nil {
		return err
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	for _, c := range hierarchies() {
		if err := write(Dir(c, cg), "cgroup.procs", pid); err != nil {
			return err
		}
	}
	return nil
}

func (w *Workload) start(cmd *exec.Cmd) error {
	// Own process group (killed as one), and killed by the kernel if this program dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	w.procs = append(w.procs, cmd)
	w.Processes++
	go cmd.Wait() //nolint:errcheck // reaped so that no zombie stays in a cgroup
	return nil
}

// PIDs lists the workload's own processes (the sh wrappers exec, so their pid is the program's).
func (w *Workload) PIDs() []int {
	var pids []int
	for _, c := range w.procs {
		pids = append(pids, c.Process.Pid)
	}
	return pids
}

// Close kills every process and removes every cgroup of the workload, and its temp dir.
func (w *Workload) Close() error {
	for _, c := range w.procs {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	err := RemoveTree(w.Parent)
	if w.tmp != "" {
		os.RemoveAll(w.tmp)
	}
	w.logf("removed %s", w.Parent)
	return err
}

// RemoveTree kills what is left in a cgroup tree and removes it, leaves first, in every
// hierarchy. Bounded: about 5 s per directory that will not go.
func RemoveTree(cgroup string) error {
	var errs []error
	for _, c := range hierarchies() {
		top := Dir(c, cgroup)
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			d := dirs[i]
			for try := 0; ; try++ {
				err := syscall.Rmdir(d)
				if err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				if try == 50 {
					errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
					break
				}
				b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists this run's cgroup directories that still exist (the smoke test's check).
func Leftovers(cgroup string) []string {
	var out []string
	for _, c := range hierarchies() {
		if _, err := os.Stat(Dir(c, cgroup)); err == nil {
			out = append(out, Dir(c, cgroup))
		}
	}
	return out
}

// CleanStale removes the trees of earlier runs whose process is gone (killed before its
// cleanup could run).
func CleanStale(logf func(string, ...any)) { CleanStalePrefix(parentPrefix, logf) }

// CleanStalePrefix is CleanStale for top cgroups named <prefix><pid> by another test.
func CleanStalePrefix(prefix string, logf func(string, ...any)) {
	ents, _ := os.ReadDir(Dir("cpu", ""))
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		rest = strings.TrimSuffix(rest, parentSuffix)
		pid, err := strconv.Atoi(rest)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		if logf != nil {
			logf("removing leftover %s of a dead run", e.Name())
		}
		_ = RemoveTree("/" + e.Name())
	}
}

const javaIdle = `public class BenchIdle {
    public static void main(String[] a) throws Exception {
        java.util.List<byte[]> keep = new java.util.ArrayList<>();
        for (long i = 0; ; i++) {
            keep.add(new byte[64 << 10]);
            if (keep.size() > 64) keep.clear();
            Thread.sleep(200);
        }
    }
}
`

// compileJava writes and compiles the JVM workload (a sleeper that allocates a little, so
// its perf data counters move).
func compileJava(ctx context.Context, tmp string) (string, error) {
	if _, err := exec.LookPath("javac"); err != nil {
		return "", errors.New("javac not on PATH")
	}
	src := filepath.Join(tmp, "BenchIdle.java")
	if err := os.WriteFile(src, []byte(javaIdle), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(tmp, "classes")
	if b, err := exec.CommandContext(ctx, "javac", "-d", out, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("javac: %v: %s", err, b)
	}
	return out, nil
}

// ChildMain runs a workload child when this process was started as one (BENCHNODE_CHILD set)
// and does not return then. Call it first in main and TestMain.
func ChildMain() {
	switch os.Getenv("BENCHNODE_CHILD") {
	case "burn":
		burn()
	case "idle":
		idle()
	default:
		return
	}
	os.Exit(0)
}

// burn spins two threads for 60 ms every 2 s: 120 ms of demand against a 50 ms quota per
// 100 ms period, so the cgroup is throttled in every burst while costing only ~3% of a core.
func burn() {
	for {
		done := make(chan struct{})
		for range 2 {
			go func() {
				end := time.Now().Add(60 * time.Millisecond)
				for time.Now().Before(end) {
				}
				done <- struct{}{}
			}()
		}
		<-done
		<-done
		time.Sleep(2 * time.Second)
	}
}

// idle is a Go program that mostly sleeps, allocating a little.
func idle() {
	var keep [][]byte
	for {
		keep = append(keep, make([]byte, 4096))
		if len(keep) > 256 {
			keep = nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}
