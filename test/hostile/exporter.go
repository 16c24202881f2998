package hostile

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/test/benchnode"
	"github.com/quota-exporter/quota_exporter/test/internal/runner"
)

// The DaemonSet's resources (examples/kubernetes/daemonset.yaml and the chart's values.yaml):
// the exporter runs in a memory cgroup of this limit, with this CPU limit.
const (
	MemoryLimit = 256 << 20
	CPUQuotaUS  = 50000 // 500m
)

// Exporter runs the real exporter binary as the kubelet runs the DaemonSet's container: in a
// cgroup of its own with the DaemonSet's memory and CPU limits, restarted after it exits with
// the kubelet's back-off (10 s, doubling, at most 5 min). Every exit is recorded, and whether
// the kernel's OOM killer caused it (the memory cgroup's oom_kill count).
type Exporter struct {
	Name   string
	Bin    string
	Args   []string
	Cgroup string
	Addr   string
	Log    string
	node   *Node
	begin  time.Time

	mu      sync.Mutex
	cmd     *exec.Cmd
	alive   bool
	exits   []Exit
	starts  int
	peakHWM float64 // MiB: the largest VmHWM seen at a scrape
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

// Exit is one end of the exporter's process.
type Exit struct {
	At     time.Duration // since the run began
	OOM    bool          // the memory cgroup's oom_kill count rose
	Status string
}

// MemStats are the memory cgroup's counters: peak usage (memory.max_usage_in_bytes, the
// exporter's RSS and the page cache charged to it), how often the limit was hit, and OOM kills.
type MemStats struct {
	PeakBytes, FailCnt, OOMKills int64
}

// NewExporter creates its cgroup (memory limit, CPU quota) below the node's parent.
func NewExporter(n *Node, name, bin string, args ...string) (*Exporter, error) {
	port, err := runner.FreePort()
	if err != nil {
		return nil, err
	}
	e := &Exporter{Name: name, Bin: bin, Cgroup: n.Parent + "/exporter-" + name, Addr: fmt.Sprintf("127.0.0.1:%d", port),
		Log: filepath.Join(n.Dir, "exporter-"+name+".log"), node: n}
	e.Args = append([]string{"--web.listen-address=" + e.Addr}, args...)
	if err := n.Mkdir(e.Cgroup, hierarchies...); err != nil {
		return nil, err
	}
	if err := SetMemoryLimit(e.Cgroup, MemoryLimit); err != nil {
		return nil, err
	}
	if err := SetQuota(e.Cgroup, CPUQuotaUS); err != nil {
		return nil, err
	}
	return e, nil
}

// Start starts the process and its supervisor; Stop ends both.
func (e *Exporter) Start(begin time.Time) error {
	e.begin = begin
	e.stop, e.done = make(chan struct{}), make(chan struct{})
	exited, err := e.startProcess()
	if err != nil {
		return err
	}
	go e.supervise(exited)
	return nil
}

// startProcess runs the binary through a shell that joins the cgroup and execs it, so
// every byte the exporter ever allocates is charged to its memory cgroup.
func (e *Exporter) startProcess() (<-chan error, error) {
	var dirs []string
	for _, h := range hierarchies {
		dirs = append(dirs, "'"+benchnode.Dir(h, e.Cgroup)+"'")
	}
	script := `for d in ` + strings.Join(dirs, " ") + `; do echo $$ > "$d/cgroup.procs" || exit 111; done; exec "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh", e.Bin}, e.Args...)...)
	log, err := os.OpenFile(e.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "=== start %d at %s\n", e.starts+1, time.Since(e.begin).Round(time.Millisecond))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", e.Bin, err)
	}
	e.node.Own(e.Cgroup, cmd.Process.Pid, "quota_exporter")
	e.mu.Lock()
	e.cmd, e.alive = cmd, true
	e.starts++
	e.mu.Unlock()
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		log.Close()
		e.mu.Lock()
		e.alive = false
		e.mu.Unlock()
		exited <- err
	}()
	return exited, nil
}

func (e *Exporter) supervise(exited <-chan error) {
	defer close(e.done)
	backoff := 10 * time.Second
	for {
		before := e.MemStats().OOMKills
		select {
		case <-e.stop:
			e.terminate(exited)
			return
		case err := <-exited:
			oom := e.MemStats().OOMKills > before
			e.mu.Lock()
			e.exits = append(e.exits, Exit{At: time.Since(e.begin), OOM: oom, Status: fmt.Sprint(err)})
			e.mu.Unlock()
		}
		select {
		case <-e.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Minute)
		var err error
		if exited, err = e.startProcess(); err != nil {
			e.mu.Lock()
			e.exits = append(e.exits, Exit{At: time.Since(e.begin), Status: "restart failed: " + err.Error()})
			e.mu.Unlock()
			return
		}
	}
}

// terminate sends SIGTERM, then SIGKILL to the group after 10 s.
func (e *Exporter) terminate(exited <-chan error) {
	e.mu.Lock()
	pid := e.cmd.Process.Pid
	e.mu.Unlock()
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-exited: //nolint:errcheck // the exit status of a process this stops
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited //nolint:errcheck // likewise
	}
}

// Stop ends the exporter and its supervisor.
func (e *Exporter) Stop() {
	if e.stop == nil {
		return
	}
	e.stopped.Do(func() { close(e.stop) })
	<-e.done
}

// Running tells whether the current process is alive, and its pid.
func (e *Exporter) Running() (int, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.alive {
		return 0, false
	}
	return e.cmd.Process.Pid, true
}

// Exits are the process's ends so far, and how often it was started.
func (e *Exporter) Exits() ([]Exit, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Exit(nil), e.exits...), e.starts
}

// NoteHWM records the current process's VmHWM (peak RSS), and returns the largest seen.
func (e *Exporter) NoteHWM() float64 {
	if pid, ok := e.Running(); ok {
		if hwm := vmHWM(pid); hwm > 0 {
			e.mu.Lock()
			e.peakHWM = max(e.peakHWM, hwm)
			e.mu.Unlock()
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.peakHWM
}

// WaitReady waits until /-/ready answers 200 (the collectors are built).
func (e *Exporter) WaitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.Addr+"/-/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v (log %s)", e.Name, limit, e.Log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// MemStats reads the memory cgroup's counters.
func (e *Exporter) MemStats() MemStats {
	dir := benchnode.Dir("memory", e.Cgroup)
	read := func(f string) int64 {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v
	}
	s := MemStats{PeakBytes: read("memory.max_usage_in_bytes"), FailCnt: read("memory.failcnt")}
	b, _ := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			s.OOMKills, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return s
}

// vmHWM is a process's peak RSS in MiB (0 when unreadable).
func vmHWM(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// LogTail is the last n bytes of the exporter's log.
func (e *Exporter) LogTail(n int) string {
	b, _ := os.ReadFile(e.Log)
	return runner.Tail(string(b), n)
}
