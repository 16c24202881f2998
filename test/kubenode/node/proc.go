package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/test/internal/runner"
)

// proc is a long-running component the node started. Its pid file (pids/<name>.pid, holding
// "<pid> <executable>") lets a later run stop it after a crash of this one; the executable
// guards against a reused pid: a process whose /proc/<pid>/exe differs is left alone.
// Containerd's shims are not in its process group: they re-parent to init by design, and Stop
// or the next run's cleanup removes them.
type proc = runner.Proc

// procSet is the long-running processes of one run: their logs in dir/logs, their pid files
// in dir/pids.
type procSet struct {
	dir   string
	procs []*proc
	logf  func(format string, args ...any)
}

// LogPath is the log of a component (etcd, kube-apiserver, containerd, kubelet, qemu, ...).
func (ps *procSet) LogPath(name string) string { return filepath.Join(ps.dir, "logs", name+".log") }

func (ps *procSet) start(name, bin string, args ...string) (*proc, error) {
	if err := os.MkdirAll(filepath.Join(ps.dir, "pids"), 0o755); err != nil {
		return nil, err
	}
	p, err := runner.Start(name, ps.LogPath(name), bin, args...)
	if err != nil {
		return nil, err
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Pid()))
	if exe == "" {
		exe = bin
	}
	_ = os.WriteFile(filepath.Join(ps.dir, "pids", name+".pid"), []byte(fmt.Sprintf("%d %s\n", p.Pid(), exe)), 0o644)
	ps.procs = append(ps.procs, p)
	if ps.logf != nil {
		ps.logf("%s: pid %d, log %s", name, p.Pid(), ps.LogPath(name))
	}
	return p, nil
}

// exited is an error naming the first component that has exited, with its log's tail.
func (ps *procSet) exited() error {
	for _, p := range ps.procs {
		if p.Exited() {
			return fmt.Errorf("%s exited: %s", p.Name, ps.logTail(p.Name))
		}
	}
	return nil
}

func (ps *procSet) logTail(name string) string {
	b, _ := os.ReadFile(ps.LogPath(name))
	return runner.Tail(string(b), 3000)
}

// stop stops the processes in the reverse order of their start; before each, hook may act
// on it while it still runs (containerd: remove its containers).
func (ps *procSet) stop(hook func(*proc)) {
	for i := len(ps.procs) - 1; i >= 0; i-- {
		if hook != nil && !ps.procs[i].Exited() {
			hook(ps.procs[i])
		}
		ps.procs[i].Stop(15 * time.Second)
	}
	ps.procs = nil
}

// killRecorded kills the processes a dead run's pid files record, when they still run the
// recorded executable.
func killRecorded(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "pids", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(b))
		if len(fields) != 2 {
			continue
		}
		pid, err := strconv.Atoi(fields[0])
		if err != nil || pid <= 1 {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == fields[1] {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// killByArg kills processes whose command line contains arg (the node's unique containerd
// socket path: containerd's shims carry it as -address).
func killByArg(arg string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(b, []byte{0}) {
			if string(a) == arg {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

// run runs a short command with a time bound; its output comes back with the error.
func run(ctx context.Context, limit time.Duration, env []string, name string, args ...string) (string, error) {
	return runner.Run(ctx, limit, "", env, append([]string{name}, args...)...)
}
