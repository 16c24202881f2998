package hostile

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/test/benchnode"
)

// Node is a Kubernetes-like node laid out on this host's v1 cgroups, as the kubelet's cgroupfs
// driver does: <Parent>/kubepods/burstable/pod<uid>/<64-hex container id>, in the cpu,
// cpuacct and memory hierarchies, with the kubelet's log tree that names them. Tenant
// containers run in roots of their own (chroot: /proc/<pid>/root is the tenant's file system).
// Close removes every cgroup and process it made.
type Node struct {
	Parent  string // e.g. /quota-hostile-1234
	Dir     string // scratch: roots, crafted files, logs
	PodLogs string // the kubelet's /var/log (pods/, containers/)
	logf    func(string, ...any)

	mu    sync.Mutex
	procs []*exec.Cmd
	// owned is every process the node started, by pid, newest last: what a per-process series
	// of a tenant cgroup may name (a reused pid has several owners over time).
	owned map[int][]Owner
	// cleanups run in reverse order by Close (FUSE servers, mounts).
	cleanups []func()
}

// Owner is one process the node started: its cgroup and its start time.
type Owner struct {
	Cgroup string
	Name   string
	Start  float64 // seconds since the epoch, as /proc/<pid>/stat and btime give it
}

// Pod is a pod of one container.
type Pod struct {
	Name, UID string
	Cgroup    string // the pod's cgroup
	Ctr       Container
}

// Container is a pod's container.
type Container struct {
	Name, ID string
	Cgroup   string
	Root     string // its root file system; "" for the host's
}

// parentPrefix names the top cgroup of a run; a dead run's leftovers are removed by the next.
const parentPrefix = "quota-hostile-"

// namespace is the Kubernetes namespace of every pod.
const namespace = "hostile"

// hierarchies are the v1 hierarchies a container lives in.
var hierarchies = []string{"cpu", "cpuacct", "memory"}

// NewNode creates the parent cgroup and the scratch directory.
func NewNode(logf func(string, ...any)) (*Node, error) {
	benchnode.CleanStalePrefix(parentPrefix, logf)
	dir, err := os.MkdirTemp("", "quota-hostile-")
	if err != nil {
		return nil, err
	}
	n := &Node{Parent: fmt.Sprintf("/%s%d", parentPrefix, os.Getpid()), Dir: dir, PodLogs: filepath.Join(dir, "podlogs"),
		logf: logf, owned: map[int][]Owner{}}
	if err := n.Mkdir(n.Parent, hierarchies...); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// Mkdir creates a cgroup in the given hierarchies.
func (n *Node) Mkdir(cg string, hier ...string) error {
	for _, h := range hier {
		if err := os.MkdirAll(benchnode.Dir(h, cg), 0o755); err != nil {
			return fmt.Errorf("create cgroup: %w", err)
		}
	}
	return nil
}

// SetQuota writes a CPU quota (µs per 100 ms period).
func SetQuota(cg string, quotaUS int64) error {
	return write(benchnode.Dir("cpu", cg), "cpu.cfs_quota_us", strconv.FormatInt(quotaUS, 10))
}

// SetMemoryLimit writes a memory limit.
func SetMemoryLimit(cg string, bytes int64) error {
	return write(benchnode.Dir("memory", cg), "memory.limit_in_bytes", strconv.FormatInt(bytes, 10))
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, file), err)
	}
	return nil
}

