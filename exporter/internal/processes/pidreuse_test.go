//go:build linux

package processes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/cgroups"
	"github.com/quota-exporter/quota_exporter/exporter/internal/procenv"
	"github.com/quota-exporter/quota_exporter/exporter/internal/readerr"
	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// reusePID starts cmd with the PID pid (free, just released), by setting the kernel's last
// PID before the fork; it retries while other processes of the host take it first.
func reusePID(t *testing.T, pid int, cmd func() *exec.Cmd) *exec.Cmd {
	t.Helper()
	for range 500 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0o644); err != nil {
			t.Skipf("cannot choose the next PID: %v", err)
		}
		c := cmd()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if c.Process.Pid == pid {
			t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
			return c
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	t.Fatalf("PID %d was taken by other processes 500 times", pid)
	return nil
}

// sourceOf is a process source over the cgroup at path alone ("": every cgroup) of this host.
func sourceOf(t *testing.T, path string) (*Source, *cgroups.Source) {
	t.Helper()
	o := cgroups.Options{ProcPath: "/proc", SysPath: "/sys"}
	if path != "" {
		o.Include = regexp.MustCompile("^" + regexp.QuoteMeta(path) + "$")
	}
	cgs, err := cgroups.New(o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	src, err := New("/proc", cgs, nil, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return src, cgs
}

// A reader that reads by PID after the process exited and a new one took the PID must not
// hand the new process's files over as the old one's: the process source re-checks the
// start time after each read (Each) and drops the reading.
func TestEachDiscardsReadingOfReusedPID(t *testing.T) {
	cg := testutil.NewCgroup(t, "pidreuse", testutil.CgroupOptions{})
	start := func(mark string) func() *exec.Cmd {
		return func() *exec.Cmd {
			c := cg.Command("sleep", "600")
			c.Env = append(os.Environ(), "QE_MARK="+mark)
			return c
		}
	}
	a := start("first")()
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Process.Kill(); _ = a.Wait() })
	src, cgroups := sourceOf(t, cg.Path)
	var listed *Process
	for range 500 { // until the shell that joins the cgroup has exec'd sleep
		src.Expire()
		cgroups.Expire()
		if ps, _ := src.Processes(context.Background()); len(ps) == 1 && ps[0].Stat.Comm == "sleep" {
			listed = ps[0]
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if listed == nil {
		t.Fatal("the process was not listed")
	}
	mark := func(ctx context.Context, p *Process) (string, error) {
		env, err := procenv.Lookup(ctx, "/proc", p.PID, "QE_MARK")
		return env["QE_MARK"], err
	}
	if r := Each(context.Background(), src, []*Process{listed}, "environ", mark)[0]; r.Err != nil || r.Value != "first" {
		t.Fatalf("the listed process's own read: %q, %v", r.Value, r.Err)
	}
	_ = a.Process.Kill()
	_ = a.Wait()
	b := reusePID(t, listed.PID, start("second"))
	t.Logf("PID %d reused by a new process", b.Process.Pid)
	r := Each(context.Background(), src, []*Process{listed}, "environ", mark)[0]
	if r.Err == nil {
		t.Fatalf("a read of the old process by its reused PID returned %q, the new process's", r.Value)
	}
	if !errors.Is(r.Err, os.ErrNotExist) {
		t.Errorf("the reused PID's reading is dropped as %v, want a vanished process", r.Err)
	}
}

// The walk lists a cgroup's PIDs; the listing reads their stat later (the walk is shared and
// cached for up to DiscoveryMaxAge). A process that took a listed PID after the walk, from
// any cgroup, is not the listed cgroup's: it is not listed under it (the hostile node's
// pidreuse class had a compiler of the host exported in a tenant's pod).
func TestListingDropsPIDTakenAfterTheWalk(t *testing.T) {
	cg := testutil.NewCgroup(t, "pidwalk", testutil.CgroupOptions{})
	a := cg.Command("sleep", "600")
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Process.Kill(); _ = a.Wait() })
	src, cgs := sourceOf(t, cg.Path)
	cgs.MaxAge = time.Hour // the listing reads the walk below, as a scrape within its cache age does
	var pid int
	for range 500 { // until the shell that joins the cgroup has exec'd sleep
		src.Expire()
		cgs.Expire()
		if ps, _ := src.Processes(context.Background()); len(ps) == 1 && ps[0].Stat.Comm == "sleep" {
			pid = ps[0].PID
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("the process was not listed")
	}
	_ = a.Process.Kill()
	_ = a.Wait()
	time.Sleep(30 * time.Millisecond)                                          // past the walk's tick
	reusePID(t, pid, func() *exec.Cmd { return exec.Command("sleep", "600") }) // not in the cgroup
	src.Expire()
	ps, _ := src.Processes(context.Background())
	for _, p := range ps {
		t.Errorf("PID %d (%s), started after the walk outside %s, listed under %s", p.PID, p.Stat.Comm, cg.Path, p.Cgroup.Path)
	}
}

// A process that exits between the walk's listing and the read is normal churn: its error
// is counted as vanished, not as a read error.
func TestReadOfExitedProcessIsVanished(t *testing.T) {
	testutil.RequireRoot(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	src, _ := sourceOf(t, "")
	_, err := src.readStat(procItem{pid: pid})
	if r := readerr.Reason(err); r != "vanished" {
		t.Errorf("reading an exited process: %v (reason %q), want vanished", err, r)
	}
}
