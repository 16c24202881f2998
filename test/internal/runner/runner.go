// Package runner starts and stops the local components an end-to-end test drives (etcd, the
// kubelet, Prometheus, the exporter): each in its own process group with its output in a log
// file, killed with the test process if it dies; and runs short commands with a time bound.
package runner

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Proc is a long-running component.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Start starts bin with args, its output in a new file at logPath.
func Start(name, logPath, bin string, args ...string) (*Proc, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group (Stop signals the group); killed with the test process if it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, done: make(chan struct{}), log: f}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the process's pid, which is also its process group's id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the group, SIGKILL after grace, and closes the log.
func (p *Proc) Stop(grace time.Duration) {
	pgid := -p.Pid()
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
	p.log.Close()
}

// Run runs a short command (argv) in dir with env added and a time bound, killed with the
// test process. Its output comes back, and on failure also in the error (the last 3000 bytes).
func Run(ctx context.Context, limit time.Duration, dir string, env []string, argv ...string) (string, error) {
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
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, Tail(out.String(), 3000))
	}
	return out.String(), nil
}

// Tail is the last n bytes of s, marked as cut.
func Tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// FreePort is a loopback TCP port free at the time of the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
