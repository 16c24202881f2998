//go:build linux

package testutil

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Helper is a test's child process that speaks in lines on stdin and stdout (a FUSE server,
// a victim process).
type Helper struct {
	Name  string
	Cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

// StartHelper starts cmd; it is killed if the test binary dies (Pdeathsig).
func StartHelper(t testing.TB, name string, cmd *exec.Cmd) *Helper {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	h := &Helper{Name: name, Cmd: cmd, in: in, lines: make(chan string, 100)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case h.lines <- s.Text():
			default: // nobody waits for these
			}
		}
		close(h.lines)
	}()
	return h
}

// WaitLine waits for a line that starts with prefix.
func (h *Helper) WaitLine(t testing.TB, prefix string, limit time.Duration) string {
	t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case l, ok := <-h.lines:
			if !ok {
				t.Fatalf("%s exited before printing %q", h.Name, prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("%s did not print %q within %v", h.Name, prefix, limit)
		}
	}
}

// Say writes a line to the helper's stdin.
func (h *Helper) Say(line string) { _, _ = io.WriteString(h.in, line+"\n") }

// Stop closes the helper's stdin (its signal to finish) and kills it if it has not exited
// within limit.
func (h *Helper) Stop(limit time.Duration) {
	h.in.Close()
	done := make(chan struct{})
	go func() { _ = h.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		_ = h.Cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(limit):
		}
	}
}

// FUSE is a FUSE file system with one file, Data, whose reads are not answered until
// Answer: a file that blocks inside the kernel, as on a node whose FUSE or NFS server hangs.
// It is served by a separate process (fuseserver/, a module of its own so that go-fuse stays
// out of the exporter's go.mod): a server inside the test process would be blocked by the
// test's own accesses, and the server's death aborts the connection, which releases every
// reader.
type FUSE struct {
	Mnt    string
	Data   string // the file whose reads block
	Server *Helper
	conn   string // /sys/fs/fuse/connections/<N>
}

// RequireFUSE needs root, /dev/fuse and the fuse file system, and mounts fusectl (where a
// stuck connection can be aborted) if it is not mounted yet.
func RequireFUSE(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	_, err := os.Stat("/dev/fuse")
	Require(t, err == nil, "/dev/fuse missing")
	fss, _ := os.ReadFile("/proc/filesystems")
	Require(t, strings.Contains(string(fss), "\tfuse\n"), "kernel without fuse")
	if mounts, _ := os.ReadFile("/proc/self/mounts"); !strings.Contains(string(mounts), " /sys/fs/fuse/connections ") {
		if err := unix.Mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, ""); err != nil {
			t.Logf("fusectl not mounted (%v): the safety net is the server's death", err)
		}
	}
}

// MountStuckFUSE builds and starts the server and mounts its file system in a new
// directory. Cleanup answers, aborts the connection, stops the server and lazily unmounts,
// with short timeouts, so a failing test cannot hang the suite.
func MountStuckFUSE(t testing.TB) *FUSE {
	t.Helper()
	RequireFUSE(t)
	dir, err := os.MkdirTemp("", "quota-exporter-fuse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_, self, _, _ := runtime.Caller(0)
	bin := BuildGo(t, filepath.Join(filepath.Dir(self), "fuseserver"))
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &FUSE{Mnt: mnt, Data: filepath.Join(mnt, "data"), Server: StartHelper(t, "fuseserver", exec.Command(bin, "-mount", mnt))}
	t.Cleanup(func() {
		f.Answer()
		if f.conn != "" {
			_ = os.WriteFile(filepath.Join(f.conn, "abort"), []byte("1"), 0o200)
		}
		f.Server.Stop(2 * time.Second)
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
	})
	f.Server.WaitLine(t, "ready", 20*time.Second)
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil { // the root's attributes are answered
		t.Fatal(err)
	}
	f.conn = fmt.Sprintf("/sys/fs/fuse/connections/%d", unix.Minor(st.Dev))
	return f
}

// Answer makes the server answer every read, held or future.
func (f *FUSE) Answer() { f.Server.Say("answer") }

// WaitRead waits until the kernel has asked the server for data.
func (f *FUSE) WaitRead(t testing.TB, limit time.Duration) { f.Server.WaitLine(t, "read", limit) }
