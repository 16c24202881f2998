package hostile

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quota-exporter/quota_exporter/test/hostile/crafted"
)

// Class is one kind of hostile tenant of issue 29: what it plants before the exporter starts,
// and what it keeps doing while the exporter runs.
type Class struct {
	Name string
	Doc  string
	// Plant creates the class's pods, files and processes.
	Plant func(h *Harness) error
	// Run, when set, runs in the background for the whole run (until ctx ends).
	Run func(ctx context.Context, h *Harness)
}

// Classes are every class, in the order they are planted. HOSTILE_CLASSES selects some.
var Classes = []Class{
	{"dynsym", "crafted executables whose .dynsym/.dynstr claim 43 690 symbols naming one 1 MiB string (and smaller variants), named java and run as a large node process", plantDynsym, nil},
	{"symtab", "Go executables whose .symtab claims 43 690 symbols naming one 1 MiB string (gopause reads it)", plantSymtab, nil},
	{"pclntab", "Go executables whose .gopclntab claims 1 and 4 million functions (gopause reads it)", plantPclntab, nil},
	{"perfdata", "80 processes named java, each with a perf data file of ~42 000 tiny entries and no VM start time (70 of 1 MiB, 10 of 512 KiB)", plantPerfdata, nil},
	{"buildinfo", "280 processes of two crafted Go executables whose main module path is ~1 MiB (250) and 256 KiB (30)", plantBuildinfo, nil},
	{"stuck", "72 processes whose executable is on the tenant's FUSE mount, which never answers a read of the section headers", plantStuck, nil},
	{"delegated", "2 230 empty delegated cgroups carrying only a quota: 2 000 below the container, 200 below the pod, a chain 30 deep", plantDelegated, nil},
	{"identity", "cgroups below container A named as pod B's (systemd and cgroupfs style), with A's processes in them", plantIdentity, nil},
	{"ctlchar", "six cgroups of a service off Kubernetes whose names differ only in a control character or invalid UTF-8, two with a process", plantCtlchar, nil},
	{"pidreuse", "20 at a time, processes named java that exit after 0.05-0.4 s, their pids taken at once (ns_last_pid) by another pod's java processes whose perf data names them Reused", plantPidreuse, runPidreuse},
	{"slowclients", "on a node of 300 ordinary pods, 200 HTTP clients per exporter that request /metrics and never read (plain and gzip, 4 KiB receive buffers), 20 that send their request a byte every 5 s", plantSlowClients, runSlowClients},
}

// tenant creates a hostile pod with a root file system: 2 cores, 1 GiB.
func (h *Harness) tenant(name string) (*Pod, error) {
	p, err := h.Node.NewPod(name, 200000, 1<<30, true)
	if err != nil {
		return nil, err
	}
	h.Checker.AddPod(p)
	return p, nil
}

// startN starts n processes of argv in the pod's container.
func (h *Harness) startN(p *Pod, n int, argv []string, env ...string) error {
	for range n {
		if _, err := h.Node.Start(p.Ctr.Cgroup, p.Ctr.Root, argv, env...); err != nil {
			return err
		}
	}
	return nil
}

// deploy installs an executable at path in the pod's root and starts procs processes of it.
func (h *Harness) deploy(p *Pod, path string, exe []byte, procs int, args []string, env ...string) error {
	if _, err := p.Ctr.Install(path, exe, 0o755); err != nil {
		return err
	}
	return h.startN(p, procs, append([]string{path}, args...), env...)
}

// craft is a copy of the executable src rewritten by change.
func craft(src string, change func(e *crafted.ELF) error) ([]byte, error) {
	e, err := crafted.Load(src)
	if err != nil {
		return nil, err
	}
	if err := change(e); err != nil {
		return nil, err
	}
	return e.Bytes(), nil
}

// sleepArgs: the tenants' copies of /bin/sleep sleep for the run.
var sleepArgs = []string{"100000"}

// goEnv keeps the Go tenant programs small: one P, so a few threads each.
var goEnv = []string{"GOMAXPROCS=1"}

