package hostile

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// Harness is one hostile-node run: the node, the programs the tenants run, the exporters.
type Harness struct {
	t         testing.TB
	Node      *Node
	Checker   *Checker
	Exporters []*Exporter
	logf      func(string, ...any)

	builds   sync.Map // name -> path of a program built for the run
	pidReuse *pidReuse
	reuseMu  sync.Mutex
	fuse     []*fuseServer
}

// build builds a program once per run into the node's directory.
func (h *Harness) build(name string, do func(out string)) string {
	if p, ok := h.builds.Load(name); ok {
		return p.(string)
	}
	out := filepath.Join(h.Node.Dir, "bin", name)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		h.t.Fatal(err)
	}
	do(out)
	h.builds.Store(name, out)
	return out
}

// Idle is the Go tenant program (test/hostile/cmd/idle), stripped (-s: no .symtab) or not.
func (h *Harness) Idle(strip bool) string {
	name, flags := "idle", []string{}
	if strip {
		name, flags = "idle-stripped", []string{"-ldflags=-s"}
	}
	return h.build(name, func(out string) {
		testenv.BuildGo(h.t, filepath.Join(testenv.RepoRoot(), "test"), "./hostile/cmd/idle", out, flags...)
	})
}

// Hog is a C program that keeps its argument's MiB resident (linked against glibc only).
func (h *Harness) Hog() string {
	return h.build("hog", func(out string) {
		src := out + ".c"
		if err := os.WriteFile(src, []byte(hogSource), 0o644); err != nil {
			h.t.Fatal(err)
		}
		testenv.BuildC(h.t, src, out, "-O2")
	})
}

// fuseServer is one FUSE mount served by the exporter's test FUSE server.
type fuseServer struct {
	mnt   string
	cmd   *exec.Cmd
	in    *os.File
	conn  string // /sys/fs/fuse/connections/<minor>
	once  sync.Once
	lines chan string
}

// MountFUSE mounts the exporter's test FUSE server (exporter/internal/testutil/fuseserver)
// at mnt, serving a copy of file as name, holding every read at or past holdFrom until the
// run ends. Closing the node answers them, aborts the connection and unmounts.
func (h *Harness) MountFUSE(mnt, file, name string, holdFrom int) error {
	_, err := os.Stat("/dev/fuse")
	testenv.Require(h.t, err == nil, "/dev/fuse missing (the stuck class needs FUSE)")
	if mounts, _ := os.ReadFile("/proc/self/mounts"); !strings.Contains(string(mounts), " /sys/fs/fuse/connections ") {
		if err := syscall.Mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, ""); err != nil {
			h.logf("fusectl not mounted (%v): the server's death is the safety net", err)
		}
	}
	bin := h.build("fuseserver", func(out string) {
		testenv.BuildGo(h.t, filepath.Join(testenv.RepoRoot(), "exporter/internal/testutil/fuseserver"), ".", out)
	})
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "-mount", mnt, "-file", file, "-name", name, "-hold-from", fmt.Sprint(holdFrom))
	cmd.Stdin = r
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	r.Close()
	f := &fuseServer{mnt: mnt, cmd: cmd, in: w, lines: make(chan string, 16)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case f.lines <- s.Text():
			default:
			}
		}
		close(f.lines)
	}()
	h.fuse = append(h.fuse, f)
	h.Node.OnClose(f.close)
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-f.lines:
			if !ok {
				return fmt.Errorf("fuseserver exited before it mounted %s", mnt)
			}
			if strings.HasPrefix(l, "ready") {
				var st syscall.Stat_t
				if err := syscall.Stat(mnt, &st); err != nil {
					return err
				}
				f.conn = fmt.Sprintf("/sys/fs/fuse/connections/%d", st.Dev&0xff|(st.Dev>>12)&0xfff00) // minor(dev)
				return nil
			}
		case <-deadline:
			return fmt.Errorf("fuseserver did not mount %s within 20 s", mnt)
		}
	}
}

// Answer makes every FUSE server answer its held reads (the stuck reads return).
func (h *Harness) Answer() {
	for _, f := range h.fuse {
		_, _ = f.in.WriteString("answer\n")
	}
}

// close answers, aborts the connection, stops the server and unmounts lazily, each bounded.
func (f *fuseServer) close() {
	f.once.Do(func() {
		_, _ = f.in.WriteString("answer\n")
		if f.conn != "" {
			_ = os.WriteFile(filepath.Join(f.conn, "abort"), []byte("1"), 0o200)
		}
		f.in.Close()
		done := make(chan struct{})
		go func() { _ = f.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			_ = f.cmd.Process.Kill()
			<-done
		}
		_ = syscall.Unmount(f.mnt, syscall.MNT_DETACH)
	})
}
