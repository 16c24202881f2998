package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a long-running component the node started. Its pid file (pids/<name>.pid, holding
// "<pid> <executable>") lets a later run stop it after a crash of this one; the executable
// guards against a reused pid: a process whose /proc/<pid>/exe differs is left alone.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

func (n *Node) start(name, bin string, args ...string) (*proc, error) {
	f, err := os.Create(n.LogPath(name))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group; killed with the test process if it dies (containerd's shims are not:
	// they re-parent to init by design, and Stop or the next run's cleanup removes them).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: f}
	go func() { cmd.Wait(); close(p.done) }()
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
	if exe == "" {
		exe = bin
	}
	os.WriteFile(filepath.Join(n.Dir, "pids", name+".pid"), []byte(fmt.Sprintf("%d %s\n", cmd.Process.Pid, exe)), 0o644)
	n.procs = append(n.procs, p)
	n.logf("%s: pid %d, log %s", name, cmd.Process.Pid, n.LogPath(name))
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the group, SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	pgid := -p.cmd.Process.Pid
	syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		syscall.Kill(pgid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
	p.log.Close()
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
	return runIn(ctx, limit, "", env, append([]string{name}, args...)...)
}

func runIn(ctx context.Context, limit time.Duration, dir string, env []string, argv ...string) (string, error) {
	name, args := argv[0], argv[1:]
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, tail(out.String(), 3000))
	}
	return out.String(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
