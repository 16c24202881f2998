package testutil

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// V1Root is where this host mounts its v1 hierarchies (one directory per controller).
const V1Root = "/sys/fs/cgroup"

// testParent groups every cgroup the tests create, so a crashed run is easy to clean up. A
// systemd-style slice: each test's cgroup below it is a tenant of its own for the
// exporter's budgets (budget.TenantOf), as the units below system.slice are, so tests that
// run at once do not share one tenant's budget.
const testParent = "quota_exporter_test.slice"

// topPrefix names the cgroups NewTopCgroup makes below the hierarchies' roots.
const topPrefix = "quota_exporter_test"

// Cgroup is a real v1 cgroup created for one test in the cpu, cpuacct and memory hierarchies.
type Cgroup struct {
	// Path is the cgroup path from the hierarchy root, e.g. /quota_exporter_test.slice/burn-1234.
	Path string
	t    testing.TB
}

// CgroupOptions are the limits to set; zero means unlimited.
type CgroupOptions struct {
	QuotaUS     int64 // cpu.cfs_quota_us
	PeriodUS    int64 // cpu.cfs_period_us, default 100000
	MemoryLimit int64 // memory.limit_in_bytes
	// Shares is cpu.shares (default 1024). Only a cgroup at the top (NewTopCgroup) competes
	// with the host's other work on its shares.
	Shares int64
}

var v1Controllers = []string{"cpu", "cpuacct", "memory"}

// RequireV1Cgroups skips (fails on CI) unless the test can create v1 cgroups here.
func RequireV1Cgroups(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	for _, c := range v1Controllers {
		_, err := os.Stat(filepath.Join(V1Root, c, "cgroup.procs"))
		Require(t, err == nil, "v1 "+c+" hierarchy not mounted at "+filepath.Join(V1Root, c))
	}
}

// NewCgroup creates a cgroup named after the test and removes it (killing what the
// test left in it) when the test ends.
func NewCgroup(t testing.TB, name string, opts CgroupOptions) *Cgroup {
	t.Helper()
	SkipShort(t, "real cgroups")
	RequireV1Cgroups(t)
	rel := fmt.Sprintf("/%s/%s-%d-%d", testParent, name, os.Getpid(), time.Now().UnixNano()%1e6)
	return newCgroupAt(t, rel, opts)
}

// NewTopCgroup is NewCgroup directly below the hierarchies' roots, where its cpu.shares weigh
// against the host's other processes: a test whose workload must get its quota's worth of CPU
// on a busy machine (throttling patterns need it) gives it Shares. Its quota caps what it takes.
func NewTopCgroup(t testing.TB, name string, opts CgroupOptions) *Cgroup {
	t.Helper()
	SkipShort(t, "real cgroups")
	RequireV1Cgroups(t)
	return newCgroupAt(t, fmt.Sprintf("/%s-%s-%d-%d", topPrefix, name, os.Getpid(), time.Now().UnixNano()%1e6), opts)
}

// Child creates a cgroup called name (one path element, used as is: a kubepods-style
// layout needs exact names) directly below c; it is removed before c.
func (c *Cgroup) Child(name string, opts CgroupOptions) *Cgroup {
	c.t.Helper()
	return newCgroupAt(c.t, c.Path+"/"+name, opts)
}

// Remove kills what is left in the cgroup and removes it now, as a container runtime does
// when the container has ended.
func (c *Cgroup) Remove() { c.remove() }

func newCgroupAt(t testing.TB, rel string, opts CgroupOptions) *Cgroup {
	t.Helper()
	cg := &Cgroup{Path: rel, t: t}
	for _, c := range v1Controllers {
		if err := os.MkdirAll(cg.Dir(c), 0o755); err != nil {
			t.Fatalf("create cgroup: %v", err)
		}
	}
	t.Cleanup(cg.remove)
	if opts.PeriodUS > 0 {
		cg.Write("cpu", "cpu.cfs_period_us", strconv.FormatInt(opts.PeriodUS, 10))
	}
	if opts.QuotaUS > 0 {
		cg.Write("cpu", "cpu.cfs_quota_us", strconv.FormatInt(opts.QuotaUS, 10))
	}
	if opts.Shares > 0 {
		cg.Write("cpu", "cpu.shares", strconv.FormatInt(opts.Shares, 10))
	}
	if opts.MemoryLimit > 0 {
		cg.Write("memory", "memory.limit_in_bytes", strconv.FormatInt(opts.MemoryLimit, 10))
	}
	return cg
}

// Dir is the cgroup's directory in one controller's hierarchy.
func (c *Cgroup) Dir(controller string) string {
	return filepath.Join(V1Root, controller, c.Path)
}

// Write writes a control file, failing the test on error.
func (c *Cgroup) Write(controller, file, value string) {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.Dir(controller), file), []byte(value), 0o644); err != nil {
		c.t.Fatalf("write %s/%s: %v", controller, file, err)
	}
}

// ReadKeyed reads a "key value" file such as cpu.stat or memory.stat directly: the ground truth
// tests compare the exporter against.
func (c *Cgroup) ReadKeyed(controller, file string) map[string]uint64 {
	c.t.Helper()
	out, err := ReadKeyedFile(filepath.Join(c.Dir(controller), file))
	if err != nil {
		c.t.Fatalf("read %s: %v", file, err)
	}
	return out
}

// ReadKeyedFile is ReadKeyed for any path, returning the error (for a goroutine, which must
// not fail the test).
func ReadKeyedFile(path string) (map[string]uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, s.Err()
}

// Command returns a command that joins this cgroup (every controller) before it execs
// name, so no CPU is spent outside the quota.
func (c *Cgroup) Command(name string, args ...string) *exec.Cmd {
	script := `for d in ` + c.quotedDirs() + `; do echo $$ > "$d/cgroup.procs" || exit 111; done; exec "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh", name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func (c *Cgroup) quotedDirs() string {
	var q []string
	for _, ctl := range v1Controllers {
		q = append(q, "'"+c.Dir(ctl)+"'")
	}
	return strings.Join(q, " ")
}

// PIDs lists the processes in the cgroup (cpu hierarchy).
func (c *Cgroup) PIDs() []int {
	b, _ := os.ReadFile(filepath.Join(c.Dir("cpu"), "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// remove kills what the test left in the cgroup (only the test's own children live there)
// and removes the directories, retrying briefly while the kernel reaps them.
func (c *Cgroup) remove() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, pid := range c.PIDs() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		var failed error
		for _, ctl := range v1Controllers {
			if err := os.Remove(c.Dir(ctl)); err != nil && !os.IsNotExist(err) {
				failed = err
			}
		}
		if failed == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Errorf("cgroup %s not removed: %v", c.Path, failed)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
