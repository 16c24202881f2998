package goruntime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quota-exporter/quota_exporter/exporter/internal/testutil"
)

// programs are the real Go binaries the tests inspect, built once per test binary run.
type programs struct {
	go126, go124, amp string // go.mod "go 1.26", "go 1.24", and go 1.26 + automaxprocs v1.6.0
}

// buildPrograms builds the test programs once per test binary run (testutil.BuildGoFiles),
// each from a copy of testdata so the build never writes into it. Module and build caches are
// the user's, so only the first run anywhere downloads automaxprocs (from the module proxy,
// checked against testdata/automaxprocs/go.sum).
func buildPrograms(t *testing.T) programs {
	t.Helper()
	read := func(path ...string) []byte {
		b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, path...)...))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	src := read("prog", "main.go")
	module := func(gomod string) map[string][]byte {
		return map[string][]byte{"main.go": src, "go.mod": []byte(gomod)}
	}
	amp := map[string][]byte{"main.go": src}
	for _, f := range []string{"go.mod", "go.sum", "amp.go"} {
		amp[f] = read("automaxprocs", f)
	}
	return programs{
		go126: testutil.BuildGoFiles(t, "prog", module("module example.com/go126\n\ngo 1.26\n")),
		go124: testutil.BuildGoFiles(t, "prog", module("module example.com/go124\n\ngo 1.24\n")),
		amp:   testutil.BuildGoFiles(t, "prog", amp),
	}
}

// started is a running test program and the GOMAXPROCS values it printed.
type started struct {
	pid            int
	start, settled int
	changed        chan int // later values the program reports
}

// run starts cmd and waits until the program has printed its settled GOMAXPROCS.
func run(t *testing.T, cmd *exec.Cmd, env ...string) started {
	t.Helper()
	cmd.Env = append(cleanEnv(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	s := started{pid: cmd.Process.Pid, changed: make(chan int, 16)}
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			k, v, _ := strings.Cut(sc.Text(), " ")
			n, _ := strconv.Atoi(v)
			switch k {
			case "start":
				s.start = n
			case "settled":
				s.settled = n
				done <- nil
			case "changed":
				select {
				case s.changed <- n:
				default:
				}
			}
		}
		select {
		case done <- fmt.Errorf("program exited before printing GOMAXPROCS: %v", sc.Err()):
		default:
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for the program's GOMAXPROCS")
	}
	return s
}

// cleanEnv drops GOMAXPROCS and GODEBUG the test itself may have inherited.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") && !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	return env
}