func plantDynsym(h *Harness) error {
	p, err := h.tenant("elf")
	if err != nil {
		return err
	}
	// The executable: every symbol names one 1 MiB string (43 GiB as debug/elf
	// copies), named java; two smaller expansions of the same trick beside it, the last a C
	// program above --process.min-resident (64 MiB), watched though not a JVM.
	for _, v := range []struct {
		src, path   string
		count, name int
		procs       int
		args        []string
	}{
		{"/bin/sleep", "/usr/bin/java", 43690, 1<<20 - 2, 3, sleepArgs},
		{"/bin/sleep", "/opt/jdk/bin/java", 8192, 128 << 10, 2, sleepArgs},
		{h.Hog(), "/usr/bin/node", 20000, 512 << 10, 2, []string{"80"}},
	} {
		exe, err := craft(v.src, func(e *crafted.ELF) error { return e.BloatSymbols(".dynsym", v.count, v.name) })
		if err != nil {
			return err
		}
		if err := h.deploy(p, v.path, exe, v.procs, v.args); err != nil {
			return err
		}
	}
	return nil
}

func plantSymtab(h *Harness) error {
	p, err := h.tenant("gosym")
	if err != nil {
		return err
	}
	exe, err := craft(h.Idle(false), func(e *crafted.ELF) error { return e.BloatSymbols(".symtab", 43690, 1<<20-2) })
	if err != nil {
		return err
	}
	return h.deploy(p, "/usr/bin/svc", exe, 2, nil, goEnv...)
}

func plantPclntab(h *Harness) error {
	p, err := h.tenant("gopcln")
	if err != nil {
		return err
	}
	for _, v := range []struct {
		path         string
		funcs, procs int
	}{{"/usr/bin/svc", 1 << 20, 2}, {"/usr/local/bin/worker", 4 << 20, 1}} {
		exe, err := craft(h.Idle(true), func(e *crafted.ELF) error { return e.BloatPclntab(v.funcs) })
		if err != nil {
			return err
		}
		if err := h.deploy(p, v.path, exe, v.procs, nil, goEnv...); err != nil {
			return err
		}
	}
	return nil
}

