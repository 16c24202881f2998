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

func (n *Node) start(name, bin string, args ...string) (*proc, error) {
	p, err := runner.Start(name, n.LogPath(name), bin, args...)
	if err != nil {
		return nil, err
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.Pid()))
	if exe == "" {
		exe = bin
	}
	os.WriteFile(filepath.Join(n.Dir, "pids", name+".pid"), []byte(fmt.Sprintf("%d %s\n", p.Pid(), exe)), 0o644)
	n.procs = append(n.procs, p)
	n.logf("%s: pid %d, log %s", name, p.Pid(), n.LogPath(name))
	return p, nil
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
			syscall.Kill(pid, syscall.SIGKILL)
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
				syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

// run runs a short command with a time bound; its output comes back with the error.
func run(ctx context.Context, limit time.Duration, env []string, name string, args ...string) (string, error) {
	return runner.Run(ctx, limit, "", env, append([]string{name}, args...)...)
}