func TestInspectRealPrograms(t *testing.T) {
	testutil.RequireV1Cgroups(t)
	p := buildPrograms(t)
	taskset := testutil.LookPath(t, "taskset")
	half := CPUQuota{QuotaUS: 50000, PeriodUS: 100000}
	three := CPUQuota{QuotaUS: 300000, PeriodUS: 100000}
	cases := []struct {
		name     string
		bin      string
		quota    CPUQuota
		env      []string
		cpu0     bool // run under taskset -c 0 (affinity 1)
		want     int  // 0: no fixed expectation beyond matching the program
		source   Source
		aware    bool
		automax  bool
		debugOff bool // DefaultGODEBUG has containermaxprocs=0 and updatemaxprocs=0
	}{
		{name: "go1.26 module under 0.5 core", bin: p.go126, quota: half, want: 2, source: SourceContainer, aware: true},
		{name: "go1.26 module affinity 1 beats the floor of 2", bin: p.go126, quota: half, cpu0: true, want: 1, source: SourceContainer, aware: true},
		{name: "go1.26 module GOMAXPROCS=16", bin: p.go126, quota: half, env: []string{"GOMAXPROCS=16"}, want: 16, source: SourceEnv, aware: true},
		{name: "go1.26 module GOMAXPROCS=76", bin: p.go126, quota: half, env: []string{"GOMAXPROCS=76"}, want: 76, source: SourceEnv, aware: true},
		{name: "go1.26 module GODEBUG containermaxprocs=0", bin: p.go126, quota: half, env: []string{"GODEBUG=containermaxprocs=0"}, want: 2, source: SourceAffinity},
		{name: "go1.26 module GODEBUG updatemaxprocs=0", bin: p.go126, quota: half, env: []string{"GODEBUG=updatemaxprocs=0"}, want: 2, source: SourceContainer, aware: true},
		{name: "go1.24 module under 0.5 core", bin: p.go124, quota: half, want: 2, source: SourceAffinity, debugOff: true},
		{name: "go1.24 module GODEBUG containermaxprocs=1", bin: p.go124, quota: half, env: []string{"GODEBUG=containermaxprocs=1"}, want: 2, source: SourceContainer, aware: true, debugOff: true},
		{name: "automaxprocs under 0.5 core", bin: p.amp, quota: half, want: 1, source: SourceAutoMaxProcs, aware: true, automax: true},
		{name: "automaxprocs under 3 cores on 2 CPUs", bin: p.amp, quota: three, want: 3, source: SourceAutoMaxProcs, aware: true, automax: true},
		{name: "automaxprocs without quota", bin: p.amp, want: 2, source: SourceContainer, aware: true, automax: true},
		{name: "automaxprocs GOMAXPROCS=5", bin: p.amp, quota: half, env: []string{"GOMAXPROCS=5"}, want: 5, source: SourceEnv, aware: true, automax: true},
		{name: "automaxprocs empty GOMAXPROCS", bin: p.amp, quota: half, env: []string{"GOMAXPROCS="}, want: 2, source: SourceContainer, aware: true, automax: true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cg := testutil.NewCgroup(t, fmt.Sprintf("goruntime%d", i), testutil.CgroupOptions{QuotaUS: tc.quota.QuotaUS, PeriodUS: tc.quota.PeriodUS})
			cmd := cg.Command(tc.bin)
			if tc.cpu0 {
				cmd = cg.Command(taskset, "-c", "0", tc.bin)
			}
			s := run(t, cmd, tc.env...)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			info, err := Inspect(ctx, "/proc", s.pid, tc.quota)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("printed start=%d settled=%d; Inspect: GOMAXPROCS=%d source=%s aware=%v affinity=%d version=%s DefaultGODEBUG=%q",
				s.start, s.settled, info.GOMAXPROCS, info.Source, info.ContainerAware, info.Affinity, info.GoVersion, info.DefaultGODEBUG)
			if !info.IsGo {
				t.Fatal("not detected as Go")
			}
			if info.GOMAXPROCS != s.settled {
				t.Errorf("Inspect GOMAXPROCS = %d, program printed %d", info.GOMAXPROCS, s.settled)
			}
			if s.start != s.settled {
				t.Errorf("GOMAXPROCS changed after start: %d -> %d", s.start, s.settled)
			}
			if tc.want != 0 && s.settled != tc.want {
				t.Errorf("program printed %d, expected %d on this host", s.settled, tc.want)
			}
			if info.Source != tc.source || info.ContainerAware != tc.aware || info.AutoMaxProcs != tc.automax {
				t.Errorf("Source, ContainerAware, AutoMaxProcs = %s, %v, %v; want %s, %v, %v",
					info.Source, info.ContainerAware, info.AutoMaxProcs, tc.source, tc.aware, tc.automax)
			}
			gd := ParseGODEBUG(info.DefaultGODEBUG)
			if off := gd["containermaxprocs"] == "0" && gd["updatemaxprocs"] == "0"; off != tc.debugOff {
				t.Errorf("DefaultGODEBUG %q: containermaxprocs/updatemaxprocs off = %v, want %v", info.DefaultGODEBUG, off, tc.debugOff)
			}
			if !strings.HasPrefix(info.MainModule, "example.com/") || !strings.HasPrefix(info.GoVersion, "go1.") {
				t.Errorf("MainModule %q, GoVersion %q", info.MainModule, info.GoVersion)
			}
		})
	}
}