func plantPerfdata(h *Harness) error {
	p, err := h.tenant("jvms")
	if err != nil {
		return err
	}
	sleep, err := os.ReadFile("/bin/sleep")
	if err != nil {
		return err
	}
	java, err := p.Ctr.Install("/usr/lib/jvm/bin/java", sleep, 0o755)
	if err != nil {
		return err
	}
	big, small := crafted.PerfData(1<<20), crafted.PerfData(512<<10)
	for i := range 80 {
		cmd, err := h.Node.Start(p.Ctr.Cgroup, p.Ctr.Root, append([]string{java}, sleepArgs...))
		if err != nil {
			return err
		}
		// No pid namespace: the pid inside the root is the host's.
		path, data := fmt.Sprintf("/tmp/hsperfdata_root/%d", cmd.Process.Pid), big
		if i >= 70 {
			path, data = fmt.Sprintf("/tmp/hsperfdata_app/%d", cmd.Process.Pid), small
		}
		if _, err := p.Ctr.Install(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func plantBuildinfo(h *Harness) error {
	p, err := h.tenant("gobuild")
	if err != nil {
		return err
	}
	for _, v := range []struct {
		path           string
		pathLen, procs int
	}{{"/usr/bin/svc", crafted.MaxModInfo - 100, 250}, {"/usr/bin/agent", 256 << 10, 30}} {
		exe, err := craft(h.Idle(true), func(e *crafted.ELF) error { return e.SetGoBuildInfo("go1.26.0", v.pathLen) })
		if err != nil {
			return err
		}
		if err := h.deploy(p, v.path, exe, v.procs, nil, goEnv...); err != nil {
			return err
		}
	}
	return nil
}

// stuckExecutables: more than the exporter's node-wide cap of stuck reads (64).
const stuckExecutables = 72

func plantStuck(h *Harness) error {
	p, err := h.tenant("fuse")
	if err != nil {
		return err
	}
	e, err := crafted.Load("/bin/sleep")
	if err != nil {
		return err
	}
	// Everything a run reads lies below the original end of the file; the section headers
	// move 4 MiB past it, beyond any readahead, where the server holds every read.
	holdFrom := (len(e.Bytes()) + 4095) &^ 4095
	e.MoveSectionHeaders(4 << 20)
	file := filepath.Join(h.Node.Dir, "stuck-app")
	if err := e.Write(file); err != nil {
		return err
	}
	mnt := filepath.Join(p.Ctr.Root, "opt/stuck")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	if err := h.MountFUSE(mnt, file, "app", holdFrom); err != nil {
		return err
	}
	return h.startN(p, stuckExecutables, append([]string{"/opt/stuck/app"}, sleepArgs...))
}

func plantDelegated(h *Harness) error {
	p, err := h.tenant("deleg")
	if err != nil {
		return err
	}
	quota := func(cg string) error {
		if err := h.Node.Mkdir(cg, "cpu", "cpuacct"); err != nil {
			return err
		}
		return SetQuota(cg, 10000)
	}
	for i := range 2000 {
		if err := quota(fmt.Sprintf("%s/d%04d", p.Ctr.Cgroup, i)); err != nil {
			return err
		}
	}
	for i := range 200 {
		if err := quota(fmt.Sprintf("%s/x%03d", p.Cgroup, i)); err != nil {
			return err
		}
	}
	chain := p.Ctr.Cgroup
	for range 30 {
		chain += "/n"
		if err := quota(chain); err != nil {
			return err
		}
	}
	return nil
}

func plantIdentity(h *Harness) error {
	victim, err := h.tenant("victim")
	if err != nil {
		return err
	}
	attacker, err := h.tenant("attacker")
	if err != nil {
		return err
	}
	idle, err := os.ReadFile(h.Idle(true))
	if err != nil {
		return err
	}
	if err := h.deploy(victim, "/usr/bin/svc", idle, 1, nil, goEnv...); err != nil {
		return err
	}
	if _, err := attacker.Ctr.Install("/usr/bin/svc", idle, 0o755); err != nil {
		return err
	}
	uid := strings.ReplaceAll(victim.UID, "-", "_")
	for _, name := range []string{
		"kubepods-burstable-pod" + uid + ".slice/cri-containerd-" + victim.Ctr.ID + ".scope",
		"x/" + victim.Ctr.ID,
		"kubepods/burstable/pod" + victim.UID + "/" + victim.Ctr.ID,
		"kubepods-pod" + uid + ".slice/docker-" + victim.Ctr.ID + ".scope",
	} {
		cg := attacker.Ctr.Cgroup + "/" + name
		if err := h.Node.Mkdir(cg, hierarchies...); err != nil {
			return err
		}
		if err := SetQuota(cg, 100000); err != nil {
			return err
		}
		if _, err := h.Node.Start(cg, attacker.Ctr.Root, []string{"/usr/bin/svc"}, goEnv...); err != nil {
			return err
		}
	}
	return nil
}

// plantCtlchar plants the names off Kubernetes (a top-level service's cgroups, as systemd or
// docker lay them out): below a pod's container, cgroups are the container's own.
func plantCtlchar(h *Harness) error {
	top := h.Node.Parent + "/ctl"
	root := filepath.Join(h.Node.Dir, "roots", "ctl")
	if err := newRoot(root); err != nil {
		return err
	}
	idle, err := os.ReadFile(h.Idle(true))
	if err != nil {
		return err
	}
	svc, err := (Container{Root: root}).Install("/usr/bin/svc", idle, 0o755)
	if err != nil {
		return err
	}
	names := []string{"x\x01", "x\x02", "y\x1b", "y\x7f", "z\xff", "z\xfe"}
	for i, name := range names {
		cg := top + "/" + name
		if err := h.Node.Mkdir(cg, hierarchies...); err != nil {
			return err
		}
		if err := SetQuota(cg, 10000); err != nil {
			return err
		}
		if i < 2 {
			if _, err := h.Node.Start(cg, root, []string{svc}, goEnv...); err != nil {
				return err
			}
		}
	}
	h.Checker.ctlParent, h.Checker.ctlCount = top, len(names)
	return nil
}

// pidReuse is the pidreuse class's state: its two pods and how often a pid was taken over.
type pidReuse struct {
	churn, reuse *Pod
	mu           sync.Mutex
	spawned      int
	taken        int
}

func plantPidreuse(h *Harness) error {
	churn, err := h.tenant("churn")
	if err != nil {
		return err
	}
	reuse, err := h.tenant("reuse")
	if err != nil {
		return err
	}
	sleep, err := os.ReadFile("/bin/sleep")
	if err != nil {
		return err
	}
	for _, p := range []*Pod{churn, reuse} {
		if _, err := p.Ctr.Install("/usr/bin/java", sleep, 0o755); err != nil {
			return err
		}
	}
	h.pidReuse = &pidReuse{churn: churn, reuse: reuse}
	h.Checker.markers = map[string]string{reuseMarker: reuse.Ctr.Cgroup}
	return nil
}

// reuseMarker names the reuse pod's JVMs (their perf data's sun.rt.javaCommand): a series of
// the churn pod under this name carries the reuse pod's process.
const reuseMarker = "Reused"

// runPidreuse keeps 20 short-lived java processes in the churn pod; as each exits, the
// next pid is rewound (ns_last_pid) so that a process of the reuse pod gets the same pid.
func runPidreuse(ctx context.Context, h *Harness) {
	r := h.pidReuse
	perf := crafted.PerfDataStrings(map[string]string{"sun.rt.javaCommand": reuseMarker})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				life := fmt.Sprintf("%.2f", 0.05+0.35*rand.Float64())
				cmd, err := h.Node.Start(r.churn.Ctr.Cgroup, r.churn.Ctr.Root, []string{"/usr/bin/java", life})
				if err != nil {
					h.logf("pidreuse: %v", err)
					return
				}
				pid := cmd.Process.Pid
				if !waitGone(pid, 5*time.Second) {
					continue
				}
				h.reuseMu.Lock() // one rewind at a time
				_ = os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0o644)
				next, err := h.Node.Start(r.reuse.Ctr.Cgroup, r.reuse.Ctr.Root, []string{"/usr/bin/java", "1.5"})
				h.reuseMu.Unlock()
				if err != nil {
					h.logf("pidreuse: %v", err)
					return
				}
				_, _ = r.reuse.Ctr.Install(fmt.Sprintf("/tmp/hsperfdata_root/%d", next.Process.Pid), perf, 0o600)
				r.mu.Lock()
				r.spawned++
				if next.Process.Pid == pid {
					r.taken++
				}
				r.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// slowClientsPer is the slowclients class's connections per exporter.
const slowClientsPer = 200

// plantSlowClients makes the node an ordinary busy one, 300 pods of one empty container
// each, so that each response the slow clients leave unread is about a megabyte.
func plantSlowClients(h *Harness) error {
	for i := range 300 {
		p, err := h.Node.NewPod(fmt.Sprintf("svc-%03d", i), 10000, 64<<20, false)
		if err != nil {
			return err
		}
		h.Checker.AddPod(p)
	}
	return nil
}

// runSlowClients opens connections that request /metrics and never read the answer (with a
// small receive buffer, so the response stays in the exporter), reconnecting after the
// exporter's write timeout; and a few that send their request a byte every 5 s. They start
// spread over 30 s: a burst of more than --web.max-requests would be refused (503) by design.
func runSlowClients(ctx context.Context, h *Harness) {
	var wg sync.WaitGroup
	for _, e := range h.Exporters {
		for i := range slowClientsPer + 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Duration(rand.Int64N(int64(30 * time.Second)))):
				}
				enc := "identity"
				if i%4 == 0 {
					enc = "gzip"
				}
				req := "GET /metrics HTTP/1.1\r\nHost: " + e.Addr + "\r\nAccept-Encoding: " + enc + "\r\n\r\n"
				for ctx.Err() == nil {
					slowClient(ctx, e.Addr, req, i >= slowClientsPer)
				}
			}()
		}
	}
	wg.Wait()
}

// slowClient is one connection: the request at once (or a byte every 5 s when trickle),
// then nothing read.
func slowClient(ctx context.Context, addr, req string, trickle bool) {
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second): // the exporter is down: try again soon
		}
		return
	}
	defer conn.Close()
	if trickle {
		for i := 0; i < len(req) && ctx.Err() == nil; i++ {
			if _, err := conn.Write([]byte{req[i]}); err != nil {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	} else if _, err := conn.Write([]byte(req)); err != nil {
		return
	}
	// Hold the connection without reading a byte, a little longer than the exporter's write
	// timeout (30 s), after which it has given up on this one; then come again.
	select {
	case <-ctx.Done():
	case <-time.After(35 * time.Second):
	}
}

// Hog is a C program that keeps N MiB resident and sleeps (a process above
// --process.min-resident).
const hogSource = `#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
	size_t n = (size_t)atoi(argc > 1 ? argv[1] : "80") << 20;
	char *p = malloc(n);
	if (!p) return 1;
	memset(p, 1, n);
	for (;;) pause();
}
`
