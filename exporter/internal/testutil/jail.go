package testutil

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sleeperSource is the tenant process of the jail tests: a static program that prints "ready"
// and sleeps until killed. Named java (or anything) it is what the exporter's detectors see.
const sleeperSource = `package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	fmt.Println("ready")
	os.Stdout.Close()
	time.Sleep(time.Hour)
}
`

// Sleeper builds (once per test binary) a static Go program that prints "ready" and sleeps;
// it runs in a chroot without any library.
func Sleeper(t testing.TB) string {
	t.Helper()
	return BuildGoSource(t, "sleeper", sleeperSource)
}

// Jail is a directory used as a process's root (chroot), the way a container's root is one
// for the exporter: everything in it is the tenant's.
type Jail struct {
	Dir string
}

// NewJail makes an empty jail in a test temp directory (root only: chroot needs it).
func NewJail(t testing.TB) *Jail {
	t.Helper()
	RequireRoot(t)
	return &Jail{Dir: t.TempDir()}
}

// Path is the host path of name inside the jail.
func (j *Jail) Path(name string) string { return filepath.Join(j.Dir, name) }

// MkdirAll makes name (a path inside the jail) and its parents.
func (j *Jail) MkdirAll(t testing.TB, name string) {
	t.Helper()
	if err := os.MkdirAll(j.Path(name), 0o755); err != nil {
		t.Fatal(err)
	}
}

// WriteFile writes a file inside the jail, making its parents.
func (j *Jail) WriteFile(t testing.TB, name string, data []byte) {
	t.Helper()
	j.MkdirAll(t, filepath.Dir(name))
	if err := os.WriteFile(j.Path(name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Symlink makes name inside the jail a symlink to target (written as given: an absolute
// target means what it would to the jailed process, and to a careless root reader, the host).
func (j *Jail) Symlink(t testing.TB, target, name string) {
	t.Helper()
	j.MkdirAll(t, filepath.Dir(name))
	_ = os.RemoveAll(j.Path(name))
	if err := os.Symlink(target, j.Path(name)); err != nil {
		t.Fatal(err)
	}
}

// Mkfifo makes name inside the jail a FIFO (an open for reading blocks until a writer comes).
func (j *Jail) Mkfifo(t testing.TB, name string) {
	t.Helper()
	j.MkdirAll(t, filepath.Dir(name))
	_ = os.RemoveAll(j.Path(name))
	if err := syscall.Mkfifo(j.Path(name), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Install copies the host file src to name inside the jail (mode 0755).
func (j *Jail) Install(t testing.TB, src, name string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	j.MkdirAll(t, filepath.Dir(name))
	if err := os.WriteFile(j.Path(name), b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// Start runs exe (a path inside the jail) chrooted into the jail, with extra process
// attributes applied by attr (nil: none), and waits for its "ready" line. The process is
// killed and reaped when the test ends.
func (j *Jail) Start(t testing.TB, exe string, attr func(*syscall.SysProcAttr), args ...string) *exec.Cmd {
	t.Helper()
	cmd := &exec.Cmd{Path: exe, Args: append([]string{exe}, args...), Dir: "/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: j.Dir}
	if attr != nil {
		attr(cmd.SysProcAttr)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s in %s: %v", exe, j.Dir, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- strings.TrimSpace(line) == "ready"
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("%s in %s did not say ready", exe, j.Dir)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s in %s not ready in 10 s", exe, j.Dir)
	}
	return cmd
}