// TestInspectFollowsAffinityUpdate widens a running Go 1.26 program's affinity from 1 CPU to 2:
// the runtime re-checks about once a second and Inspect reads the current mask.
func TestInspectFollowsAffinityUpdate(t *testing.T) {
	testutil.RequireV1Cgroups(t)
	p := buildPrograms(t)
	taskset := testutil.LookPath(t, "taskset")
	half := CPUQuota{QuotaUS: 50000, PeriodUS: 100000}
	cg := testutil.NewCgroup(t, "goruntime-update", testutil.CgroupOptions{QuotaUS: half.QuotaUS, PeriodUS: half.PeriodUS})
	s := run(t, cg.Command(taskset, "-c", "0", p.go126))
	info, err := Inspect(context.Background(), "/proc", s.pid, half)
	if err != nil {
		t.Fatal(err)
	}
	if s.settled != 1 || info.GOMAXPROCS != 1 {
		t.Fatalf("before: program %d, Inspect %d; want 1", s.settled, info.GOMAXPROCS)
	}
	// -a: every thread, sysmon's included (the runtime asks sched_getaffinity of its own thread).
	if out, err := exec.Command(taskset, "-a", "-p", "-c", "0-1", strconv.Itoa(s.pid)).CombinedOutput(); err != nil {
		t.Fatalf("taskset: %v\n%s", err, out)
	}
	select {
	case n := <-s.changed:
		info, err := Inspect(context.Background(), "/proc", s.pid, half)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("after widening: program %d, Inspect %d (%s)", n, info.GOMAXPROCS, info.Source)
		if n != 2 || info.GOMAXPROCS != n {
			t.Errorf("after: program %d, Inspect %d; want 2", n, info.GOMAXPROCS)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("program did not update GOMAXPROCS after its affinity widened")
	}
}

func TestInspectNotGo(t *testing.T) {
	cmd := exec.Command(testutil.LookPath(t, "sleep"), "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	info, err := Inspect(context.Background(), "/proc", cmd.Process.Pid, CPUQuota{})
	if err != nil {
		t.Fatalf("Inspect(sleep) error: %v", err)
	}
	if info.IsGo || info.GOMAXPROCS != 0 {
		t.Errorf("sleep detected as Go: %+v", info)
	}
}

func TestInspectSelf(t *testing.T) {
	// The test binary is a Go program: no cgroup needed to check detection and build info.
	info, err := Inspect(context.Background(), "/proc", os.Getpid(), CPUQuota{})
	if err != nil {
		t.Fatal(err)
	}
	if !info.IsGo || !strings.HasPrefix(info.GoVersion, "go1.") || info.Affinity < 1 || info.GOMAXPROCS < 1 {
		t.Errorf("self: %+v", info)
	}
}

func TestInspectVanished(t *testing.T) {
	cmd := exec.Command(testutil.LookPath(t, "true"))
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	_, err := Inspect(context.Background(), "/proc", cmd.Process.Pid, CPUQuota{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Inspect(exited pid) = %v, want os.ErrNotExist", err)
	}
}

// TestInspectPermission inspects a root process as an unprivileged user: opening
// /proc/<pid>/exe needs ptrace-read access, so the error must match os.ErrPermission. As root the
// test re-runs itself as nobody (uid 65534) from a copy of the test binary nobody can execute.
func TestInspectPermission(t *testing.T) {
	if pid := os.Getenv("GORUNTIME_TEST_TARGET_PID"); pid != "" {
		n, _ := strconv.Atoi(pid)
		_, err := Inspect(context.Background(), "/proc", n, CPUQuota{})
		if !errors.Is(err, os.ErrPermission) {
			t.Fatalf("Inspect(root process) as uid %d = %v, want os.ErrPermission", os.Geteuid(), err)
		}
		return
	}
	testutil.RequireRoot(t)
	target := exec.Command(testutil.LookPath(t, "sleep"), "60")
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = target.Process.Kill()
		_ = target.Wait()
	})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "goruntime-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "goruntime.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestInspectPermission$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "GORUNTIME_TEST_TARGET_PID="+strconv.Itoa(target.Process.Pid))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestInspectPermission") {
		t.Fatalf("unprivileged run: %v\n%s", err, out)
	}
}