// podUID is a stable pod UID for a name (as run.sh derives them).
func podUID(name string) string {
	sum := md5.Sum([]byte(name))
	h := hex.EncodeToString(sum[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// containerID is a stable 64-hex container id for a name.
func containerID(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:])
}

// NewPod creates a burstable pod of one container with a CPU quota (µs per 100 ms) and
// memory limit on the pod and its container, the kubelet's log directories that name them,
// and, when root is set, the container's root file system.
func (n *Node) NewPod(name string, quotaUS, memory int64, root bool) (*Pod, error) {
	uid, cid := podUID(name), containerID(name)
	p := &Pod{Name: name + "-" + uid[:5], UID: uid, Cgroup: n.Parent + "/kubepods/burstable/pod" + uid}
	p.Ctr = Container{Name: name, ID: cid, Cgroup: p.Cgroup + "/" + cid}
	if err := n.Mkdir(p.Ctr.Cgroup, hierarchies...); err != nil {
		return nil, err
	}
	for _, cg := range []string{p.Cgroup, p.Ctr.Cgroup} {
		if err := SetQuota(cg, quotaUS); err != nil {
			return nil, err
		}
		if err := SetMemoryLimit(cg, memory); err != nil {
			return nil, err
		}
	}
	logDir := filepath.Join(n.PodLogs, "pods", namespace+"_"+p.Name+"_"+uid, name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(logDir, "0.log"), nil, 0o644); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(n.PodLogs, "containers"), 0o755); err != nil {
		return nil, err
	}
	link := filepath.Join(n.PodLogs, "containers", p.Name+"_"+namespace+"_"+name+"-"+cid+".log")
	if err := os.Symlink(filepath.Join(logDir, "0.log"), link); err != nil {
		return nil, err
	}
	if root {
		p.Ctr.Root = filepath.Join(n.Dir, "roots", name)
		if err := newRoot(p.Ctr.Root); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// newRoot lays out a container's file system: /tmp, /etc/passwd (root), /usr/bin, /opt, and
// the dynamic loader and C library /bin/sleep needs, so copies of it (and of other programs
// linked against glibc only) run inside.
func newRoot(root string) error {
	for _, d := range []string{"tmp", "etc", "usr/bin", "opt"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644); err != nil {
		return err
	}
	libs, err := sharedLibraries("/bin/sleep")
	if err != nil {
		return err
	}
	for _, l := range libs {
		if err := copyFile(l, filepath.Join(root, l), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// sharedLibraries is a dynamically linked program's interpreter and the host paths of its
// DT_NEEDED libraries.
func sharedLibraries(bin string) ([]string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return nil, err
			}
			out = append(out, string(bytes.TrimRight(b, "\x00")))
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, err
	}
	for _, lib := range needed {
		found := ""
		for _, dir := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"} {
			if _, err := os.Stat(filepath.Join(dir, lib)); err == nil {
				found = filepath.Join(dir, lib)
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("%s: %s not found", bin, lib)
		}
		out = append(out, found)
	}
	return out, nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

// Install writes a file into a container's root (or, without root, nowhere: it returns an
// error) and returns its path inside the root.
func (c Container) Install(path string, data []byte, mode os.FileMode) (string, error) {
	if c.Root == "" {
		return "", errors.New("container without a root of its own")
	}
	host := filepath.Join(c.Root, path)
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(host, data, mode)
}

// Start runs argv (a path inside root, or on the host when root is "") as a process of
// cgroup cg: chrooted into root, in its own process group, killed if the test dies. It is
// moved into cg right after it starts (v1 has no clone into a cgroup); until then it is in
// the test's cgroup, which the exporter does not watch.
func (n *Node) Start(cg, root string, argv []string, env ...string) (*exec.Cmd, error) {
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Env: append([]string{}, env...), Dir: "/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", argv[0], cg, err)
	}
	pid := cmd.Process.Pid
	n.mu.Lock()
	n.procs = append(n.procs, cmd)
	n.mu.Unlock()
	go cmd.Wait() //nolint:errcheck // reaped so that no zombie stays in a cgroup
	// ESRCH: a short-lived process ran and exited before it joined.
	if err := n.Join(cg, pid); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return nil, err
	}
	n.Own(cg, pid, filepath.Base(argv[0]))
	return cmd, nil
}

// Join moves pid into cg in every hierarchy.
func (n *Node) Join(cg string, pid int) error {
	for _, h := range hierarchies {
		if err := write(benchnode.Dir(h, cg), "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// Own records pid as a process the node started in cg (with its start time, read now).
func (n *Node) Own(cg string, pid int, name string) {
	start, _ := startTime(pid)
	n.mu.Lock()
	n.owned[pid] = append(n.owned[pid], Owner{Cgroup: cg, Name: name, Start: start})
	n.mu.Unlock()
}

// Owners are the processes the node started under pid, oldest first.
func (n *Node) Owners(pid int) []Owner {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Owner(nil), n.owned[pid]...)
}

// OnClose registers f to run at Close, before the processes are killed.
func (n *Node) OnClose(f func()) {
	n.mu.Lock()
	n.cleanups = append(n.cleanups, f)
	n.mu.Unlock()
}

// Close runs the cleanups (last first), kills every process and removes every cgroup.
func (n *Node) Close() error {
	n.mu.Lock()
	cleanups, procs := n.cleanups, n.procs
	n.cleanups, n.procs = nil, nil
	n.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	for _, c := range procs {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	err := benchnode.RemoveTree(n.Parent)
	if n.Dir != "" {
		if rerr := os.RemoveAll(n.Dir); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// bootTime is btime of /proc/stat (whole seconds).
var bootTime = sync.OnceValue(func() float64 {
	b, _ := os.ReadFile("/proc/stat")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
})

// startTime is a process's start (seconds since the epoch) from /proc/<pid>/stat.
func startTime(pid int) (float64, error) {
	f, err := benchnode.StatFields(pid)
	if err != nil {
		return 0, err
	}
	ticks, err := strconv.ParseFloat(f[19], 64)
	return bootTime() + ticks/100, err
}

// waitGone waits until pid has been reaped (its /proc directory is gone), up to limit.
func waitGone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}
